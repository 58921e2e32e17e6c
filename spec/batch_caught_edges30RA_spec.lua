-- p:batch(fn) whose fn caught a change's error (batch_caught_edges30A): the
-- group is rolled back and later changes are refused, but what is refused
-- inside a group only because a group is open — declaring a relation,
-- adding a sink, p:drop — found none open and was done, committed on its
-- own, while the batch raised "nothing fn did is committed": a relation
-- declared there was in the state afterwards.
local runnel = require "runnel"
local H = require "helper"

describe("p:batch whose fn caught a change's error (edges30RA)", function()
  local dir, p, t
  before_each(function()
    dir = H.tmpdir()
    p = runnel.open{ path = dir .. "/st", notes = false }
    p:table("u", { {"id","int"}, key = "id" }) -- in the state, not declared by the pipeline p:drop sees
    p:close()
    p = runnel.open{ path = dir .. "/st", notes = false }
    t = p:table("t", { {"id","int"}, key = "id" })
    t:insert{ id = 1 }
  end)
  after_each(function() p:close() H.cleanup() end)

  it("refuses declarations, sinks and drops in fn after it, and none is in the state", function()
    local errs = {}
    local calls = {
      function() p:table("w", { {"id","int"}, key = "id" }) end,
      function() t:filter(function() return true end, "f") end,
      function() t:sink(function() end) end,
      function() t:sink(runnel.ndjson(dir .. "/out.ndjson")) end,
      function() p:drop("u") end,
    }
    local err = H.error_of(p.batch, p, function()
      t:insert{ id = 2 }
      assert.is_false(pcall(t.insert, t, { id = 1 }))
      for _, call in ipairs(calls) do
        local ok, e = pcall(call)
        errs[#errs + 1] = ok and "done" or e:gsub("^[^:]*:%d+: ", "")
      end
    end)
    assert.equal("batch: the group was rolled back by an error fn caught; nothing fn did is committed", err)
    local lost = "the group of p:batch(fn) was rolled back by an error fn caught; let that error raise out of fn"
    assert.equal(#calls, #errs)
    for _, e in ipairs(errs) do assert.truthy(e:find(lost, 1, true), e) end
    assert.is_nil(p:relation("w"))
    assert.is_nil(p:relation("f"))
    p:close()
    local out = H.sh(("%s inspect '%s'"):format(H.runnel_bin, dir .. "/st"))
    assert.not_matches("\n w ", out)
    assert.not_matches("\n f ", out)
    assert.matches("\n u ", out)
    assert.is_nil(io.open(dir .. "/out.ndjson"))
    p = runnel.open{ path = dir .. "/st", notes = false }
  end)

  it("leaves them refused inside a batch's open group as before, and allowed after the batch", function()
    local err = H.error_of(p.batch, p, function() p:table("w", { {"id","int"}, key = "id" }) end)
    assert.matches("relations are declared outside groups", err)
    assert.is_false(pcall(p.batch, p, function() pcall(t.insert, t, { id = 1 }) end))
    p:table("w", { {"id","int"}, key = "id" })
    t:sink(function() end)
    p:drop("u")
    assert.truthy(p:relation("w"))
  end)
end)
