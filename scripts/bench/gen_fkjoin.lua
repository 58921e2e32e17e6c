-- gen_fkjoin.lua OUT.ndjson [teams] [players] [changes] [seed]
-- runnel's own generator of the fkjoin workload described in
-- shared/bench/fkjoin.md (its own random numbers: splitmix64), so that
-- `make bench` needs nothing outside the repository. The mix: 40% score
-- updates (some no-ops), 15% foreign-key changes (another team, null, a
-- team that does not exist), 10% team renames or region changes, 10% player
-- inserts, 10% player deletes, 5% team deletes, 5% team inserts (half of
-- them re-inserting a deleted id), 5% player re-inserts of deleted ids.
local out = assert(arg[1], "usage: gen_fkjoin.lua OUT.ndjson [teams] [players] [changes] [seed]")
local N_TEAMS, N_PLAYERS = tonumber(arg[2] or 10000), tonumber(arg[3] or 200000)
local N_CHANGES, seed = tonumber(arg[4] or 1000000), tonumber(arg[5] or 7)

local s = seed
local function rand(n) -- splitmix64, then reduce to [0, n)
  s = s + 0x9E3779B97F4A7C15
  local z = s
  z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
  z = (z ~ (z >> 27)) * 0x94D049BB133111EB
  z = z ~ (z >> 31)
  return (z >> 1) % n
end

local regions = { "eu", "na", "sa", "apac", "mena", "ssa", "oce", "cis" }
local function pool() return { list = {}, at = {} } end
local function put(p, id) p.list[#p.list + 1] = id; p.at[id] = #p.list end
local function take(p, id)
  local i, last = p.at[id], p.list[#p.list]
  p.list[i], p.at[last] = last, i
  p.list[#p.list], p.at[id] = nil, nil
end
local function any(p) return p.list[rand(#p.list) + 1] end

local teams, gone_teams, players, gone_players = pool(), pool(), pool(), pool()
local tname, tregion, pname, pteam, pscore = {}, {}, {}, {}, {}
local top_team, top_player = N_TEAMS, N_PLAYERS

local f = assert(io.open(out, "w"))
local lines = {}
local function line(text)
  lines[#lines + 1] = text
  if #lines == 5000 then f:write(table.concat(lines, "\n"), "\n"); lines = {} end
end
local function team(op, id)
  if op == "delete" then return line(('{"rel":"teams","op":"delete","row":{"id":%d}}'):format(id)) end
  line(('{"rel":"teams","op":"%s","row":{"id":%d,"name":"%s","region":"%s"}}'):format(op, id, tname[id], tregion[id]))
end
local function player(op, id)
  if op == "delete" then return line(('{"rel":"players","op":"delete","row":{"id":%d}}'):format(id)) end
  line(('{"rel":"players","op":"%s","row":{"id":%d,"name":"%s","team_id":%s,"score":%d}}')
       :format(op, id, pname[id], pteam[id] and tostring(pteam[id]) or "null", pscore[id]))
end
local function team_ref()
  local r = rand(100)
  if r < 80 then return any(teams) end
  if r < 88 then return nil end
  if r < 94 and #gone_teams.list > 0 then return any(gone_teams) end
  return top_team + 1 + rand(500)
end
local function new_player(id)
  pname[id], pteam[id], pscore[id] = "p" .. id, team_ref(), rand(1000)
  put(players, id)
  player("insert", id)
end

for id = 1, N_TEAMS do
  tname[id], tregion[id] = "t" .. id, regions[rand(#regions) + 1]
  put(teams, id)
  team("insert", id)
end
for id = 1, N_PLAYERS do new_player(id) end

for k = 1, N_CHANGES do
  local r = rand(100)
  if r < 40 then
    local id = any(players)
    pscore[id] = pscore[id] + rand(11) - 5
    player("update", id)
  elseif r < 55 then
    local id = any(players)
    pteam[id] = team_ref()
    player("update", id)
  elseif r < 65 then
    local id = any(teams)
    if rand(2) == 0 then tname[id] = ("t%d_%d"):format(id, k) else tregion[id] = regions[rand(#regions) + 1] end
    team("update", id)
  elseif r < 75 then
    top_player = top_player + 1
    new_player(top_player)
  elseif r < 85 then
    local id = any(players)
    take(players, id); put(gone_players, id)
    player("delete", id)
  elseif r < 90 then
    local id = any(teams)
    take(teams, id); put(gone_teams, id)
    team("delete", id)
  elseif r < 95 then
    local id
    if #gone_teams.list > 0 and rand(2) == 0 then id = any(gone_teams); take(gone_teams, id)
    else top_team = top_team + 1; id = top_team; tname[id] = "t" .. id end
    tregion[id] = tregion[id] or regions[rand(#regions) + 1]
    put(teams, id)
    team("insert", id)
  elseif #gone_players.list > 0 then
    local id = any(gone_players)
    take(gone_players, id)
    new_player(id)
  else
    top_player = top_player + 1
    new_player(top_player)
  end
end
f:write(table.concat(lines, "\n"), #lines > 0 and "\n" or "")
f:close()
