-- fkjoin_lua.lua FILE.ndjson — the fkjoin job hand-written over plain Lua
-- tables (no state on disk, no ids): the figure runnel is compared with in
-- one run of `make bench`, and an independent check of its checksum.
local runnel = require "runnel" -- only for json_decode and the clock
local path = assert(arg[1], "usage: fkjoin_lua.lua FILE.ndjson")
local changes = {}
local null = runnel.null
for line in io.lines(path) do
  local c = assert(runnel.json_decode(line))
  if c.row.team_id == null then c.row.team_id = nil end -- the only nullable column
  changes[#changes + 1] = c
end

local teams, players, by_team = {}, {}, {} -- by_team[team id][player id] = true
local result, events = {}, 0
local function result_of(pl)
  local t = pl.team_id and teams[pl.team_id]
  return { pl.id, pl.name, pl.score, t and t.name, t and t.region }
end
local function same(a, b)
  if not a or not b then return a == b end
  for i = 1, 5 do if a[i] ~= b[i] then return false end end
  return true
end
local function set_result(id, new)
  if not same(result[id], new) then events = events + 1 end
  result[id] = new
end
local function link(pl, on)
  if not pl.team_id then return end
  local s = by_team[pl.team_id]
  if on then
    if not s then s = {}; by_team[pl.team_id] = s end
    s[pl.id] = true
  elseif s then s[pl.id] = nil end
end
local t0 = runnel.now()
for _, c in ipairs(changes) do
  local row = c.row
  if c.rel == "players" then
    local old = players[row.id]
    if old then link(old, false) end
    if c.op == "delete" then
      players[row.id] = nil
      set_result(row.id, nil)
    else
      players[row.id] = row
      link(row, true)
      set_result(row.id, result_of(row))
    end
  else
    if c.op == "delete" then teams[row.id] = nil else teams[row.id] = row end
    for pid in pairs(by_team[row.id] or {}) do set_result(pid, result_of(players[pid])) end
  end
end
local elapsed = runnel.now() - t0

local ids = {}
for id in pairs(result) do ids[#ids + 1] = id end
table.sort(ids)
local parts = {}
for i, id in ipairs(ids) do
  local r = result[id]
  parts[i] = ("%d|%s|%d|%s|%s"):format(r[1], r[2], r[3], r[4] or "\\N", r[5] or "\\N")
end
local text = table.concat(parts, "\n")
local h = -3750763034362895579
for i = 1, #text do h = (h ~ text:byte(i)) * 1099511628211 end
print(("lua.changes: %d"):format(#changes))
print(("lua.changes_per_s: %d"):format(math.floor(#changes / elapsed)))
print(("lua.events: %d"):format(events))
print(("lua.checksum: %016x"):format(h))
