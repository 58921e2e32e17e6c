-- Joins and their Lua callbacks at the edges (DESIGN §6, §12): declarations
-- that could not mean what they say, callbacks returning what no key or row
-- is, and errors that name the join, the column and the callback's line.
local runnel = require "runnel"

local function tables(p)
  local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
  local players = p:table("players", { {"id","int"}, {"tid","int", null = true}, key = "id" })
  return teams, players
end

local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok)
  return tostring(e)
end

describe("a join given columns without a joiner", function()
  it("is refused at its declaration, naming the join (its rows would not be those columns)", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local e = err_of(players.join, players, teams,
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
