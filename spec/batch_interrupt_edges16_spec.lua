-- p:batch(fn) interrupted at any point. Ctrl-C in the REPL (and SIGINT in
-- runnel run) sets a hook that raises "interrupted!" at the next call,
-- return or instruction, which may be one of p:batch's own, between its
-- begin and the protected call of fn. Before, such an error escaped p:batch
-- with its group left open, and (a few instructions later) with the batch
-- still counted: p:commit and p:rollback then refused ("inside p:batch(fn)
-- the group is the batch's") and every later p:batch failed to begin, for
-- the rest of the session. Here a one-shot hook raises at the nth event,
-- for every n through the whole batch.
local runnel = require "runnel"
local H = require "helper"

describe("p:batch interrupted at its nth hook event", function()
  after_each(H.cleanup)

  it("never leaves its group open nor the batch counted", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, key = "id" })
    local log = {}
    t:sink(function(verb, row) log[#log + 1] = row.id end)
    local raised, finished = 0, false
    for n = 1, 400 do
      local id = n
      local fired = false
      local ok, err = pcall(function()
        local count = 0
        debug.sethook(function()
          count = count + 1
          if count == n then
            debug.sethook()
            fired = true
            error("interrupted!")
          end
        end, "cr", 1) -- as the CLI's interrupt_hook: calls, returns and every instruction
        p:batch(function() t:insert{ id = id } end)
        debug.sethook()
      end)
      debug.sethook()
      assert.is_false(p:in_group(), ("n = %d: the group was left open (%s)"):format(n, tostring(err)))
      if not ok then
        raised = raised + 1
        assert.matches("interrupted!", tostring(err), 1, true)
      end
      -- the pipeline works on: a batch of its own commits, the row kept or not, whole
      t:upsert{ id = 100000 + n }
      local seq = p:batch(function() t:insert{ id = 200000 + n } end)
      assert.equal(p:seq(), seq)
      if not fired then finished = true break end
    end
    assert.is_true(finished, "the hook never let the batch finish")
    assert.is_true(raised > 0)
    -- what the sink saw is what the table holds
    local seen = {}
    for _, id in ipairs(log) do seen[id] = true end
    for row in t:rows() do assert.is_true(seen[row.id], "the sink never saw " .. row.id) end
    p:close()
  end)

  it("in a coroutine closed while fn is suspended rolls back and uncounts it", function()
    -- coroutine.close is Lua 5.4's way to abandon a coroutine (a request
    -- served by one, cancelled): before, the group stayed open and the
    -- batch counted, so p:rollback and every later p:batch were refused.
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, key = "id" })
    local co = coroutine.create(function()
      p:batch(function() t:insert{ id = 1 }; coroutine.yield(); t:insert{ id = 2 } end)
    end)
    assert.is_true(coroutine.resume(co))
    assert.is_true(p:in_group())
    assert.is_true(coroutine.close(co))
    assert.is_false(p:in_group())
    assert.equal(0, t:count())
    assert.equal(1, p:batch(function() t:insert{ id = 3 } end))
    p:begin()
    p:rollback()
    assert.same({ 3 }, (function() local ids = {} for r in t:rows() do ids[#ids + 1] = r.id end return ids end)())
    p:close()
  end)

  it("keeps its errors at the caller's line: fn's, and the commit's", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, key = "id" })
    local ok, err = pcall(function() p:batch(function() t:insert{ id = "x" } end) end)
    assert.is_false(ok)
    assert.matches("^[^\n]*batch_interrupt_edges16_spec%.lua:%d+: t: column \"id\"", err)
    t:sink{ commit = function() error("refused at commit") end }
    ok, err = pcall(function() p:batch(function() t:insert{ id = 1 } end) end)
    assert.is_false(ok)
    assert.matches("^[^\n]*batch_interrupt_edges16_spec%.lua:%d+: .*refused at commit", err)
    assert.is_false(p:in_group())
    assert.equal(0, t:count())
    ok, err = pcall(function() p:begin(); p:batch(function() end) end)
    assert.is_false(ok)
    assert.matches("^[^\n]*batch_interrupt_edges16_spec%.lua:%d+: ", err)
    assert.is_true(p:in_group()) -- the group open before the batch is not the batch's to roll back
    p:rollback()
    p:close()
  end)
end)
