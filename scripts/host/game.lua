-- game.lua — the pipeline the example host (scripts/host/host.c) loads.
-- The host declares nothing: this script does, and the host finds the
-- relations by name (rn_relation) to push into and subscribe to.
local p = ...

local players = p:table("players", { {"id","int"}, {"name","string"}, {"guild","int", null = true},
                                     {"score","int", default = 0}, key = "id" })
local guilds = p:table("guilds", { {"id","int"}, {"name","string"}, key = "id" })
p:table("matches", { {"id","int"}, {"player","int"}, {"points","int"}, key = "id" })

-- What the host reads: each player with their guild's name, and the log of
-- every player change with its pre- and postimage.
players:join(guilds, { on = "guild", kind = "left", name = "roster" })
       :select({ {"player","id"}, "score", {"guild","guilds.name"} }, "leaderboard")
players:cdc{ preimage = true, postimage = true, name = "player_log" }
