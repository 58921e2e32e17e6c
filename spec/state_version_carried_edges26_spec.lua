-- (round 26) runnel.state_version / rn_state_version committed the carried
-- transaction of a writer of the same state in this process (sync = false)
-- each time it was asked, and delivered its durable sinks: a host that
-- polls the version every tick (to redraw a view only when the state
-- changed) while it writes with sync = false committed every tick, as if
-- sync were true. Since 0.38 the version tells the writer's carried groups
-- without committing them (its last group is mixed in), so it still
-- changes whenever runnel.inspect would read something new; runnel.inspect,
-- which reads, still flushes first.
local runnel = require "runnel"
local H = require "helper"

describe("state_version beside a writer of the state in this process", function()
  after_each(H.cleanup)

  local function carrying()
    local dir = H.tmpdir()
    local state, log = dir .. "/st", dir .. "/out.ndjson"
    local p = runnel.open{ path = state, sync = false }
    local t = p:table("t", { {"id","int"}, key = "id" })
    t:sink(runnel.ndjson(log))
    return p, t, state, log
  end

  it("leaves its carried groups carried, and still changes with each of them", function()
    local p, t, state, log = carrying()
    t:insert{ id = 1 }
    local v1 = runnel.state_version(state)
    assert.equal("", H.text_of(log)) -- still carried: its sink hears of it at the flush
    assert.equal(v1, runnel.state_version(state))
    t:insert{ id = 2 }
    local v2 = runnel.state_version(state)
    assert.are_not.equal(v1, v2)
    assert.equal("", H.text_of(log)) -- before: both groups flushed and delivered by the first call
    p:flush()
    assert.equal(2, select(2, H.text_of(log):gsub("\n", "")))
    assert.are_not.equal(v2, runnel.state_version(state))
    p:close()
  end)

  it("inspect still reads the carried groups (it flushes them first)", function()
    local p, t, state, log = carrying()
    t:insert{ id = 1 }
    local v = runnel.state_version(state)
    local rel = runnel.inspect(state).relations[1]
    assert.equal(1, rel.rows)
    assert.are_not.equal("", H.text_of(log))
    assert.are_not.equal(v, runnel.state_version(state)) -- the flush committed: a REPL reads once more
    p:close()
  end)
end)
