-- A join's Lua mapper and joiner (DESIGN §6, §9, §12): the rows they are
-- lent, the values a joiner may return, and the calls runnel saves (a kept
-- result, a mapper whose columns kept their bytes).
local runnel = require "runnel"
local H = require "helper"

local tables = H.join_tables

local COLUMNS = { {"pid","int"}, {"pname","string"}, {"score","int"}, {"tname","string", null = true},
                  {"region","string", null = true}, key = "pid" }

local function watch(rel)
  local log = {}
  rel:sink(function(verb, row, old, info)
    local r = row or old
    log[#log + 1] = ("%s %d %s:%s:%s:%s"):format(verb, info.id, r.pname, r.score, tostring(r.tname), tostring(r.region))
  end)
  return log
end

describe("rows lent to a mapper or joiner", function()
  it("read like rows: columns by name, nil for null or no such column, pairs in column order", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local seen
    players:join(teams, { kind = "left", mapper = function(r)
      local names = {}
      for k, v in pairs(r) do names[#names + 1] = k .. "=" .. tostring(v) end
      seen = { type(r), r.id, r.name, r.team_id, r.nope, table.concat(names, " "), tostring(r) }
      return r.team_id
    end, joiner = function(l) return { pid = l.id, pname = l.name, score = l.score } end, columns = COLUMNS })
    players:insert{ id = 1, name = "ann" }
    assert.same({ "userdata", 1, "ann", nil, nil, "id=1 name=ann score=0", "row of players" }, seen)
    p:close()
  end)

  it("find a column by any key naming it: a name made at run time, one longer than Lua interns", function()
    local p = runnel.open()
    local long = ("c"):rep(45)
    local t = p:table("t", { {"id","int"}, {"name","string"}, {long,"int"}, {"1","int"}, key = "id" })
    local u = p:table("u", { {"id","int"}, key = "id" })
    local seen
    t:join(u, { kind = "left", mapper = function(r)
      seen = { r["na" .. ("me"):lower()], r[("c"):rep(45)], r[long], r["1"], r[1], r[true], r[r], r[""] }
      return r.id
    end })
    t:insert{ id = 4, name = "ann", [long] = 7, ["1"] = 9 }
    assert.same({ "ann", 7, 7, 9 }, seen)
    p:close()
  end)

  it("are read-only, and cannot be read once their call has returned", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local kept
    local j = players:join(teams, { kind = "left", mapper = function(r) kept = r; return r.team_id end,
      joiner = function(l) l.score = 5 end, columns = COLUMNS })
    local err = H.error_of(players.insert, players, { id = 1, name = "ann" })
    assert.matches("rows given to callbacks are read%-only", err)
    assert.equal(0, players:count())
    assert.matches("can be read only during that call", select(2, pcall(function() return kept.id end)))
    assert.equal("row of players (its call has returned)", tostring(kept))
    local _ = j
    p:close()
  end)

  it("kept past their pipeline's close still print and refuse reads (nothing of the closed relation is read)", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local kept
    players:join(teams, { kind = "left", mapper = function(r) kept = r; return r.team_id end,
      joiner = function(l) return { pid = l.id, pname = l.name, score = l.score } end, columns = COLUMNS })
    players:insert{ id = 1, name = "ann" }
    p:close()
    collectgarbage()
    assert.equal("row of players (its call has returned)", tostring(kept))
    assert.matches("can be read only during that call", select(2, pcall(function() return kept.id end)))
    assert.matches("can be read only during that call", select(2, pcall(function() kept.id = 2 end)))
    assert.matches("can be read only during that call", select(2, pcall(pairs, kept)))
  end)

  it("are read-only and end with their call in a joiner too (rows it reads many times)", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local kept, seen = nil, {}
    players:join(teams, { on = "team_id", kind = "left", columns = COLUMNS, joiner = function(l, t)
      kept = l
      seen[#seen + 1] = ("%s %s %s"):format(type(l), l.name, t and t.name)
      if l.name == "cyd" then l.name = "x" end
      return l.id, l.name, l.score, t and t.name
    end })
    teams:insert{ id = 7, name = "otters" }
    for i, name in ipairs{ "ann", "bob" } do players:insert{ id = i, name = name, team_id = 7 } end
    assert.same({ "userdata ann otters", "userdata bob otters" }, seen)
    assert.matches("can be read only during that call", select(2, pcall(function() return kept.name end)))
    assert.matches("rows given to callbacks are read%-only", H.error_of(players.insert, players, { id = 3, name = "cyd" }))
    assert.equal(2, players:count())
    p:close()
  end)

  it("may be returned as the joiner's row", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local j = players:join(teams, { on = "team_id", kind = "left", joiner = function(l) return l end,
      columns = { {"id","int"}, {"name","string"}, {"team_id","int", null = true}, {"score","int"}, key = "id" } })
    players:insert{ id = 1, name = "ann", team_id = 3, score = 2 }
    assert.same({ id = 1, name = "ann", team_id = 3, score = 2 }, j:get(1))
    p:close()
  end)
end)

describe("a joiner's values in column order", function()
  local function setup(joiner)
    local p = runnel.open()
    local teams, players = tables(p)
    local j = players:join(teams, { on = "team_id", kind = "left", joiner = joiner, columns = COLUMNS })
    return p, teams, players, j
  end

  it("make the row, a missing or nil value being null", function()
    local p, teams, players, j = setup(function(l, t) return l.id, l.name, l.score, t and t.name end)
    local log = watch(j)
    teams:insert{ id = 7, name = "otters", region = "eu" }
    players:insert{ id = 1, name = "ann", team_id = 7 }
    players:insert{ id = 2, name = "bob" }
    teams:update{ id = 7, name = "herons" }
    assert.same({ "INSERT 1 ann:0:otters:nil", "INSERT 2 bob:0:nil:nil", "UPDATE 1 ann:0:herons:nil" }, log)
    p:close()
  end)

  it("are checked against the columns, naming the join and the column", function()
    local p, _, players = setup(function(l) return l.id, l.name, "many" end)
    local err = H.error_of(players.insert, players, { id = 1, name = "ann" })
    assert.matches('joiner returned bad values: players.join: column "score": expected int, got string', err, 1, true)
    assert.equal(0, players:count())
    p:close()
  end)

  it("may not outnumber the columns", function()
    local p, _, players = setup(function(l) return l.id, l.name, 1, nil, nil, "extra" end)
    local err = H.error_of(players.insert, players, { id = 1, name = "ann" })
    assert.matches("joiner returned 6 values for the 5 columns of players.join", err, 1, true)
    p:close()
  end)

  it("are no row when the joiner returns nothing", function()
    local p, _, players, j = setup(function() end)
    players:insert{ id = 1, name = "ann" }
    assert.equal(0, j:count())
    p:close()
  end)
end)

describe("a joiner's returned table", function()
  it("may hold lists, structs and long column names (read under protection) among scalars", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local long = ("n"):rep(48) -- longer than Lua interns: not the very name string
    local j = players:join(teams, { kind = "left", mapper = function(r) return r.team_id end,
      joiner = function(l, t)
        return { pid = l.id, tags = { l.name, t and t.name }, pos = { x = l.id * 2 }, [long] = l.score }
      end,
      columns = { {"pid","int"}, {"tags","list"}, {"pos", { {"x","int"} }}, {long,"int"}, key = "pid" } })
    teams:insert{ id = 7, name = "otters" }
    for id = 1, 3 do players:insert{ id = id, name = "p" .. id, team_id = 7, score = id * 10 } end
    teams:update{ id = 7, name = "seals" }
    for id = 1, 3 do
      assert.same({ pid = id, tags = { "p" .. id, "seals" }, pos = { x = id * 2 }, [long] = id * 10 }, j:get(id))
    end
    p:close()
  end)
end)

describe("calls saved", function()
  it("fan-out calls the joiner once per referencing row, reading the old result from the index", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local calls = 0
    local j = players:join(teams, { on = "team_id", kind = "left", columns = COLUMNS, joiner = function(l, t)
      calls = calls + 1
      return { pid = l.id, pname = l.name, score = l.score, tname = t and t.name, region = t and t.region }
    end })
    local log = watch(j)
    teams:insert{ id = 7, name = "otters" }
    p:batch(function() for i = 1, 10 do players:insert{ id = i, name = "p" .. i, team_id = 7 } end end)
    calls = 0
    teams:update{ id = 7, name = "herons" }
    assert.equal(10, calls)
    calls = 0
    players:update{ id = 3, score = 4 }
    assert.equal(1, calls)
    assert.equal("UPDATE 3 p3:4:herons:nil", log[#log])
    p:close()
  end)

  it("a left update keeping the bytes of what the mapper read does not call it again", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local calls = 0
    players:join(teams, { kind = "left", columns = COLUMNS,
      mapper = function(r) calls = calls + 1; return r.team_id end,
      joiner = function(l, t) return l.id, l.name, l.score, t and t.name end })
    players:insert{ id = 1, name = "ann", team_id = 7 }
    assert.equal(1, calls)
    players:update{ id = 1, score = 3 }
    assert.equal(1, calls) -- team_id 7 was mapped already (the memo); the row after kept it
    players:update{ id = 1, team_id = 8 }
    assert.equal(2, calls) -- team_id 8 is new
    p:close()
  end)

  -- A key returned as a table whose fields come from the row through a
  -- metamethod: the row is read after the mapper returned, while runnel
  -- reads the key. Those reads count too, or the key would look constant.
  it("counts the columns the mapper read while its returned key is read", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local j = players:join(teams, { kind = "left", columns = COLUMNS,
      joiner = function(l, t) return l.id, l.name, l.score, t and t.name end,
      mapper = function(r) return setmetatable({}, { __index = function() return r.team_id end }) end })
    teams:insert{ id = 7, name = "otters" }
    teams:insert{ id = 8, name = "seals" }
    players:insert{ id = 1, name = "ann", team_id = 7 }
    players:insert{ id = 2, name = "bob", team_id = 8 }
    players:update{ id = 1, team_id = 8 }
    assert.equal("seals", j:get(1).tname)
    assert.equal("seals", j:get(2).tname)
    p:close()
  end)

  -- The mapper reads kind, then a or b: which columns it reads depends on
  -- the row. The same random changes go through a join whose mapper reads
  -- the whole row (pairs: nothing can be skipped) and through one that reads
  -- only what it needs; both must emit the same changes and hold the same rows.
  it("skipping the mapper changes nothing (randomized against a mapper that reads every column)", function()
    local p = runnel.open()
    local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
    local items = p:table("items", { {"id","int"}, {"kind","string"}, {"a","int", null = true},
                                     {"b","int", null = true}, {"note","string"}, key = "id" })
    local key_of = H.item_team
    local function joiner(l, t) return l.id, l.kind, l.note, t and t.name end
    local cols = { {"id","int"}, {"kind","string"}, {"note","string"}, {"tname","string", null = true}, key = "id" }
    local lean = items:join(teams, { kind = "left", mapper = key_of, joiner = joiner, columns = cols, name = "lean" })
    local full = items:join(teams, { kind = "left", joiner = joiner, columns = cols, name = "full",
      mapper = function(r) for _ in pairs(r) do end return key_of(r) end })
    local logs = { lean = {}, full = {} }
    for name, rel in pairs{ lean = lean, full = full } do
      rel:sink(function(verb, row, old, info)
        local r = row or old
        local t = logs[name]
        t[#t + 1] = ("%s %d %s %s %s"):format(verb, info.id, r.kind, r.note, tostring(r.tname))
      end)
    end
    math.randomseed(1234)
    local rng = math.random
    for i = 1, 6 do teams:insert{ id = i, name = "t" .. i } end
    for step = 1, 600 do
      p:begin()
      for _ = 1, 5 do
        H.random_item_change(items, teams, rng, step, 30)
      end
      p:commit()
    end
    assert.is_true(#logs.lean > 1000)
    assert.same(logs.full, logs.lean)
    assert.same(H.item_join_lines(full), H.item_join_lines(lean))
    -- the join worked out from the final tables
    assert.same(H.item_join_lines(nil, items, teams), H.item_join_lines(lean))
    p:close()
  end)
end)

describe("a joiner's returned table and a failing mapper or joiner", function()
  -- A group of two players; the second one's callback fails: the message
  -- names the join and the column, and the whole group is rolled back.
  local JOINER_LINE -- the line of failing's joiner, marked below
  local n = 0
  for line in io.lines("spec/join_callbacks_spec.lua") do
    n = n + 1
    if not JOINER_LINE and line:find("%-%- JOINER_LINE$") then JOINER_LINE = n end
  end
  local function failing(bad, mapper)
    local p = runnel.open()
    local teams, players = tables(p)
    local j = players:join(teams, { kind = "left", mapper = mapper or function(r) return r.team_id end,
      joiner = function(l, t) -- JOINER_LINE
        if l.id == 2 then return bad(l, t) end
        return { pid = l.id, pname = l.name, score = l.score, tname = t and t.name }
      end, columns = COLUMNS })
    teams:insert{ id = 7, name = "otters" }
    p:begin()
    players:insert{ id = 1, name = "ann", team_id = 7 }
    local ok, err = pcall(players.insert, players, { id = 2, name = "bob", team_id = 7 })
    assert.is_false(ok)
    assert.is_false(p:in_group())
    assert.equal(0, players:count())
    assert.equal(0, j:count())
    players:insert{ id = 3, name = "cyd", team_id = 7 } -- the pipeline goes on
    assert.same({ pid = 3, pname = "cyd", score = 0, tname = "otters" }, j:get(3))
    p:close()
    -- a refused row or values name where the joiner is (since 0.36): the
    -- function given as joiner, above
    local where = (" (the joiner at spec/join_callbacks_spec.lua:%d)"):format(JOINER_LINE)
    if err:find("^joiner returned") then
      assert.equal(where, err:sub(-#where))
      err = err:sub(1, -#where - 1)
    end
    return err
  end

  it("names a key that is no column", function()
    assert.equal('joiner returned a bad row: players.join: unknown column "tnmae"',
      failing(function(l, t) return { pid = l.id, pname = l.name, score = 1, tnmae = t.name } end))
    assert.equal("joiner returned a bad row: players.join: column names are strings, got number",
      failing(function(l) return { pid = l.id, pname = l.name, score = 1, [3] = 1 } end))
  end)

  it("names a value of the wrong type", function()
    assert.equal('joiner returned a bad row: players.join: column "pname": expected string, got number',
      failing(function(l) return { pid = l.id, pname = 5, score = 1 } end))
    assert.equal('joiner returned a bad row: players.join: column "tname": expected string, got table',
      failing(function(l) return { pid = l.id, pname = l.name, score = 1, tname = {} } end))
  end)

  it("names a missing column that may not be null", function()
    assert.equal('joiner returned a bad row: players.join: column "pname": missing (the column is not nullable)',
      failing(function(l) return { pid = l.id, score = 1 } end))
    assert.equal('joiner returned a bad row: players.join: column "pid": key column is missing',
      failing(function(l) return { pname = l.name, score = 1 } end))
  end)

  it("keeps its wording whatever was returned (read directly or under protection)", function()
    local raising = setmetatable({}, { __index = function() error("key boom") end })
    local function mapper(r) if r.id == 2 then return raising end return r.team_id end
    local line = debug.getinfo(1, "l").currentline - 2
    assert.equal(("players.join: mapper: spec/join_callbacks_spec.lua:%d: key boom"):format(line), failing(nil, mapper))
    assert.equal('joiner returned bad values: players.join: column "pid": expected int, got userdata',
      failing(function() return io.stdout end))
    assert.equal('joiner returned bad values: players.join: column "tname": expected string, got table',
      failing(function(l) return l.id, l.name, 1, {} end))
    assert.equal('joiner returned bad values: players.join: column "tname": expected string, got userdata',
      failing(function(l) return l.id, l.name, 1, io.stdout end))
    assert.equal("joiner returned 6 values for the 5 columns of players.join",
      failing(function(l) return l.id, l.name, 1, nil, nil, 6 end))
    local many = {}
    for i = 1, 9999 do many[i] = i end
    many[10000] = {} -- a table among them: read under protection, the values its arguments
    assert.equal("joiner returned 10000 values for the 5 columns of players.join",
      failing(function() return table.unpack(many) end))
    assert.matches('^joiner returned a bad row: players.join: unknown column "[%a_]+"',
      failing(function(l) return l end)) -- the first of id, name, team_id met
    assert.equal('joiner returned a bad row: players.join: column "tname": expected string, got userdata',
      failing(function(l, t) return { pid = l.id, pname = l.name, score = 1, tname = t } end))
    assert.equal(('joiner returned a bad row: players.join: unknown column "%s"'):format(("x"):rep(50)),
      failing(function(l) return { pid = l.id, pname = l.name, score = 1, [("x"):rep(50)] = 1 } end))
  end)

  it("names the join and the user's line when the joiner or the mapper raises", function()
    local function boom() error("boom") end
    local function mapper(r) if r.id == 2 then error("mapper boom") end return r.team_id end
    local at = function(fn) return debug.getinfo(fn, "S").linedefined end
    assert.equal(("players.join: joiner: spec/join_callbacks_spec.lua:%d: boom"):format(at(boom)), failing(boom))
    assert.equal(("players.join: mapper: spec/join_callbacks_spec.lua:%d: mapper boom"):format(at(mapper)),
      failing(nil, mapper))
  end)
end)
