-- Edges of schema evolution a deploy meets (helper round 21): each defect
-- found has its regression test here, named after what it guards.
local runnel = require "runnel"
local H = require "helper"

local open = H.open_noting

describe("a rename that gives the old name to a new column", function()
  after_each(H.cleanup)

  local function stored(dir)
    local p = open(dir)
    local t = p:table("t", { {"id","int"}, {"city","string"}, key = "id" })
    t:insert{ id = 1, city = "Paris" }
    t:insert{ id = 2, city = "Oslo" }
    p:close()
  end

  -- Regression: { "town", was = "city" } beside a new { "city" } left the
  -- values in city and added town as null ('added "town" string = null;
  -- made "city" nullable'): the rename the declaration asked for, which
  -- the state allowed (it held city and no town), was lost without a word.
  it("moves the values to the renamed column and adds the new one empty", function()
    local dir = H.tmpdir()
    stored(dir)
    local p, lines = open(dir)
    local t = p:table("t", { {"id","int"}, {"town","string", was = "city"}, {"city","string", null = true}, key = "id" })
    assert.same({ id = 1, town = "Paris" }, t:get(1))
    assert.same({ id = 2, town = "Oslo" }, t:get(2))
    assert.same({ 't: renamed "city" to "town"; added "city" string = null' }, lines)
    t:update{ id = 1, city = "Lyon" }
    p:close()
    p, lines = open(dir) -- the same declaration again: applied already, nothing to do
    t = p:table("t", { {"id","int"}, {"town","string", was = "city"}, {"city","string", null = true}, key = "id" })
    assert.same({ id = 1, town = "Paris", city = "Lyon" }, t:get(1))
    assert.same({}, lines)
    p:close()
  end)

  it("refused (a new column not null, no default), says so and keeps the stored rows", function()
    local dir = H.tmpdir()
    stored(dir)
    local p, lines = open(dir)
    assert.equal('relation "t": new column "city" string is not null and has no default: the stored rows would have '
                 .. 'no value (give it a default, or null = true)',
                 H.error_of(p.table, p, "t", { {"id","int"}, {"town","string", was = "city"}, {"city","string"}, key = "id" }))
    assert.same({}, lines)
    local t = p:table("t", { {"id","int"}, {"city","string"}, key = "id" })
    assert.same({ id = 1, city = "Paris" }, t:get(1))
    p:close()
  end)

  it("tells a join over the table what moved", function()
    local dir = H.tmpdir()
    local p = open(dir)
    local t = p:table("t", { {"id","int"}, {"city","string"}, {"k","int"}, key = "id" })
    local u = p:table("u", { {"k","int"}, {"v","string"}, key = "k" })
    t:join(u, { on = "k", name = "j" })
    u:insert{ k = 1, v = "one" }
    t:insert{ id = 1, city = "Paris", k = 1 }
    p:close()
    p = open(dir)
    t = p:table("t", { {"id","int"}, {"town","string", was = "city"}, {"city","string", null = true}, {"k","int"},
                       key = "id" })
    u = p:table("u", { {"k","int"}, {"v","string"}, key = "k" })
    local j = t:join(u, { on = "k", name = "j" })
    local copy, apply = H.id_applier()
    copy[1] = { id = 1, city = "Paris", k = 1, ["u.k"] = 1, v = "one" } -- what its sinks were told before
    j:sink(apply)
    u:insert{ k = 2, v = "two" } -- a group: the rebuild is told at its start
    assert.same({ id = 1, town = "Paris", k = 1, ["u.k"] = 1, v = "one" }, j:get(1))
    assert.same({ [1] = { id = 1, town = "Paris", k = 1, ["u.k"] = 1, v = "one" } }, copy)
    p:close()
  end)
end)
