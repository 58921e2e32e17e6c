-- demo.lua — a small real pipeline: teams and players, a few groups of
-- changes, a filter of the leaderboard, and sinks that print each verb with
-- its row id. Run it with `make demo` or `build/runnel run scripts/demo.lua`.
local runnel = require "runnel"

local p <close> = runnel.open() -- a temporary state, removed at close

local teams = p:table("teams", { {"id","int"}, {"name","string"}, {"region","string", null = true}, key = "id" })
local players = p:table("players", { {"id","int"}, {"name","string"}, {"team_id","int", null = true},
                                     {"score","int", default = 0}, key = "id" })

-- Players with at least 100 points: rows enter and leave as scores move.
local leaders = players:filter(function(row) return row.score >= 100 end, "leaders")

local function show(row)
  local parts = {}
  for _, k in ipairs{ "id", "name", "team_id", "score" } do
    if row[k] ~= nil then parts[#parts + 1] = k .. "=" .. tostring(row[k]) end
  end
  return "{" .. table.concat(parts, " ") .. "}"
end

players:sink(function(verb, row, old, info)
  print(("  players   %-6s id %d  %s%s"):format(verb, info.id, show(row or old),
        verb == "UPDATE" and ("  (was score=%d)"):format(old.score) or ""))
end)
leaders:sink{
  insert = function(row, info) print(("  leaders   +  %s joins the leaderboard (id %d)"):format(row.name, info.id)) end,
  delete = function(old, info) print(("  leaders   -  %s leaves the leaderboard (id %d)"):format(old.name, info.id)) end,
  commit = function(seq) print(("  -- group %d committed\n"):format(seq)) end,
}

print("group 1: the season opens")
p:batch(function()
  teams:insert{ id = 7, name = "Otters", region = "eu" }
  teams:insert{ id = 9, name = "Herons" }
  players:insert{ id = 1, name = "ann", team_id = 7 }
  players:insert{ id = 2, name = "bob", team_id = 7, score = 120 }
  players:insert{ id = 3, name = "cyd", team_id = 9, score = 40 }
end)

print("group 2: a match is played")
p:batch(function()
  players:update{ id = 1, score = 130 }
  players:update{ id = 2, score = 90 }
  players:update{ id = 3, score = 40 } -- no change: nothing is emitted
end)

print("group 3: bob retires, cyd transfers, bob comes back")
p:batch(function()
  players:delete{ id = 2 }
  players:update{ id = 3, team_id = 7, score = 101 }
  players:insert{ id = 2, name = "bob", team_id = 9 } -- the same key gets its id back
end)

print("a bad change is rolled back with its whole group:")
local ok, err = pcall(p.batch, p, function()
  players:insert{ id = 4, name = "dee" }
  players:update{ id = 5, score = 1 }
end)
print("  error: " .. tostring(err))
print(("  ok=%s, players=%d, last group=%d\n"):format(ok, players:count(), p:seq()))

runnel.show(players)
