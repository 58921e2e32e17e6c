-- Groups waiting for a durable sink no declaration collects (round 12): the
-- sink renamed for good, or its relation dropped and never declared again.
-- The outbox keeps them (OUTBOX-4: a committed group is never dropped
-- unsaid), so they must be seen — p:stats().outbox and .outbox_undeclared,
-- runnel inspect, runnel verify — and can be dropped on purpose: runnel
-- drop-outbox STATE SINK (p:drop_outbox(sink) in Lua).
local runnel = require "runnel"
local H = require "helper"

local cols = { {"k","int"}, {"g","int"}, key = "k" }

describe("groups waiting for a durable sink no declaration collects", function()
  local dir, state
  before_each(function() dir = H.tmpdir(); state = dir .. "/s" end)
  after_each(H.cleanup)

  local function open() return runnel.open{ path = state, notes = false } end

  -- Session 1: t with the durable sink d failing: groups 1 (k 1, k 2) and 2 (k 3) wait.
  local function leave_waiting()
    local p = open()
    local t = p:table("t", cols)
    t:sink(function() error("down") end, { durable = true, name = "d" })
    p:batch(function() t:insert{ k = 1, g = 1 }; t:insert{ k = 2, g = 1 } end)
    t:insert{ k = 3, g = 1 }
    assert.equal(2, p:stats().outbox["t: durable sink d"])
    p:close()
  end

  local function cli(...)
    local args = { H.runnel_bin, ... }
    for i = 2, #args do args[i] = "'" .. args[i] .. "'" end
    return H.sh(table.concat(args, " "))
  end

  it("a renamed sink's groups show in p:stats().outbox and .outbox_undeclared", function()
    leave_waiting()
    local p = open()
    local t = p:table("t", cols)
    local got = {}
    t:sink(function(verb, row) got[#got + 1] = row.k end, { durable = true, name = "e" })
    t:insert{ k = 4, g = 1 }
    assert.same({ 4 }, got)
    local st = p:stats()
    assert.equal(0, st.outbox["t: durable sink e"])
    assert.equal(2, st.outbox["t: durable sink d"])
    assert.same({ { sink = "t: durable sink d", key = "sink:d", relation = "t", groups = 2, rows = 3, since = 1,
                    seen = 2 } }, st.outbox_undeclared)
    p:close()
  end)

  it("p:drop_outbox drops them, and a sink declared again under the name starts afresh", function()
    leave_waiting()
    local p = open()
    local t = p:table("t", cols)
    local ok, err = pcall(p.drop_outbox, p, "t: durable sink nope")
    assert.is_false(ok)
    assert.matches('drop_outbox: no durable sink "t: durable sink nope" in the state', err, 1, true)
    p:drop_outbox("t: durable sink d")
    assert.same({}, p:stats().outbox_undeclared)
    assert.is_nil(p:stats().outbox["t: durable sink d"])
    local got = {}
    t:sink(function(verb, row) got[#got + 1] = row.k end, { durable = true, name = "d" })
    t:insert{ k = 4, g = 1 }
    assert.same({ 4 }, got) -- groups 1 and 2 are gone
    -- a declared sink is refused, as p:drop refuses a declared relation
    ok, err = pcall(p.drop_outbox, p, "sink:d")
    assert.is_false(ok)
    assert.matches('drop_outbox "t: durable sink d": it is declared in this pipeline', err, 1, true)
    p:close()
  end)

  it("a dropped relation's sink is named with its relation by inspect and verify, and runnel drop-outbox drops it",
     function()
    leave_waiting()
    local p = open()
    p:drop("t")
    p:close()
    local out, err, code = cli("inspect", state)
    assert.equal(0, code, err)
    assert.matches("t: durable sink d: 2 groups %(3 rows%) wait since group 1, last declared at group 2; "
                   .. "its relation t is not in the state", out)
    out, err, code = cli("verify", state)
    assert.equal(0, code, out .. err)
    assert.matches("note: 2 groups %(3 rows%) since group 1 wait for t: durable sink d, whose relation t is not "
                   .. "in the state: declare it again to deliver them, or drop them %(runnel drop%-outbox STATE "
                   .. "SINK%)", out)
    out, err, code = cli("drop-outbox", state, "t: durable sink d")
    assert.equal(0, code, err)
    assert.matches("dropped the groups waiting for t: durable sink d from", out, 1, true)
    out = cli("inspect", state)
    assert.falsy(out:find("durable sink d", 1, true))
    out = cli("verify", state)
    assert.matches("whole %(0 damaged, 0 notes%)", out)
  end)

  it("p:drop of a relation whose durable sink has groups waiting says so in a note (round 20)", function()
    leave_waiting()
    local lines = {}
    local p = runnel.open{ path = state, notes = function(line) lines[#lines + 1] = line end }
    p:drop("t")
    assert.same({ 'drop "t": 2 groups (3 rows) since group 1 still wait for its durable sink d: t declared again '
                  .. 'with its columns and the sink gets them, p:drop_outbox("t: durable sink d") drops them' }, lines)
    p:close()
  end)

  it("runnel drop of such a relation says so on stderr (round 20)", function()
    leave_waiting()
    local out, err, code = cli("drop", state, "t")
    assert.equal(0, code, err)
    assert.matches("dropped t from", out, 1, true)
    assert.matches('runnel: drop "t": 2 groups (3 rows) since group 1 still wait for its durable sink d', err, 1, true)
    assert.matches("(runnel drop-outbox STATE SINK)", err, 1, true)
  end)

  it("verify warns of a sink not declared since groups committed; not of one declared at the last group", function()
    leave_waiting()
    local out = cli("verify", state)
    assert.falsy(out:find("wait for t: durable sink d", 1, true)) -- its pipeline closed with it declared
    local p = open()
    local t = p:table("t", cols)
    t:insert{ k = 4, g = 1 }
    p:close()
    out = cli("verify", state)
    assert.matches("note: 2 groups %(3 rows%) since group 1 wait for t: durable sink d, not declared since group 2 "
                   .. "%(the last is 3%)", out)
  end)
end)
