-- A join's index entries are rewritten in place (join_state.c: the entry a
-- change just read is rewritten where its cursor stands). These changes
-- resize entries across LMDB's page and overflow-page sizes, and fan out
-- through many entries; after each the join must equal the join computed
-- afresh from its inputs, and runnel verify must find the state whole.
local runnel = require "runnel"
local H = require "helper"

-- The join of players and teams, computed in Lua from their rows.
local function expected(players, teams)
  local names, rows = {}, {}
  for t in teams:rows() do names[t.id] = t.name end
  for pl in players:rows() do
    if names[pl.team] then
      rows[#rows + 1] = { id = pl.id, bio = pl.bio, team = pl.team, name = names[pl.team], ["teams.id"] = pl.team }
    end
  end
  return rows
end

local function rows_of(rel)
  local rows = {}
  for row in rel:rows() do rows[#rows + 1] = row end
  return rows
end

describe("a join's index entries rewritten in place", function()
  after_each(H.cleanup)

  it("stay right when a left row grows and shrinks across page and overflow sizes, and through fan-outs", function()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir .. "/state", notes = false }
    local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"bio","string"}, {"team","int"}, key = "id" })
    local roster = players:join(teams, { on = "team", name = "roster" })
    teams:insert{ id = 1, name = "red" }
    teams:insert{ id = 2, name = "blue" }
    p:batch(function()
      for i = 1, 300 do players:insert{ id = i, bio = ("b"):rep(i % 7), team = 1 + i % 2 } end
    end)
    local sizes = { 0, 5000, 10, 2000, 9000, 1, 4100, 3000, 64, 12000, 0 }
    for step, size in ipairs(sizes) do
      p:batch(function()
        for i = step, 300, 7 do players:update{ id = i, bio = ("x"):rep(size + i % 3) } end
        -- the right side changes too: its fan-out reads and rewrites entries the updates moved
        teams:update{ id = 1 + step % 2, name = ("n"):rep(step * 50) }
      end)
      assert.same(expected(players, teams), rows_of(roster), "after step " .. step)
    end
    p:batch(function() -- entries move between right keys, in place and not
      for i = 1, 300, 3 do players:update{ id = i, team = 1 + (i + 1) % 2 } end
    end)
    assert.same(expected(players, teams), rows_of(roster))
    p:close()
    local out, err, code = H.sh(("%s verify %s/state"):format(H.runnel_bin, dir))
    assert.same({ "", 0 }, { err, code }, out)
  end)

  -- A fan-out rewrites the entries of a joiner's kept results one after
  -- another, stepping the index cursor from one entry to the next instead of
  -- searching again (join_state.c: rn_join_index_seek). Entries whose result
  -- stays are skipped, entries of other teams lie around them, results grow
  -- and shrink across page and overflow sizes, and groups roll back inside
  -- a carried transaction: the join must equal the one computed afresh.
  it("stay right when a fan-out rewrites the kept results of a joiner, entry after entry", function()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir .. "/state", notes = false, sync = false }
    local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"bio","string"}, {"team","int"}, key = "id" })
    -- a player whose id is a multiple of 5 ignores the team's name: its result stays
    local function result(pl, tname) return pl.id, pl.bio, pl.team, pl.id % 5 == 0 and "-" or tname end
    local roster = players:join(teams, { name = "roster", mapper = function(r) return r.team end,
      joiner = function(l, t) if t then return result(l, t.name) end end,
      columns = { {"id","int"}, {"bio","string"}, {"team","int"}, {"name","string"}, key = "id" } })
    local function want()
      local names, rows = {}, {}
      for t in teams:rows() do names[t.id] = t.name end
      for pl in players:rows() do
        if names[pl.team] then
          local id, bio, team, name = result(pl, names[pl.team])
          rows[#rows + 1] = { id = id, bio = bio, team = team, name = name }
        end
      end
      return rows
    end
    p:batch(function()
      for t = 1, 3 do teams:insert{ id = t, name = "t" .. t } end
      for i = 1, 240 do players:insert{ id = i, bio = ("b"):rep(i % 11), team = 1 + i % 3 } end
    end)
    local sizes = { 4000, 3, 9000, 0, 2500, 12000, 7 }
    for step, size in ipairs(sizes) do
      local t = 1 + step % 3
      p:batch(function()
        teams:update{ id = t, name = ("n"):rep(size) .. step }
        for i = step, 240, 13 do players:update{ id = i, bio = ("x"):rep((size + i) % 300) } end
        teams:update{ id = 1 + (step + 1) % 3, name = "m" .. step }
      end)
      assert.same(want(), rows_of(roster), "after step " .. step)
      local ok = pcall(p.batch, p, function() -- rolled back: the carried groups before it stay
        teams:update{ id = t, name = ("r"):rep(size + 100) }
        error("no")
      end)
      assert.is_false(ok)
      assert.same(want(), rows_of(roster), "after the rollback of step " .. step)
    end
    p:close()
    local out, err, code = H.sh(("%s verify %s/state"):format(H.runnel_bin, dir))
    assert.same({ "", 0 }, { err, code }, out)
  end)
end)
