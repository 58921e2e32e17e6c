-- Keys that survive operators, and aggregate columns in the order written
-- (issue 14): an inner join's right columns stay non-null, an aggregate by
-- one keeps its key (and so does its SQLite mirror), key = states one the
-- inputs cannot prove, and the list form of aggregate keeps its order.
local runnel = require "runnel"
local H = require "helper"

local function columns(rel)
  local out = {}
  for i, c in ipairs(rel:schema().columns) do out[i] = c.name .. (c.null and "?" or "") end
  return table.concat(out, " ")
end

local function key_of(rel)
  local k = rel:schema().key
  return k and table.concat(k, ",") or nil
end

describe("keys through joins and aggregates", function()
  after_each(H.cleanup)

  local function tables(p)
    return p:table("teams", { {"id","int"}, {"region","string"}, {"motto","string", null = true}, key = "id" }),
           p:table("players", { {"id","int"}, {"team","int"}, key = "id" })
  end

  it("an inner join keeps right columns non-null unless declared nullable; a left join makes them nullable",
     function()
    local p = runnel.open()
    local teams, players = tables(p)
    assert.equal("id team teams.id region motto?", columns(players:join(teams, { on = "team", name = "i" })))
    assert.equal("id team teams.id? region? motto?",
                 columns(players:join(teams, { on = "team", kind = "left", name = "l" })))
    p:close()
  end)

  it("an aggregate by a right column of an inner join keeps its key, and its SQLite mirror is keyed by it",
     function()
    local dir = H.tmpdir()
    local p = runnel.open()
    local teams, players = tables(p)
    local per_region = players:join(teams, { on = "team" }):aggregate{ by = "region", n = runnel.count() }
    assert.equal("region", key_of(per_region))
    per_region:sink(runnel.sqlite(dir .. "/m.db", "per_region"))
    teams:insert{ id = 1, region = "eu" }
    players:insert{ id = 1, team = 1 }
    players:insert{ id = 2, team = 1 }
    p:close()
    assert.matches('PRIMARY KEY %("region"%)', H.sql(dir .. "/m.db", ".schema per_region"))
    assert.equal("eu|2\n", H.sql(dir .. "/m.db", "SELECT * FROM per_region"))
  end)

  it("aggregate{ key = … } states the key a left join cannot prove, and refuses a null there", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local left = players:join(teams, { on = "team", kind = "left" })
    assert.is_nil(key_of(left:aggregate{ by = "region", n = runnel.count(), name = "unkeyed" }))
    local keyed = left:aggregate{ by = "region", n = runnel.count(), name = "keyed", key = "region" }
    assert.equal("region", key_of(keyed))
    assert.equal("region n", columns(keyed))
    teams:insert{ id = 1, region = "eu" }
    players:insert{ id = 1, team = 1 }
    assert.same({ region = "eu", n = 1 }, keyed:get("eu"))
    assert.equal('keyed: by column "region" is null, but its key = … says it never is',
                 H.error_of(players.insert, players, { id = 2, team = 9 }))
    assert.equal(1, players:count()) -- the change was rolled back
    assert.equal("players.join.aggregate: key must name the by columns, in order (region)",
                 H.error_of(left.aggregate, left, { by = "region", n = runnel.count(), key = "id" }))
    p:close()
  end)

  it("select{ …, key = … } states a key", function()
    local p = runnel.open()
    local _, players = tables(p)
    assert.equal("team", key_of(players:select({ "team", "id", key = "team" }, "by_team")))
    p:close()
  end)
end)

describe("aggregate columns", function()
  it("keep the order written in the list form", function()
    local p = runnel.open()
    local t = p:table("s", { {"id","int"}, {"team","string"}, {"score","int"}, key = "id" })
    local a = t:aggregate{ by = "team", {"n", runnel.count()}, {"total", runnel.sum("score")},
                           {"avg", runnel.avg("score")}, name = "listed" }
    assert.equal("team n total? avg?", columns(a))
    t:insert{ id = 1, team = "a", score = 3 }
    assert.same({ team = "a", n = 1, total = 3, avg = 3.0 }, a:get("a"))
    -- the map form: name order
    assert.equal("team avg? n total?", columns(t:aggregate{ by = "team", n = runnel.count(),
                                                          total = runnel.sum("score"), avg = runnel.avg("score") }))
    p:close()
  end)

  it("refuse a list mixed with names, a name given twice and a malformed entry", function()
    local p = runnel.open()
    local t = p:table("s", { {"id","int"}, {"team","string"}, key = "id" })
    assert.equal('s.aggregate: give the aggregates as a list { {"n", runnel.count()}, … } or as n = runnel.count(), '
                 .. 'not both', H.error_of(t.aggregate, t, { {"n", runnel.count()}, m = runnel.count() }))
    assert.equal('s.aggregate: column "n" is named twice',
                 H.error_of(t.aggregate, t, { {"n", runnel.count()}, {"n", runnel.count()} }))
    assert.equal('s.aggregate: entry #1 must be {"name", aggregate}, e.g. {"n", runnel.count()}',
                 H.error_of(t.aggregate, t, { {"n"} }))
    p:close()
  end)
end)
