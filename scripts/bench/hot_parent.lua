-- hot_parent.lua [players] [renames] — fan-out cost: one team with 100,000
-- players, renamed 100 times, each rename one group; players LEFT JOIN teams
-- projected as in fkjoin. Prints result rows updated per second.
local runnel = require "runnel"
local N = tonumber(arg[1]) or 100000
local R = tonumber(arg[2]) or 100

local p = runnel.open{ sync = false }
local teams = p:table("teams", { {"id","int"}, {"name","string"}, {"region","string"}, key = "id" })
local players = p:table("players", { {"id","int"}, {"name","string"}, {"team_id","int", null = true},
                                     {"score","int"}, key = "id" })
local result = players:join(teams, { on = "team_id", kind = "left" })
                      :select{ {"pid","id"}, {"pname","name"}, "score", {"tname","teams.name"}, "region" }
teams:insert{ id = 1, name = "hot", region = "eu" }
for g = 0, N - 1, 1000 do
  p:batch(function()
    for i = g + 1, math.min(g + 1000, N) do players:insert{ id = i, name = "p" .. i, team_id = 1, score = 0 } end
  end)
end
local before = result:changes().updates
local t0 = runnel.now()
for r = 1, R do teams:update{ id = 1, name = "hot" .. r } end
local dt = runnel.now() - t0
local updates = result:changes().updates - before
assert(updates == N * R, ("expected %d result updates, got %d"):format(N * R, updates))
print(("hot_parent.result_updates_per_s: %d (%d players x %d renames in %.2f s)"):format(
  math.floor(updates / dt), N, R, dt))
p:close()
