-- cluster.lua — figures for runnel on JetStream (not part of make test):
--
--   eval "$(make -s env)"; lua5.4 scripts/bench/cluster.lua [BUILD] [CHANGES]
--
-- One nats-server on 127.0.0.1 (data under BUILD/bench-cluster). For 1, 2
-- and 4 workers over 4 partitions, the leaderboard workload end to end:
-- publish (10 changes per message as msgpack arrays, then 1 per message) →
-- workers (sync = false, 100 messages per group) → the board's changes
-- published back (debezium); changes/s counts from the first publish to
-- the last group of the last worker. Then one process's p:run over the same
-- file, the fkjoin workload (players partitioned, teams global) through
-- JetStream, and the time a killed worker takes to resume.
local runnel = require "runnel"
local here = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = here .. "/../cluster/?.lua;" .. package.path
local N = require "nats"
local Hn = require "harness"

local build = arg[1] or "build"
local CHANGES = tonumber(arg[2] or 40000)
local root = build .. "/bench-cluster"
local bins = { runnel = build .. "/runnel", jsctl = build .. "/jsctl" }
local IDLE = 1
local RENAMES = 0.0005 -- a guild rename moves ~1,000 board rows: kept rare here
math.randomseed(os.time())

local function fresh(name)
  local dir = root .. "/" .. name
  os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "'")
  return dir
end

-- Starts the workers, publishes every chunk, waits: changes/s from the
-- first publish to the end of the last worker less its idle wait.
local function end_to_end(h, W, P, per_message, mp, env)
  local parts = {}
  for p = 0, P - 1 do
    local w = p % W + 1
    parts[w] = parts[w] or {}
    parts[w][#parts[w] + 1] = p
  end
  local t0 = runnel.now()
  for w = 1, W do h:start(w, parts[w], { idle = IDLE, batch = 100, out = env and "-" or "board" }) end
  for c = 1, #h.chunks do h:publish(c, per_message, mp) end
  local published = runnel.now() - t0
  assert(h:wait(600), "workers did not finish")
  return runnel.now() - t0 - IDLE, published
end

local function leaderboard(server, W, per_message, mp)
  local dir = fresh(("lb-w%d-m%d"):format(W, per_message))
  local h = Hn.new(bins, server.url, dir)
  h.tag = dir:match("[^/]+$") .. "." -- ids of its own: the server remembers the last run's
  h:ctl("purge", "GAME")
  h:ctl("purge", "BOARD")
  h:generate(4, CHANGES, 7, 1, RENAMES)
  local secs, pub = end_to_end(h, W, 4, per_message, mp)
  local events, twice = h:check_sink()
  local oracle = h:oracle_lines()
  local cluster = h:cluster_lines()
  local equal = #oracle == #cluster
  for i = 1, #oracle do equal = equal and oracle[i] == cluster[i] end
  print(("  %d worker%s, %3d change%s/message: %8.0f changes/s end to end (publishing alone %.0f/s), %d board events, %d twice, equal: %s")
    :format(W, W == 1 and " " or "s", per_message, per_message == 1 and " " or "s", CHANGES / secs, CHANGES / pub,
            events, #twice, equal and "yes" or "no"))
end

local function p_run_rate(dir)
  local declare = dofile(here .. "/../cluster/leaderboard.lua")
  local p = runnel.open{ sync = false }
  declare(runnel, p)
  local t0 = runnel.now()
  local st = p:run(runnel.ndjson_source(dir .. "/all.ndjson"), { batch = 1000, progress = false })
  local secs = runnel.now() - t0
  p:close()
  return st.applied / secs
end

-- fkjoin: players partitioned by id % 4, teams global.
local function fkjoin(server)
  local dir = fresh("fkjoin")
  local h = Hn.new(bins, server.url, dir)
  local teams, players = 1000, 20000
  assert(os.execute(("lua5.4 %s/gen_fkjoin.lua '%s/all.ndjson' %d %d %d 42"):format(here, dir, teams, players, CHANGES)))
  local files = { teams = assert(io.open(dir .. "/teams.ndjson", "w")) }
  for p = 0, 3 do files[p] = assert(io.open(dir .. "/players." .. p .. ".ndjson", "w")) end
  local total = 0
  for line in io.lines(dir .. "/all.ndjson") do
    total = total + 1
    if line:find('"rel":"teams"', 1, true) then files.teams:write(line, "\n")
    else files[tonumber(line:match('"id":(%d+)')) % 4]:write(line, "\n") end
  end
  for _, f in pairs(files) do f:close() end
  h.P = 4
  h.chunks = { { { subject = "teams", file = dir .. "/teams.ndjson" } } }
  for p = 0, 3 do h.chunks[1][#h.chunks[1] + 1] = { subject = "players." .. p, file = dir .. "/players." .. p .. ".ndjson" } end
  h:ctl("add", "FK", "'players.*,teams'")
  local function run(W)
    os.execute(("rm -rf '%s/states'"):format(dir))
    local parts = {}
    for p = 0, 3 do
      local w = p % W + 1
      parts[w] = parts[w] or {}
      parts[w][#parts[w] + 1] = p
    end
    -- the stream holds the input already: workers read it from the start
    local t0 = runnel.now()
    for w = 1, W do
      os.execute(("PIPELINE=%s/../cluster/fkjoin.lua PART_SUBJECT=players GLOBAL_SUBJECT=teams RUNNEL_SYNC=0 %s run %s/../cluster/worker.lua '%s' FK '%s/states' %s %d 100 - >>'%s/worker.log' 2>&1 & echo $! > '%s/worker%d.pid'")
        :format(here, bins.runnel, here, server.url, dir, table.concat(parts[w], ","), IDLE, dir, dir, w))
      local f = io.open(("%s/worker%d.pid"):format(dir, w))
      h.workers[w] = { pid = f:read("n") }
      f:close()
    end
    assert(h:wait(600))
    h.workers = {}
    return total / (runnel.now() - t0 - IDLE)
  end
  h:publish(1, 100, true)
  local oneproc
  do
    local p = runnel.open{ sync = false }
    dofile(here .. "/../cluster/fkjoin.lua")(runnel, p)
    local t0 = runnel.now()
    local st = p:run(runnel.ndjson_source(dir .. "/all.ndjson"), { batch = 1000, progress = false })
    oneproc = st.applied / (runnel.now() - t0)
    p:close()
  end
  print(("  fkjoin (%d teams global, %d players in 4 partitions, %d changes, 100 a message): 1 worker %.0f/s, 2 workers %.0f/s, 4 workers %.0f/s; one process p:run %.0f/s")
    :format(teams, players, total, run(1), run(2), run(4), oneproc))
end

-- A worker killed in the middle resumes: the time from its restart to its
-- first group after the kill, and to catching up.
local function recovery(server)
  local dir = fresh("recovery")
  local h = Hn.new(bins, server.url, dir)
  h.tag = "recovery."
  h:ctl("purge", "GAME")
  h:ctl("purge", "BOARD")
  h:generate(1, CHANGES, 9, 1, RENAMES)
  h:publish(1, 10, true)
  h:start(1, { 0 }, { idle = IDLE, batch = 10 })
  Hn.sleep(1.5)
  h:kill(1)
  local before = (select(2, Hn.sh(("%s inspect '%s/states/p0'"):format(bins.runnel, dir))):match("last group: (%d+)"))
  local log = dir .. "/worker1.log"
  local function applying()
    local f = io.open(log)
    local text = f and f:read("a") or ""
    if f then f:close() end
    local _, n = text:gsub("applying", "")
    return n
  end
  local seen = applying()
  local function resumed() return applying() > seen end
  local t0 = runnel.now()
  h:start(1, { 0 }, { idle = IDLE, batch = 10 })
  local first
  for _ = 1, 3000 do
    if resumed() then first = runnel.now() - t0; break end
    Hn.sleep(0.01)
  end
  assert(h:wait(300))
  local caught = runnel.now() - t0 - IDLE
  print(("  recovery: a worker killed at group %d resumes its first group %.0f ms after its restart (process start, LMDB open, connect, consumers) and catches up in %.2f s")
    :format(tonumber(before) or 0, (first or 0) * 1000, caught))
end

local server, why = N.single(fresh("server"))
if not server then error("nats-server cannot start: " .. tostring(why)) end
local ok, err = pcall(function()
  local h = Hn.new(bins, server.url, root)
  h:create_streams(1)
  print(("runnel on JetStream, %d changes, 4 partitions, 1 nats-server on 127.0.0.1"):format(CHANGES))
  for _, mode in ipairs{ { 10, true }, { 1, false } } do
    for _, W in ipairs{ 1, 2, 4 } do leaderboard(server, W, mode[1], mode[2]) end
  end
  print(("  one process, p:run over the same file (sync = false, groups of 1,000): %.0f changes/s")
    :format(p_run_rate(root .. "/lb-w1-m10")))
  fkjoin(server)
  recovery(server)
end)
server.stop()
if not ok then error(err, 0) end
