-- Schemas evolve (DESIGN §13, issue 14): a source table declared again
-- with another schema is brought to it at declaration, in one transaction,
-- keeping every row id; what cannot convert exactly is refused naming the
-- column, both types and the rows that block it. Derived relations whose
-- declaration changed are rebuilt from their inputs.
local runnel = require "runnel"
local H = require "helper"

local open = H.open_noting

local function rows_of(rel)
  local out = {}
  for row, id in rel:rows() do out[#out + 1] = { id, row } end
  return out
end

describe("a source table declared with another schema", function()
  after_each(H.cleanup)

  local V1 = { {"id","int"}, {"name","string"}, {"lvl","int"}, {"score","int", null = true}, key = "id" }

  local function v1_state()
    local dir = H.tmpdir()
    local p = open(dir)
    local t = p:table("players", V1)
    t:insert{ id = 2, name = "bob", lvl = 4 }
    t:insert{ id = 1, name = "ann", lvl = 3, score = 5 }
    t:delete{ id = 2 }
    t:insert{ id = 3, name = "cy", lvl = 4, score = 7 }
    p:close()
    return dir
  end

  it("adds a defaulted and a nullable column: stored rows get the default and null", function()
    local dir = v1_state()
    local p, lines = open(dir)
    local t = p:table("players", { {"id","int"}, {"name","string"}, {"lvl","int"}, {"score","int", null = true},
                                   {"level","int", default = 1}, {"team","string", null = true}, key = "id" })
    assert.same({ 'players: added "level" int = 1; added "team" string = null' }, lines)
    assert.same({ { 2, { id = 1, name = "ann", lvl = 3, score = 5, level = 1 } },
                  { 3, { id = 3, name = "cy", lvl = 4, score = 7, level = 1 } } }, rows_of(t))
    t:insert{ id = 2, name = "bob", lvl = 1 }
    assert.equal(1, t:id_of(2)) -- a deleted key gets its old id back: the tombstone survived
    p:close()
  end)

  it("drops a column, renames with was = and reorders, keeping ids and keys", function()
    local dir = v1_state()
    local p, lines = open(dir)
    local t = p:table("players", { {"level","int", was = "lvl"}, {"id","int"}, {"name","string"}, key = "id" })
    assert.same({ 'players: renamed "lvl" to "level"; dropped "score"; reordered the columns' }, lines)
    assert.same({ id = 3, name = "cy", level = 4 }, t:get(3))
    assert.equal(3, t:id_of(3))
    assert.equal(2, t:count())
    p:close()
    -- the next deploy declares the same schema: nothing to do, nothing said
    p, lines = open(dir)
    p:table("players", { {"level","int", was = "lvl"}, {"id","int"}, {"name","string"}, key = "id" })
    assert.same({}, lines)
    p:close()
  end)

  it("renames with p:alter", function()
    local dir = v1_state()
    local p, lines = open(dir)
    p:alter("players", { rename = { lvl = "rank" } })
    local t = p:table("players", { {"id","int"}, {"name","string"}, {"rank","int"}, {"score","int", null = true},
                                   key = "id" })
    assert.same({ 'players: renamed "lvl" to "rank"' }, lines)
    assert.same({ id = 1, name = "ann", rank = 3, score = 5 }, t:get(1))
    p:close()
  end)

  it("widens int to float and any, and makes a column nullable", function()
    local dir = v1_state()
    local p, lines = open(dir)
    local t = p:table("players", { {"id","int"}, {"name","string", null = true}, {"lvl","any"},
                                   {"score","float", null = true}, key = "id" })
    assert.same({ 'players: made "name" nullable; widened "lvl" from int to any; widened "score" from int to float' },
                lines)
    local r = t:get(1)
    assert.equal(5.0, r.score)
    assert.equal("float", math.type(r.score))
    assert.equal("integer", math.type(r.lvl))
    assert.is_nil(t:get(3).missing)
    p:close()
  end)

  it("works for keyless tables, whose rows are found by value afterwards", function()
    local dir = H.tmpdir()
    local p = open(dir)
    local notes = p:table("notes", { {"text","string"} })
    notes:insert{ text = "a" }
    notes:insert{ text = "b" }
    p:close()
    local lines
    p, lines = open(dir)
    notes = p:table("notes", { {"text","string"}, {"n","int", default = 0} })
    assert.same({ 'notes: added "n" int = 0' }, lines)
    notes:delete{ text = "b", n = 0 } -- found by its rewritten row
    assert.same({ { 1, { text = "a", n = 0 } } }, rows_of(notes))
    p:close()
  end)

  it("rewrites every row of a table larger than one batch", function()
    local dir = H.tmpdir()
    local p = open(dir)
    local t = p:table("t", { {"id","int"}, {"v","int"}, key = "id" })
    p:batch(function() for i = 1, 3000 do t:insert{ id = i, v = i } end end)
    p:close()
    p = open(dir)
    t = p:table("t", { {"id","int"}, {"v","float"}, {"tag","string", default = "a longer default value"},
                       key = "id" })
    for i = 1, 3000, 7 do
      assert.same({ id = i, v = i + 0.0, tag = "a longer default value" }, t:get(i))
      assert.equal(i, t:id_of(i))
    end
    assert.equal(3000, t:count())
    p:close()
  end)

  describe("refuses, naming the column, both types and what blocks it", function()
    local function refused(dir, decl)
      local p = open(dir)
      local err = H.error_of(p.table, p, "players", decl)
      p:close()
      -- nothing was applied: the old declaration still opens with its rows
      local q, lines = open(dir)
      local t = q:table("players", V1)
      assert.same({}, lines)
      assert.same({ id = 1, name = "ann", lvl = 3, score = 5 }, t:get(1))
      q:close()
      return err
    end

    it("a type that does not convert exactly", function()
      assert.equal('relation "players": column "name": stored as string, declared int; only int to float and any '
                   .. 'type to any are applied (they convert every value exactly)',
                   refused(v1_state(), { {"id","int"}, {"name","int"}, {"lvl","int"}, key = "id" }))
    end)

    it("a column made non-null that holds nulls, with the count and the first key", function()
      local dir = v1_state()
      local p = open(dir)
      p:table("players", V1):insert{ id = 4, name = "dee", lvl = 1 }
      p:close()
      assert.equal('relation "players": column "score": stored as int null, declared int not null: 1 row holds null '
                   .. '(first: id = 4)',
                   refused(dir, { {"id","int"}, {"name","string"}, {"lvl","int"}, {"score","int"}, key = "id" }))
    end)

    it("integers no float holds exactly", function()
      local dir = v1_state()
      local p = open(dir)
      local t = p:table("players", V1)
      t:insert{ id = 5, name = "e", lvl = 9007199254740993 }
      t:insert{ id = 6, name = "f", lvl = -9007199254740995 }
      p:close()
      assert.equal('relation "players": column "lvl": stored as int, declared float not null: 2 rows hold '
                   .. 'integers no float holds exactly (first: id = 5)',
                   refused(dir, { {"id","int"}, {"name","string"}, {"lvl","float"}, {"score","int", null = true},
                                  key = "id" }))
    end)

    it("a new column that is not null and has no default", function()
      assert.equal('relation "players": new column "level" int is not null and has no default: the stored rows '
                   .. 'would have no value (give it a default, or null = true)',
                   refused(v1_state(), { {"id","int"}, {"name","string"}, {"lvl","int"},
                                         {"score","int", null = true}, {"level","int"}, key = "id" }))
    end)

    it("a key that changes type, columns or presence", function()
      local dir = v1_state()
      assert.equal('relation "players": the key cannot change: stored (id int), declared (id float); keep the '
                   .. 'stored key, or drop the table (p:drop("players")) to start it again',
                   refused(dir, { {"id","float"}, {"name","string"}, {"lvl","int"}, key = "id" }))
      assert.equal('relation "players": the key cannot change: stored (id int), declared (id int, name string); '
                   .. 'keep the stored key, or drop the table (p:drop("players")) to start it again',
                   refused(dir, { {"id","int"}, {"name","string"}, {"lvl","int"}, key = { "id", "name" } }))
      assert.equal('relation "players": the key cannot change: stored (id int), declared (none: keyless); keep '
                   .. 'the stored key, or drop the table (p:drop("players")) to start it again',
                   refused(dir, { {"id","int"}, {"name","string"}, {"lvl","int"} }))
    end)
  end)
end)

describe("a deploy sequence on one state", function()
  after_each(H.cleanup)

  it("v1 -> v2 -> v3 keeps rows, ids and derived results right after each", function()
    local dir = H.tmpdir()
    -- v1
    local p = open(dir)
    local players = p:table("players", { {"id","int"}, {"name","string"}, {"lvl","int"}, key = "id" })
    local by_lvl = players:aggregate{ by = "lvl", n = runnel.count(), name = "by_lvl" }
    players:insert{ id = 1, name = "ann", lvl = 1 }
    players:insert{ id = 2, name = "bob", lvl = 2 }
    players:insert{ id = 3, name = "cy", lvl = 2 }
    assert.same({ { 1, { lvl = 1, n = 1 } }, { 2, { lvl = 2, n = 2 } } }, rows_of(by_lvl))
    p:close()
    -- v2: a rating column with a default, the aggregate gains a function
    local lines
    p, lines = open(dir)
    players = p:table("players", { {"id","int"}, {"name","string"}, {"lvl","int"},
                                   {"rating","float", default = 1.5}, key = "id" })
    by_lvl = players:aggregate{ by = "lvl", n = runnel.count(), avg_rating = runnel.avg("rating"), name = "by_lvl" }
    assert.same({ 'players: added "rating" float = 1.5', "by_lvl: its declaration changed: rebuilt from its inputs" },
                lines)
    assert.same({ { 1, { lvl = 1, n = 1, avg_rating = 1.5 } }, { 2, { lvl = 2, n = 2, avg_rating = 1.5 } } },
                rows_of(by_lvl))
    local log = H.record(by_lvl)
    players:update{ id = 3, rating = 2.5 }
    assert.same({ { "UPDATE", 1, { lvl = 1, n = 1, avg_rating = 1.5 }, { lvl = 1, n = 1 } }, -- the rebuild, told first
                  { "UPDATE", 2, { lvl = 2, n = 2, avg_rating = 1.5 }, { lvl = 2, n = 2 } }, -- (evolve_tell10)
                  { "UPDATE", 2, { lvl = 2, n = 2, avg_rating = 2.0 }, { lvl = 2, n = 2, avg_rating = 1.5 } } }, log)
    p:close()
    -- v3: lvl renamed to level and the aggregate follows; name dropped
    p, lines = open(dir)
    players = p:table("players", { {"id","int"}, {"level","int", was = "lvl"}, {"rating","float", default = 1.5},
                                   key = "id" })
    by_lvl = players:aggregate{ by = "level", n = runnel.count(), avg_rating = runnel.avg("rating"), name = "by_lvl" }
    assert.same({ 'players: renamed "lvl" to "level"; dropped "name"',
                  "by_lvl: its declaration changed: rebuilt from its inputs" }, lines)
    assert.same({ { 1, { id = 1, level = 1, rating = 1.5 } }, { 2, { id = 2, level = 2, rating = 1.5 } },
                  { 3, { id = 3, level = 2, rating = 2.5 } } }, rows_of(players))
    assert.same({ { 1, { level = 1, n = 1, avg_rating = 1.5 } }, { 2, { level = 2, n = 2, avg_rating = 2.0 } } },
                rows_of(by_lvl))
    players:insert{ id = 4, level = 1 }
    assert.same({ level = 1, n = 2, avg_rating = 1.5 }, by_lvl:get(1))
    p:close()
  end)
end)

describe("a derived relation whose declaration changed", function()
  after_each(H.cleanup)

  it("a join is rebuilt from its inputs when a table it reads gains a column", function()
    local dir = H.tmpdir()
    local p = open(dir)
    local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"team","int"}, key = "id" })
    local roster = players:join(teams, { on = "team", name = "roster" })
    teams:insert{ id = 7, name = "red" }
    players:insert{ id = 1, team = 7 }
    p:close()
    local lines
    p, lines = open(dir)
    teams = p:table("teams", { {"id","int"}, {"name","string"}, {"region","string", default = "eu"}, key = "id" })
    players = p:table("players", { {"id","int"}, {"team","int"}, key = "id" })
    roster = players:join(teams, { on = "team", name = "roster" })
    assert.same({ 'teams: added "region" string = "eu"', "roster: its declaration changed: rebuilt from its inputs" },
                lines) -- its sinks are told the row gained region (evolve_join_right11_spec.lua)
    assert.same({ { 1, { id = 1, team = 7, ["teams.id"] = 7, name = "red", region = "eu" } } }, rows_of(roster))
    p:close()
  end)

  it("a stream aggregate is refused with the choices, and starts empty once dropped", function()
    local dir = H.tmpdir()
    local p = open(dir)
    local events = p:stream("events", { {"kind","string"} })
    events:aggregate{ by = "kind", n = runnel.count(), name = "per_kind" }
    events:insert{ kind = "a" }
    p:close()
    p = open(dir)
    events = p:stream("events", { {"kind","string"}, {"score","int", null = true} })
    local err = H.error_of(events.aggregate, events,
                           { by = "kind", n = runnel.count(), total = runnel.sum("score"), name = "per_kind" })
    assert.equal(('relation "per_kind": its declaration changed, and an aggregate over the stream "events" cannot '
                  .. 'be rebuilt (the stream\'s events are not kept): drop it to start it empty (p:drop("per_kind") '
                  .. 'or runnel drop %s per_kind), or keep its old declaration'):format(dir), err)
    -- the old declaration still works, with its state
    local per_kind = events:aggregate{ by = "kind", n = runnel.count(), name = "per_kind" }
    assert.same({ kind = "a", n = 1 }, per_kind:get("a"))
    p:close()
  end)
end)

describe("an aggregate rebuilt from its input", function()
  after_each(H.cleanup)

  -- Regression: the rebuild reset each group in place through a cursor,
  -- which LMDB can lose; the groups then got new ids (3, 4 here).
  it("keeps the ids of its groups when its state missed groups", function()
    local dir = H.tmpdir()
    local p = open(dir)
    local t = p:table("players", { {"id","int"}, {"lvl","int"}, key = "id" })
    t:aggregate{ by = "lvl", n = runnel.count(), name = "by_lvl" }
    t:insert{ id = 1, lvl = 3 }
    t:insert{ id = 2, lvl = 4 }
    p:close()
    p = open(dir) -- the aggregate is not declared: it misses this group
    p:table("players", { {"id","int"}, {"lvl","int"}, key = "id" }):insert{ id = 3, lvl = 3 }
    p:close()
    p = open(dir)
    t = p:table("players", { {"id","int"}, {"lvl","int"}, key = "id" })
    local by_lvl = t:aggregate{ by = "lvl", n = runnel.count(), name = "by_lvl" }
    assert.same({ { 1, { lvl = 3, n = 2 } }, { 2, { lvl = 4, n = 1 } } }, rows_of(by_lvl))
    t:delete{ id = 1 }
    t:delete{ id = 3 }
    assert.same({ { 2, { lvl = 4, n = 1 } } }, rows_of(by_lvl))
    p:close()
  end)
end)

describe("a schema change larger than the map", function()
  after_each(H.cleanup)

  -- Regression: the rewrite ran in the declaring transaction, which did not
  -- grow the map: the declaration failed with MDB_MAP_FULL.
  it("grows the map and applies the change", function()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir, map_size = 1048576, notes = false }
    local t = p:table("t", { {"id","int"}, key = "id" })
    p:batch(function() for i = 1, 2000 do t:insert{ id = i } end end)
    p:close()
    local lines = {}
    p = runnel.open{ path = dir, map_size = 1048576, notes = function(l) lines[#lines + 1] = l end }
    local pad = ("x"):rep(600)
    t = p:table("t", { {"id","int"}, {"pad","string", default = pad}, key = "id" })
    assert.equal(1, #lines)
    assert.equal(2000, t:count())
    assert.equal(pad, t:get(2000).pad)
    p:close()
  end)
end)

describe("a crash between a table's rewrite and its dependants' declaration", function()
  after_each(H.cleanup)

  -- v1 or v2 of players, and a join whose joiner keeps its columns (so its
  -- own declaration does not change) while its state holds players' rows.
  local function decl(version, exit_early)
    return ([[
      local runnel = require "runnel"
      local p = runnel.open{ path = DIR, notes = false }
      local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
      local cols = { {"id","int"}, {"team","int"}, key = "id" }
      if %d == 2 then table.insert(cols, 2, {"level","int", default = 1}) end
      local players = p:table("players", cols)
      if %s then os.exit(0) end -- dies before the join is declared, without closing
      local roster = players:join(teams, { on = "team", name = "roster",
        joiner = function(l, r) return { id = l.id, level = l.level or 0, tname = r.name } end,
        columns = { {"id","int"}, {"level","int"}, {"tname","string"}, key = "id" } })
    ]]):format(version, tostring(exit_early))
  end

  local function run(dir, src)
    local f = os.tmpname() .. ".lua"
    local h = assert(io.open(f, "w"))
    h:write((src:gsub("DIR", ("%q"):format(dir))))
    h:close()
    local out, err, code = H.sh(("%s run %s"):format(H.runnel_bin, f))
    os.remove(f)
    return out, err, code
  end

  it("rebuilds them when they are next declared (the mark is kept with the rewrite)", function()
    local dir = H.tmpdir()
    assert.same({ "", "", 0 }, { run(dir, decl(1, false) .. [[
      teams:insert{ id = 7, name = "red" }
      players:insert{ id = 1, team = 7 }
      p:close()
    ]]) })
    assert.same({ "", "", 0 }, { run(dir, decl(2, true)) })
    local src = decl(2, false):gsub("DIR", ("%q"):format(dir)) .. " return p, teams, players, roster"
    local p, teams, _, roster = load(src)()
    teams:update{ id = 7, name = "blue" } -- fans out from the join's copy of players' rows
    local rows = {}
    for row in roster:rows() do rows[#rows + 1] = row end
    assert.same({ { id = 1, level = 1, tname = "blue" } }, rows)
    p:close()
  end)
end)
