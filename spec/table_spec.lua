-- Tables and streams: insert, update, upsert, delete, get, rows, count (DESIGN §9, §12).
local runnel = require "runnel"
local H = require "helper"

describe("a keyed table", function()
  local p, players
  before_each(function()
    p = runnel.open()
    players = p:table("players", { {"id","int"}, {"name","string"}, {"team_id","int", null = true},
                                   {"score","int", default = 0}, key = "id" })
  end)
  after_each(function() p:close() end)

  it("applies a patch update to the given columns only", function()
    players:insert{ id = 1, name = "ann", team_id = 7 }
    players:update{ id = 1, score = 10 }
    assert.same({ id = 1, name = "ann", team_id = 7, score = 10 }, players:get{ id = 1 })
    players:update{ id = 1, team_id = runnel.null }
    assert.same({ id = 1, name = "ann", score = 10 }, players:get(1))
  end)

  it("replaces the whole row on upsert of an existing key", function()
    players:insert{ id = 1, name = "ann", team_id = 7, score = 5 }
    players:upsert{ id = 1, name = "ann" }
    assert.same({ id = 1, name = "ann", score = 0 }, players:get(1))
  end)

  it("reports duplicate inserts and absent updates and deletes with the key", function()
    players:insert{ id = 1, name = "ann" }
    assert.equal("players: insert: a row with key (id = 1) already exists",
                 H.error_of(players.insert, players, { id = 1, name = "bob" }))
    assert.equal("players: update: no row with key (id = 2)",
                 H.error_of(players.update, players, { id = 2, score = 1 }))
    assert.equal("players: delete: no row with key (id = 2)", H.error_of(players.delete, players, { id = 2 }))
    assert.equal('players: column "id": key columns cannot be null',
                 H.error_of(players.insert, players, { id = runnel.null, name = "x" }))
    assert.equal('players: column "id": key column is missing', H.error_of(players.update, players, { score = 1 }))
    assert.equal('players: unknown column "nme" (did you mean "name"?)', H.error_of(players.insert, players, { id = 3, nme = "x" }))
    assert.equal('players: column "name": missing (the column is not nullable)',
                 H.error_of(players.insert, players, { id = 3 }))
  end)

  it("drops no-op updates and upserts (ROWID-4)", function()
    local log = H.record(players)
    players:insert{ id = 1, name = "ann" }
    players:update{ id = 1, name = "ann" }
    players:upsert{ id = 1, name = "ann", score = 0 }
    players:update{ id = 1, score = 0.0 }
    assert.same({ "INSERT 1" }, H.verbs(log))
  end)

  it("iterates rows in key order, negatives first", function()
    for _, id in ipairs{ 5, -3, 100, 0, -20 } do players:insert{ id = id, name = "p" .. id } end
    local ids = {}
    for row, rid in players:rows() do ids[#ids + 1] = row.id; assert.equal(players:id_of(row.id), rid) end
    assert.same({ -20, -3, 0, 5, 100 }, ids)
    assert.equal(5, players:count())
  end)

  it("ends its read when a loop breaks out of rows()", function()
    for i = 1, 3 do players:insert{ id = i, name = "x" } end
    for _ = 1, 1000 do -- would exhaust LMDB's reader slots if break leaked them
      for _ in players:rows() do break end
    end
    players:insert{ id = 4, name = "y" }
    assert.equal(4, players:count())
  end)

  it("orders strings bytewise and composite keys column by column", function()
    local t = p:table("c", { {"a","string"}, {"b","int"}, key = { "a", "b" } })
    for _, r in ipairs{ { "b", 1 }, { "a", 2 }, { "a", -1 }, { "ab", 0 }, { "", 9 }, { "B", 0 } } do
      t:insert{ a = r[1], b = r[2] }
    end
    local got = {}
    for row in t:rows() do got[#got + 1] = row.a .. ":" .. row.b end
    assert.same({ ":9", "B:0", "a:-1", "a:2", "ab:0", "b:1" }, got)
    assert.same({ a = "a", b = 2 }, t:get{ a = "a", b = 2 })
    assert.equal('c: a key is a table of its key columns, got number', H.error_of(t.get, t, 1))
  end)

  it("finds an int key given as a float without a fraction", function()
    players:insert{ id = 7, name = "x" }
    assert.equal("x", players:get(7.0).name)
    assert.equal('players: column "id": expected int, got number 7.5', H.error_of(players.get, players, 7.5))
  end)

  it("keeps keys longer than LMDB's key limit apart", function()
    local t = p:table("long", { {"k","string"}, {"v","int"}, key = "k" })
    local base = ("x"):rep(600)
    t:insert{ k = base .. "1", v = 1 }
    t:insert{ k = base .. "2", v = 2 }
    t:insert{ k = ("y"):rep(2000), v = 3 }
    assert.equal(1, t:get(base .. "1").v)
    assert.equal(2, t:get(base .. "2").v)
    t:delete(base .. "1")
    assert.is_nil(t:get(base .. "1"))
    t:insert{ k = base .. "1", v = 4 }
    assert.equal(1, t:id_of(base .. "1"))
    assert.equal(3, t:count())
  end)

  it("orders float keys by value", function()
    local t = p:table("f", { {"x","float"}, key = "x" })
    for _, x in ipairs{ 1.5, -math.huge, 0, -2.25, math.huge, 1e-300 } do t:insert{ x = x } end
    local got = {}
    for row in t:rows() do got[#got + 1] = row.x end
    assert.same({ -math.huge, -2.25, 0.0, 1e-300, 1.5, math.huge }, got)
    assert.equal("f: column \"x\": NaN cannot be part of a key", H.error_of(t.insert, t, { x = 0 / 0 }))
  end)
end)

describe("a stream", function()
  it("takes inserts only and keeps no rows", function()
    local p = runnel.open()
    local s = p:stream("ev", { {"kind","string"}, {"ts","int"} })
    s:insert{ kind = "x", ts = 1 }
    assert.equal("ev: update: only tables take updates", H.error_of(s.update, s, { kind = "x", ts = 2 }))
    assert.equal("ev: delete: only tables take deletes", H.error_of(s.delete, s, { kind = "x", ts = 1 }))
    assert.equal("ev: upsert: a stream only takes inserts", H.error_of(s.upsert, s, { kind = "x", ts = 1 }))
    assert.equal("ev: a stream holds no rows to read", H.error_of(s.rows, s))
    p:close()
  end)
end)

describe("a lookup", function()
  it("says it holds no rows to read, as a lookup, not as a stream", function()
    local p = runnel.open()
    local lk = p:lookup("lk", { {"id","int"}, {"x","string"}, key = "id",
                                source = function(id) return { id = id, x = "v" } end })
    local want = "lk: a lookup holds no rows to read: they are fetched from its source when a join asks for them"
    assert.equal(want, H.error_of(lk.rows, lk))
    assert.equal(want, H.error_of(lk.count, lk))
    assert.equal(want, H.error_of(lk.scan, lk, function() end))
    p:close()
  end)
end)
