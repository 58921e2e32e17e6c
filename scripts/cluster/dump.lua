-- dump.lua — the tables of states, one sorted line per row, to compare a
-- cluster with one process:  lua5.4 dump.lua STATE… (or runnel run dump.lua STATE…)
--   ORACLE=FILE: instead, apply FILE with p:run into a temporary state and dump that
local runnel = require "runnel"
local here = arg[0]:match("^(.*)/[^/]*$") or "."
local declare = dofile(here .. "/leaderboard.lua")
local lines = {}
local function dump(p, rels)
  for row in rels.board:rows() do
    lines[#lines + 1] = ("board|%d|%s|%s|%d|%d|%d"):format(row.guild, row.name, row.player, row.points, row.games, row.best)
  end
  for row in rels.scored:rows() do
    lines[#lines + 1] = ("scored|%d|%s|%d|%d|%s"):format(row.match, row.player, row.guild, row.score, row.name)
  end
end
if os.getenv("ORACLE") then
  local p = runnel.open{ sync = false }
  local rels = declare(runnel, p)
  p:run(runnel.ndjson_source(os.getenv("ORACLE")), { batch = 500, progress = false })
  dump(p, rels)
  p:close()
else
  for i = 1, #arg do
    -- quiet: the workers' JetStream sinks added CDC relations this script does not declare
    local p = runnel.open{ path = arg[i], notes = false }
    dump(p, declare(runnel, p))
    p:close()
  end
end
table.sort(lines)
io.write(table.concat(lines, "\n"), "\n")
