-- Joins at the edges, round 23 (DESIGN §6, §12): a selector's key freed by
-- a right-side fan-out, and an `on` column's value of the wrong type.
local runnel = require "runnel"
local H = require "helper"

local tables = H.join_tables_tid

describe("a right-side fan-out freeing a selector's result key", function()
  it("fails the group, as the left side does, when the selector gives another key than the one emitted", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local shift = 0
    local j = players:join(teams, { on = "tid", name = "j", selector = function(_, rk) return rk + shift end })
    local seen = {}
    j:sink(function(verb, _, _, info) seen[#seen + 1] = verb .. " " .. info.id end)
    teams:insert{ id = 1, name = "a" }
    players:insert{ id = 1, tid = 1 }
    shift = 100 -- the selector is no function of its keys any more
    local e = H.message_of(teams.delete, teams, { id = 1 })
    assert.matches("j: the selector gave the result of left row id 1 another key", e, 1, true)
    assert.is_false(p:in_group())
    assert.equal("a", teams:get(1).name)
    assert.same({ "INSERT 1" }, seen)
    shift = 0 -- a function again: key 1 is freed with the result, and free for another left row
    teams:delete{ id = 1 }
    players:delete{ id = 1 }
    teams:insert{ id = 1, name = "a" }
    players:insert{ id = 2, tid = 1 }
    assert.equal(1, j:count())
    assert.same({ "INSERT 1", "DELETE 1", "INSERT 1" }, seen)
    p:close()
  end)

  it("frees the key of a result the right row's delete takes, for another left row", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local j = players:join(teams, { on = "tid", name = "j", selector = function(_, rk) return rk end })
    teams:insert{ id = 1, name = "a" }
    players:insert{ id = 1, tid = 1 }
    teams:delete{ id = 1 }
    players:update{ id = 1, tid = 2 }
    teams:insert{ id = 1, name = "a" }
    players:insert{ id = 2, tid = 1 }
    assert.equal(1, j:count())
    p:close()
  end)
end)

describe("an on column whose value cannot be the right key", function()
  for _, case in ipairs{
    { "a float with a fraction for an int key", "float", 1.5, "expected int, got number 1.5" },
    { "a string in an any column for an int key", "any", "x", "expected int, got string" },
  } do
    it(("(%s) names the join, the left on column and its relation, then the right key column"):format(case[1]),
       function()
      local p = runnel.open()
      local teams, players = tables(p, case[2])
      local j = players:join(teams, { on = "tid", name = "j", kind = "left" })
      teams:insert{ id = 1, name = "a" }
      local e = H.message_of(players.insert, players, { id = 1, tid = case[3] })
      assert.equal('j: column "tid" of players (on) cannot be a key of teams: column "id": ' .. case[4], e)
      assert.is_false(p:in_group())
      assert.equal(0, players:count())
      assert.equal(0, j:count())
      p:close()
    end)
  end

  it("(NaN in a float column for a float key) names the left on column and its relation", function()
    local p = runnel.open()
    local teams = p:table("teams", { {"id","float"}, {"name","string"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"tid","float", null = true}, key = "id" })
    players:join(teams, { on = "tid", name = "j" })
    local e = H.message_of(players.insert, players, { id = 1, tid = 0 / 0 })
    assert.equal('j: column "tid" of players (on) cannot be a key of teams: column "id": NaN cannot be part of a key', e)
    assert.equal(0, players:count())
    p:close()
  end)
end)

describe("a joiner's key columns with a selector", function()
  -- the result's key is the selector's (DESIGN §6): the key columns a joiner
  -- declares hold it, as they hold the left key without a selector
  local function setup(joiner)
    local p = runnel.open()
    local teams, players = tables(p)
    local j = players:join(teams, { on = "tid", name = "j", selector = function(lk) return lk * 10 end,
      joiner = joiner, columns = { {"k","int"}, {"name","string"}, key = "k" } })
    local seen = {}
    j:sink(function(verb, row, old, info) seen[#seen + 1] = ("%s %d %d"):format(verb, info.id, (row or old).k) end)
    teams:insert{ id = 1, name = "a" }
    teams:insert{ id = 2, name = "b" }
    return p, teams, players, j, seen
  end

  it("is a row of the selector's key: inserted, moved and fanned out", function()
    local p, teams, players, j, seen = setup(function(l, r) return { k = l.id * 10, name = r.name } end)
    players:insert{ id = 1, tid = 1 }
    players:insert{ id = 2, tid = 1 }
    teams:update{ id = 1, name = "c" }
    players:update{ id = 2, tid = 2 }
    assert.equal(2, j:count())
    assert.same({ k = 10, name = "c" }, j:get(10))
    assert.same({ k = 20, name = "b" }, j:get(20))
    assert.same({ "INSERT 1 10", "INSERT 2 20", "UPDATE 1 10", "UPDATE 2 20", "UPDATE 2 20" }, seen)
    p:close()
  end)

  it("fails the group naming the join and both keys when a left row's row holds another key", function()
    local p, _, players, j, seen = setup(function(l, r) return { k = 1, name = r.name } end)
    local e = H.message_of(players.insert, players, { id = 1, tid = 1 })
    assert.equal("j: joiner returned key (k = 1) for the result of left key (id = 1): its key columns hold "
                 .. "the result's key (the selector's key)", e)
    assert.is_false(p:in_group())
    assert.equal(0, players:count())
    assert.equal(0, j:count())
    assert.same({}, seen)
    p:close()
  end)

  it("fails the group when a right row's insert or update gives a left row's result another key", function()
    local p, teams, players, j, seen = setup(function(l, r) return { k = r.name == "x" and 7 or l.id * 10, name = r.name } end)
    players:insert{ id = 1, tid = 3 } -- no team 3 yet: no result
    local e = H.message_of(teams.insert, teams, { id = 3, name = "x" })
    assert.matches("^j: joiner returned key %(k = 7%)", e)
    assert.is_nil(teams:get(3))
    players:insert{ id = 2, tid = 1 }
    e = H.message_of(teams.update, teams, { id = 1, name = "x" })
    assert.matches("^j: joiner returned key %(k = 7%) for the result of left key %(id = 2%)", e)
    assert.equal("a", teams:get(1).name)
    assert.same({ "INSERT 1 20" }, seen)
    assert.same({ k = 20, name = "a" }, j:get(20))
    p:close()
  end)
end)

describe("a joiner over a keyless left table", function()
  -- the result's key is the left row's id, which no column holds: a key
  -- declared in columns was unchecked, and two left rows gave two rows of
  -- one key (refused since 0.36); a selector's key is checked
  it("may not declare a key without a selector: two left rows would give one key", function()
    local p = runnel.open()
    local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
    local ev = p:table("ev", { {"k","int"}, {"tid","int"} })
    local e = H.message_of(function()
      local j = ev:join(teams, { on = "tid", joiner = function(l, t) return { k = l.k, tname = t and t.name } end,
        columns = { {"k","int"}, {"tname","string", null = true}, key = "k" } })
      return j -- not a tail call: the caller's line stays
    end)
    assert.matches("ev.join: ev has no key, so each of its rows has a result of its own, which no key column holds",
                   e, 1, true)
    assert.matches("join_edges23_spec.lua:%d+:", e) -- the caller's line
    -- without a key it is declared, one result per left row; with a
    -- selector the key is the selector's, each held by one left row
    local j = ev:join(teams, { on = "tid", joiner = function(l, t) return { k = l.k, tname = t and t.name } end,
      columns = { {"k","int"}, {"tname","string", null = true} } })
    local s = ev:join(teams, { on = "tid", name = "s", selector = function(_, rk) return rk end,
      joiner = function(_, t) return { k = t.id, tname = t.name } end,
      columns = { {"k","int"}, {"tname","string"}, key = "k" } })
    teams:insert{ id = 1, name = "a" }
    teams:insert{ id = 2, name = "b" }
    ev:insert{ k = 1, tid = 1 }
    ev:insert{ k = 1, tid = 2 }
    assert.equal(2, j:count())
    assert.same({ k = 2, tname = "b" }, s:get(2))
    assert.matches("s: the selector gave result key 1 to two left rows",
                   H.message_of(ev.insert, ev, { k = 3, tid = 1 }), 1, true)
    assert.equal(2, ev:count())
    p:close()
  end)
end)
