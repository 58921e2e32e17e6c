-- runnel.inspect(path).outbox_waiting (round 13): the groups waiting for
-- durable sinks, seen from outside the pipeline, as runnel inspect lists
-- them and in the shape of p:stats().outbox_undeclared. Before, only the
-- CLI showed them; a script or the REPL looking at a state could not.
local runnel = require "runnel"
local H = require "helper"

local cols = { {"k","int"}, {"g","int"}, key = "k" }

describe("runnel.inspect's outbox_waiting", function()
  local dir, state
  before_each(function() dir = H.tmpdir(); state = dir .. "/s" end)
  after_each(H.cleanup)

  local function open() return runnel.open{ path = state, notes = false } end

  -- t with the durable sink d failing: groups 1 (k 1, k 2) and 2 (k 3) wait;
  -- the sink e takes every group.
  local function leave_waiting()
    local p = open()
    local t = p:table("t", cols)
    t:sink(function() error("down") end, { durable = true, name = "d" })
    t:sink(function() end, { durable = true, name = "e" })
    p:batch(function() t:insert{ k = 1, g = 1 }; t:insert{ k = 2, g = 1 } end)
    t:insert{ k = 3, g = 1 }
    p:close()
  end

  it("is empty for a state nothing waits in", function()
    local p = open()
    local t = p:table("t", cols)
    t:sink(function() end, { durable = true, name = "e" })
    t:insert{ k = 1, g = 1 }
    p:close()
    local st = runnel.inspect(state)
    assert.equal(1, st.seq)
    assert.same({}, st.outbox_waiting)
  end)

  it("lists each sink groups wait for, with its relation, groups, rows and first group", function()
    leave_waiting()
    local st = runnel.inspect(state)
    assert.same({ { sink = "t: durable sink d", key = "sink:d", relation = "t", groups = 2, rows = 3, since = 1,
                    seen = 2 } }, st.outbox_waiting)
    -- the same record p:stats() gives of a sink this pipeline does not declare
    local p = open()
    p:table("t", cols)
    assert.same(st.outbox_waiting, p:stats().outbox_undeclared)
    p:close()
  end)

  it("says when the relation is gone, and is empty once the groups are dropped", function()
    leave_waiting()
    local p = open()
    p:drop("t")
    p:close()
    local waiting = runnel.inspect(state).outbox_waiting
    assert.equal(1, #waiting)
    assert.is_true(waiting[1].relation_gone)
    assert.equal("t", waiting[1].relation)
    p = open()
    p:drop_outbox("t: durable sink d")
    p:close()
    assert.same({}, runnel.inspect(state).outbox_waiting)
  end)

  it("raises for a path that holds no state, as before", function()
    local ok, err = pcall(runnel.inspect, dir .. "/none")
    assert.is_false(ok)
    assert.matches("inspect: ", err, 1, true)
  end)
end)
