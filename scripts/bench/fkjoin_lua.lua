-- fkjoin_lua.lua FILE.ndjson — the fkjoin job hand-written over plain Lua
-- tables (no state on disk, no ids): the figure runnel is compared with in
-- one run of `make bench`, and an independent check of its checksum.
--
-- Written the way a careful Lua programmer would write it, so that the
-- comparison is fair: the result is kept column by column (no table per
-- result row, so nothing to collect per change), a player's entry in the
-- team index moves only when its team does, a result is compared field by
-- field before it counts as an event, and the collector is generational.
-- (A first, plainer version, one new table per result, ran at about 55% of
-- this speed.)
local runnel = require "runnel" -- only for json_decode and the clock
local common = dofile((arg[0]:match("^(.*)/") or ".") .. "/fkjoin_common.lua")
local path = assert(arg[1], "usage: fkjoin_lua.lua FILE.ndjson")

local changes = {}
local null = runnel.null
for line in io.lines(path) do
  local c = assert(runnel.json_decode(line))
  if c.row.team_id == null then c.row.team_id = nil end -- the only nullable column
  changes[#changes + 1] = c
end

local teams, players, by_team = {}, {}, {} -- by_team[team id][player id] = true
-- The result, by player id, one table per column; live[pid] says it exists.
local live, r_name, r_score, r_tname, r_region = {}, {}, {}, {}, {}
local events = 0

-- Sets player pid's result from its row (nil: no player, no result).
local function set_result(pid, pl)
  if not pl then
    if live[pid] then
      events = events + 1
      live[pid], r_name[pid], r_score[pid], r_tname[pid], r_region[pid] = nil, nil, nil, nil, nil
    end
    return
  end
  local tid = pl.team_id
  local t = tid and teams[tid]
  local tname, region = t and t.name, t and t.region
  if not live[pid] or r_name[pid] ~= pl.name or r_score[pid] ~= pl.score or r_tname[pid] ~= tname
     or r_region[pid] ~= region then
    events = events + 1
    live[pid] = true
    r_name[pid], r_score[pid], r_tname[pid], r_region[pid] = pl.name, pl.score, tname, region
  end
end

local function unlink(tid, pid)
  local s = tid and by_team[tid]
  if s then s[pid] = nil end
end

local function link(tid, pid)
  if not tid then return end
  local s = by_team[tid]
  if not s then s = {}; by_team[tid] = s end
  s[pid] = true
end

collectgarbage("collect")
local mem_input = common.memory()
collectgarbage("generational")
local t0 = runnel.now()
for i = 1, #changes do
  local c = changes[i]
  local row = c.row
  local id = row.id
  if c.rel == "players" then
    local old = players[id]
    local old_tid = old and old.team_id
    if c.op == "delete" then
      players[id] = nil
      unlink(old_tid, id)
      set_result(id, nil)
    else
      players[id] = row
      if old_tid ~= row.team_id then
        unlink(old_tid, id)
        link(row.team_id, id)
      end
      set_result(id, row)
    end
  else
    if c.op == "delete" then teams[id] = nil else teams[id] = row end
    local s = by_team[id]
    if s then for pid in pairs(s) do set_result(pid, players[pid]) end end
  end
end
local elapsed = runnel.now() - t0
local mem_after = common.memory()

local rows = {}
for id in pairs(live) do rows[#rows + 1] = { id, r_name[id], r_score[id], r_tname[id], r_region[id] } end
print(("lua.changes: %d"):format(#changes))
print(("lua.changes_per_s: %d"):format(math.floor(#changes / elapsed)))
print(("lua.events: %d"):format(events))
print(("lua.checksum: %s"):format(common.checksum(rows)))
common.print_memory("lua.", mem_input, mem_after)
