-- fkjoin.lua FILE.ndjson [--mapper] [--lua-joiner] [--writemap] [--run] [--state=DIR] — the
-- fkjoin workload (shared/bench/fkjoin.md): maintain players LEFT JOIN teams
-- ON players.team_id = teams.id as (pid, pname, score, tname, region),
-- applying the file's changes in groups of 1,000 with sync = false. The
-- file is read and parsed first; only the applying is timed. The default is
-- declarative (on = "team_id", then select: no Lua per row); --mapper joins
-- through a Lua mapper and joiner (a joiner that copies columns, which
-- runnel does in C); --lua-joiner the same with a joiner that calls a
-- function, so Lua runs it for every result row; --writemap opens the state with
-- writemap = true; --run applies the file with p:run (the scanner parses,
-- C applies: no Lua per change) and times reading and parsing too, so it is
-- not apply-only. --state=DIR keeps the state there (it must not exist), so
-- its file can be measured after the run. Besides the fkjoin.md figures it
-- prints rss_above_input_mb: the process's resident memory after the
-- applying, less what it held once the input was loaded (nothing is loaded
-- for --run).
local runnel = require "runnel"
local common = dofile((arg[0]:match("^(.*)/") or ".") .. "/fkjoin_common.lua")
local path = assert(arg[1], "usage: runnel run scripts/bench/fkjoin.lua FILE.ndjson [--mapper] [--writemap]")
local flags, state_dir = {}, nil
for i = 2, #arg do
  state_dir = arg[i]:match("^%-%-state=(.+)$") or state_dir
  flags[arg[i]] = true
end
local use_mapper = flags["--mapper"] or flags["--lua-joiner"]
local GROUP = 1000

local changes = {}
if not flags["--run"] then
  for line in io.lines(path) do
    local c = assert(runnel.json_decode(line))
    changes[#changes + 1] = c
  end
end

collectgarbage("collect")
local mem_input = common.memory()

local p = runnel.open{ path = state_dir, sync = false, writemap = flags["--writemap"] == true }
local rels = {
  teams = p:table("teams", { {"id","int"}, {"name","string"}, {"region","string"}, key = "id" }),
  players = p:table("players", { {"id","int"}, {"name","string"}, {"team_id","int", null = true},
                                 {"score","int"}, key = "id" }),
}
-- --lua-joiner: the same result through a function call, so the joiner is
-- not a plain copy of columns and runs in Lua for every result row (the
-- joiner above is done in C: lua/runnel/joiner.lua); the helper is
-- <const>, so the joiner cannot keep its rows (lua/runnel/lent.lua) and
-- reuses one Row
local column_of <const> = function(t, col) return t and t[col] end
local function lua_joiner(pl, t)
  return { pid = pl.id, pname = pl.name, score = pl.score, tname = column_of(t, "name"), region = column_of(t, "region") }
end
local result
if use_mapper then
  result = rels.players:join(rels.teams, {
    kind = "left",
    mapper = function(pl) return pl.team_id end,
    joiner = flags["--lua-joiner"] and lua_joiner or function(pl, t)
      return { pid = pl.id, pname = pl.name, score = pl.score, tname = t and t.name, region = t and t.region }
    end,
    columns = { {"pid","int"}, {"pname","string"}, {"score","int"}, {"tname","string", null = true},
                {"region","string", null = true}, key = "pid" },
  })
else
  result = rels.players:join(rels.teams, { on = "team_id", kind = "left" })
                       :select{ {"pid","id"}, {"pname","name"}, "score", {"tname","teams.name"}, "region" }
end

local methods = { insert = "insert", update = "update", delete = "delete", upsert = "upsert" }
local t0 = runnel.now()
if flags["--run"] then
  local st = p:run(runnel.ndjson_source(path), { batch = GROUP, progress = false })
  for _ = 1, st.applied do changes[#changes + 1] = true end
else
  for g = 1, #changes, GROUP do
    p:begin()
    for i = g, math.min(g + GROUP - 1, #changes) do
      local c = changes[i]
      local rel = rels[c.rel]
      rel[methods[c.op]](rel, c.row)
    end
    p:commit()
  end
end
local elapsed = runnel.now() - t0
local mem_after = common.memory()

local e = result:changes()
local rows = {}
result:scan(function(r) rows[#rows + 1] = { r.pid, r.pname, r.score, r.tname, r.region } end)
print(("changes: %d"):format(#changes))
print(("changes_per_s: %d"):format(math.floor(#changes / elapsed)))
print(("events: %d"):format(e.inserts + e.updates + e.deletes))
print(("checksum: %s"):format(common.checksum(rows)))
common.print_memory("", mem_input, mem_after)
p:close()
