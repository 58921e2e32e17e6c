-- Durable Lua sinks that fail partway through a group (OUTBOX-9 in
-- core/outbox.c): the retry resumes after the last change the sink
-- returned from, so each change reaches it once, with the same info.n.
local runnel = require "runnel"
local H = require "helper"

describe("a durable Lua sink failing on the k-th change of a group", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  -- A sink on t that raises on the change whose k is fail_on (once per
  -- arming), logging "seq:n:k" for every change it accepts and "commit seq".
  local function flaky(t, got, name, opts)
    local arm = { fail_on = nil, commit_fails = false }
    t:sink{ durable = true, name = name or "flaky", consolidate = opts and opts.consolidate,
      insert = function(row, info)
        if arm.fail_on == row.k then arm.fail_on = nil; error("down at " .. row.k) end
        got[#got + 1] = ("%d:%d:%d"):format(info.seq, info.n, row.k)
      end,
      commit = function(seq)
        if arm.commit_fails then arm.commit_fails = false; error("commit down") end
        got[#got + 1] = "commit " .. seq
      end }
    return arm
  end

  it("gets the changes after the failed one on retry, each once, then commit", function()
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, key = "k" })
    local got = {}
    local arm = flaky(t, got)
    arm.fail_on = 3
    p:batch(function() for k = 1, 5 do t:insert{ k = k } end end)
    assert.same({ "1:1:1", "1:2:2" }, got)
    assert.same({ ["t: durable sink flaky"] = 1 }, p:stats().outbox)
    p:deliver()
    assert.same({ "1:1:1", "1:2:2", "1:3:3", "1:4:4", "1:5:5", "commit 1" }, got)
    assert.same({ ["t: durable sink flaky"] = 0 }, p:stats().outbox)
    t:insert{ k = 6 }
    assert.same("2:1:6", got[7])
    p:close()
  end)

  it("gets only commit(seq) again when commit failed after every change", function()
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, key = "k" })
    local got = {}
    local arm = flaky(t, got)
    arm.commit_fails = true
    p:batch(function() t:insert{ k = 1 }; t:insert{ k = 2 } end)
    assert.same({ "1:1:1", "1:2:2" }, got)
    p:deliver()
    assert.same({ "1:1:1", "1:2:2", "commit 1" }, got)
    p:close()
  end)

  it("resumes in the same place after a close and a new open", function()
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, key = "k" })
    local got = {}
    t:sink{ durable = true, name = "flaky", -- fails on k = 2 until the state is closed
      insert = function(row, info)
        if row.k == 2 then error("down") end
        got[#got + 1] = ("%d:%d:%d"):format(info.seq, info.n, row.k)
      end }
    p:batch(function() for k = 1, 3 do t:insert{ k = k } end end)
    p:close() -- retried there, and failed again
    assert.same({ "1:1:1" }, got)
    p = runnel.open(dir .. "/s")
    t = p:table("t", { {"k","int"}, key = "k" })
    got = {}
    flaky(t, got)
    assert.same({ "1:2:2", "1:3:3", "commit 1" }, got)
    t:insert{ k = 4 }
    assert.same({ "1:2:2", "1:3:3", "commit 1", "2:1:4", "commit 2" }, got)
    p:close()
  end)

  it("resumes by position in the recorded group with consolidate = true", function()
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, {"v","int", null = true}, key = "k" })
    local got = {}
    local arm = flaky(t, got, "c", { consolidate = true })
    arm.fail_on = 2
    p:batch(function()
      t:insert{ k = 1 }; t:insert{ k = 2 }; t:update{ k = 1, v = 5 }; t:insert{ k = 3 }
    end)
    assert.same({ "1:1:1" }, got)
    p:deliver()
    assert.same({ "1:1:1", "1:2:2", "1:3:3", "commit 1" }, got)
    p:close()
  end)

  it("starts the next group whole after a group that was resumed", function()
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, key = "k" })
    local got = {}
    local arm = flaky(t, got)
    arm.fail_on = 2
    p:batch(function() t:insert{ k = 1 }; t:insert{ k = 2 } end)
    assert.same({ "1:1:1" }, got)
    arm.fail_on = 4
    -- its commit retries group 1 (resumed), then group 2 fails at its second change
    p:batch(function() t:insert{ k = 3 }; t:insert{ k = 4 } end)
    assert.same({ "1:1:1", "1:2:2", "commit 1", "2:1:3" }, got)
    p:deliver()
    assert.same({ "1:1:1", "1:2:2", "commit 1", "2:1:3", "2:2:4", "commit 2" }, got)
    p:close()
  end)
end)
