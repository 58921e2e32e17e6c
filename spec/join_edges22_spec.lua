-- Joins and their Lua callbacks at the edges (DESIGN §6, §12): declarations
-- that could not mean what they say, callbacks returning what no key or row
-- is, and errors that name the join, the column and the callback's line.
local runnel = require "runnel"
local H = require "helper"

local tables = H.join_tables_tid

describe("a join given columns without a joiner", function()
  it("is refused at its declaration, naming the join (its rows would not be those columns)", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local e = H.message_of(players.join, players, teams,
                           { on = "tid", name = "j", columns = { {"x","int"}, {"y","string"}, key = "x" } })
    assert.matches('j: columns', e, 1, true)
    assert.matches("joiner", e, 1, true)
    assert.is_nil(p:relation("j"))
    -- the same join without columns goes on working
    local j = players:join(teams, { on = "tid", name = "j" })
    teams:insert{ id = 1, name = "a" }
    players:insert{ id = 1, tid = 1 }
    local n = 0
    for r in j:rows() do n = n + 1; assert.equal("a", r.name) end
    assert.equal(1, n)
    p:close()
  end)
end)

describe("a mapper's key of the wrong type", function()
  local function mapper_join(p, key_of, float_key)
    local teams = p:table("teams", { {"id", float_key and "float" or "int"}, {"name","string"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"tid","int", null = true}, key = "id" })
    local mapper = function(row) if row.id == 1 then return 1 end return key_of(row) end
    local line = debug.getinfo(mapper, "S").linedefined
    local j = players:join(teams, { mapper = mapper, name = "j", kind = "left" })
    local seen = {}
    j:sink(function(verb) seen[#seen + 1] = verb end)
    teams:insert{ id = 1, name = "a" }
    return players, j, seen, ("join_edges22_spec.lua:%d"):format(line)
  end

  for _, case in ipairs{
    { "a float with a fraction for an int key", function() return 1.5 end, false, 'column "id": expected int' },
    { "NaN for an int key", function() return 0 / 0 end, false, 'column "id": expected int' },
    { "NaN for a float key", function() return 0 / 0 end, true, 'column "id"' },
    { "a string in a key table", function() return { id = "1" } end, false, 'column "id": expected int, got string' },
  } do
    it(("(%s) names the join, the mapper's line, the right relation and the column, and rolls back"):format(case[1]),
       function()
      local p = runnel.open()
      local players, j, seen, where = mapper_join(p, case[2], case[3])
      p:begin()
      players:insert{ id = 1, tid = 1 }
      local e = H.message_of(players.insert, players, { id = 2, tid = 1 })
      assert.matches("^j: ", e)
      assert.matches(where, e, 1, true)
      assert.matches("teams", e, 1, true)
      assert.matches(case[4], e, 1, true)
      assert.is_false(p:in_group())
      assert.equal(0, players:count())
      assert.equal(0, j:count())
      assert.same({}, seen)
      p:close()
    end)
  end
end)

describe("a selector that gives a left row's result another key for the same keys", function()
  it("fails the group naming the join, instead of an UPDATE of an id its sinks never saw", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local shift = 0
    local j = players:join(teams, { on = "tid", kind = "left", name = "j",
                                    selector = function(lk) return lk + shift end })
    local ids = {}
    local bad
    j:sink(function(verb, _, _, info)
      if verb == "INSERT" then ids[info.id] = true
      elseif not ids[info.id] then bad = verb .. " of id " .. info.id .. ", never inserted"
      elseif verb == "DELETE" then ids[info.id] = nil end
    end)
    teams:insert{ id = 1, name = "a" }
    teams:insert{ id = 2, name = "b" }
    players:insert{ id = 1, tid = 1 }
    shift = 100 -- the selector is no function of its keys any more
    local e = H.message_of(players.update, players, { id = 1, tid = 2 })
    assert.is_nil(bad)
    assert.matches("j: ", e, 1, true)
    assert.matches("selector", e, 1, true)
    assert.is_false(p:in_group())
    assert.equal(1, players:get(1).tid)
    shift = 0 -- a function again: the pipeline goes on
    players:update{ id = 1, tid = 2 }
    assert.is_nil(bad)
    assert.equal(1, j:count())
    p:close()
  end)
end)

describe("a select keyed by a right column after a left join", function()
  -- fused: the select is the join's only reader, and the join makes its rows
  for _, fused in ipairs{ true, false } do
    local function setup()
      local p = runnel.open()
      local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
      local players = p:table("players", { {"id","int"}, {"name","string"}, {"tid","int", null = true}, key = "id" })
      local j = players:join(teams, { on = "tid", name = "j", kind = "left" })
      if not fused then j:sink(function() end) end
      local s = j:select({ "teams.id", "name", key = "teams.id" }, "s")
      local log = {}
      s:sink(function(verb, row, old, info)
        local r = row or old
        log[#log + 1] = ("%s %d %s %s"):format(verb, info.id, tostring(r["teams.id"]), r.name)
      end)
      teams:insert{ id = 1, name = "a" }
      teams:insert{ id = 2, name = "b" }
      players:insert{ id = 1, name = "x", tid = 1 }
      return p, teams, players, s, log
    end

    local how = fused and "fused with the join" or "reading the join's rows"
    it(("(%s) refuses a second row of one key, rolling back"):format(how), function()
      local p, _, players, s, log = setup()
      local e = H.message_of(players.insert, players, { id = 2, name = "y", tid = 1 })
      assert.matches("s: key (teams.id = 1)", e, 1, true)
      assert.same({ "INSERT 1 1 x" }, log)
      assert.is_nil(players:get(2))
      assert.equal(1, s:count())
      p:close()
    end)

    it(("(%s) moves a row whose key changed as a DELETE then an INSERT"):format(how), function()
      local p, _, players, _, log = setup()
      players:update{ id = 1, tid = 2 }
      assert.same({ "INSERT 1 1 x", "DELETE 1 1 x", "INSERT 1 2 x" }, log)
      p:close()
    end)

    it(("(%s) refuses a null key (no match) naming the select and the column, rolling back"):format(how), function()
      local p, teams, players, s, log = setup()
      local e = H.message_of(players.insert, players, { id = 3, name = "z" })
      assert.matches('s: column "teams.id"', e, 1, true)
      assert.matches("null", e, 1, true)
      e = H.message_of(teams.delete, teams, { id = 1 })
      assert.matches('s: column "teams.id"', e, 1, true)
      assert.same({ "INSERT 1 1 x" }, log)
      assert.equal(2, teams:count())
      local keys = {}
      for r in s:rows() do keys[#keys + 1] = r["teams.id"] end
      assert.same({ 1 }, keys)
      p:close()
    end)
  end
end)

describe("a joiner returning key columns other than its result's key", function()
  it("fails the group naming the join and both keys, instead of two rows of one key", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local j = players:join(teams, { on = "tid", kind = "left", name = "j",
      joiner = function(l, r) return { id = l.id == 2 and 7 or l.id, name = r and r.name } end,
      columns = { {"id","int"}, {"name","string", null = true}, key = "id" } })
    local seen = {}
    j:sink(function(verb, row, old, info) seen[#seen + 1] = verb .. " " .. info.id end)
    teams:insert{ id = 1, name = "a" }
    players:insert{ id = 1, tid = 1 }
    local e = H.message_of(players.insert, players, { id = 2, tid = 1 })
    assert.matches("^j: ", e)
    assert.matches("joiner", e, 1, true)
    assert.matches("id = 7", e, 1, true)
    assert.matches("id = 2", e, 1, true)
    assert.same({ "INSERT 1" }, seen)
    assert.is_nil(players:get(2))
    assert.equal(1, j:count())
    assert.same({ id = 1, name = "a" }, j:get(1))
    p:close()
  end)
end)

describe("a selector returning a null", function()
  for _, case in ipairs{ { "runnel.null", function() return runnel.null end },
                         { "a key with a null part", function(lk) return { lk, runnel.null } end } } do
    it(("(%s) fails the group naming the join: a key is never null"):format(case[1]), function()
      local p = runnel.open()
      local teams, players = tables(p)
      local j = players:join(teams, { on = "tid", kind = "left", name = "j", selector = case[2] })
      local seen = 0
      j:sink(function() seen = seen + 1 end)
      teams:insert{ id = 1, name = "a" }
      local e = H.message_of(players.insert, players, { id = 1, tid = 1 })
      assert.matches("j: selector", e, 1, true)
      assert.matches("null", e, 1, true)
      assert.equal(0, seen)
      assert.equal(0, j:count())
      assert.is_nil(players:get(1))
      p:close()
    end)
  end
end)
