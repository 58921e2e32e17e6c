-- aggregate.lua FILE.ndjson [events] — two figures for issue 7:
--  * changes/s into players (200,000 rows) maintaining count, sum, min and
--    max of score by team_id (~10,000 values) under the fkjoin mix (the
--    players changes of the fkjoin file), groups of 1,000, sync = false;
--  * events/s through a tumbling-window count by player on a stream.
local runnel = require "runnel"
local path = assert(arg[1], "usage: aggregate.lua FILE.ndjson [events]")
local EVENTS = tonumber(arg[2]) or 1000000

local changes = {}
for line in io.lines(path) do
  local c = assert(runnel.json_decode(line))
  if c.rel == "players" then changes[#changes + 1] = c end
end

local p = runnel.open{ sync = false }
local players = p:table("players", { {"id","int"}, {"name","string"}, {"team_id","int", null = true},
                                     {"score","int"}, key = "id" })
local by_team = players:aggregate{ by = "team_id", n = runnel.count(), total = runnel.sum("score"),
                                   lo = runnel.min("score"), hi = runnel.max("score") }
local t0 = runnel.now()
for g = 1, #changes, 1000 do
  p:begin()
  for i = g, math.min(g + 999, #changes) do
    local c = changes[i]
    players[c.op](players, c.row)
  end
  p:commit()
end
local dt = runnel.now() - t0
local e = by_team:changes()
print(("aggregate.changes_per_s: %d (%d changes, %d group changes, %d groups)"):format(
  math.floor(#changes / dt), #changes, e.inserts + e.updates + e.deletes, by_team:count()))

local ev = p:stream("clicks", { {"player","int"}, {"ts","int"} })
local per_min = ev:aggregate{ by = "player", window = runnel.tumbling(60, "ts"), n = runnel.count() }
local rows = {}
local seed = 1
for i = 1, EVENTS do
  seed = (seed * 1103515245 + 12345) % 2147483648
  rows[i] = { player = seed % 10000, ts = i // 100 }
end
t0 = runnel.now()
for g = 1, EVENTS, 1000 do
  p:begin()
  for i = g, math.min(g + 999, EVENTS) do ev:insert(rows[i]) end
  p:commit()
end
dt = runnel.now() - t0
print(("aggregate.window_events_per_s: %d (%d events, %d windows)"):format(
  math.floor(EVENTS / dt), EVENTS, per_min:changes().inserts))
p:close()
