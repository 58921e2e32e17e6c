-- harness.lua — what the cluster spec, demo and benchmark share: the
-- workload split into chunks, publishing it (again, idempotently, until the
-- cluster acks all), worker processes started and killed by pid, and the
-- checks: the partitions' tables against one process (the oracle), and
-- the published board events (no id twice, net effect = the board).
local runnel = require "runnel"
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "scripts/cluster"
local declare = dofile(here .. "/leaderboard.lua")
local Hn = { here = here }

local function sh(cmd)
  local f = io.popen(cmd .. " 2>&1")
  local out = f:read("a")
  local ok = f:close()
  return ok, out
end
Hn.sh = sh

function Hn.sleep(s) os.execute(("sleep %.3f"):format(s)) end

--- bins = { runnel = path, jsctl = path }
-- jsctl is test tooling: under a sanitized make asan (LD_PRELOAD) its
-- leak check is off (nats.c 3.4.1 now and then keeps an acked message).
function Hn.new(bins, url, dir)
  return setmetatable({ runnel = bins.runnel, jsctl = "ASAN_OPTIONS=detect_leaks=0 " .. bins.jsctl, url = url, dir = dir, workers = {}, kills = 0 },
                      { __index = Hn })
end

function Hn:ctl(...)
  local ok, out = sh(("%s '%s' %s"):format(self.jsctl, self.url, table.concat({ ... }, " ")))
  if not ok then error("jsctl " .. table.concat({ ... }, " ") .. ": " .. out, 2) end
  return out
end

--- Generates the workload (gen.lua) and splits each subject's file into n chunks.
function Hn:generate(P, changes, seed, chunks, renames)
  self.P = P
  assert(sh(("lua5.4 %s/gen.lua '%s' %d %d %d 40 %s"):format(here, self.dir, P, changes, seed, renames or 0.01)))
  self.chunks = {}
  local subjects = { guilds = self.dir .. "/guilds.ndjson" }
  for p = 0, P - 1 do subjects["results." .. p] = self.dir .. "/results." .. p .. ".ndjson" end
  for subject, path in pairs(subjects) do
    local lines = {}
    for l in io.lines(path) do lines[#lines + 1] = l end
    for c = 1, chunks do
      local file = ("%s/%s.c%d"):format(self.dir, subject, c)
      local f = assert(io.open(file, "w"))
      for i = math.floor((c - 1) * #lines / chunks) + 1, math.floor(c * #lines / chunks) do f:write(lines[i], "\n") end
      f:close()
      self.chunks[c] = self.chunks[c] or {}
      self.chunks[c][#self.chunks[c] + 1] = { subject = subject, file = file }
    end
  end
end

--- Publishes chunk c of every subject, per messages of `lines` changes, each
-- message with its own id (self.tag, subject, chunk, line): a failed publish
-- is simply run again (bounded).
function Hn:publish(c, lines, mp)
  for _, ch in ipairs(self.chunks[c]) do
    local ok, out
    for _ = 1, 40 do -- a leader's election stalls publishers for seconds
      ok, out = sh(("%s '%s' pub %s %s lines=%d id=%s mp=%d"):format(self.jsctl, self.url, ch.subject, ch.file,
                                                                      lines or 5, (self.tag or "") .. ch.subject .. "." .. c, mp and 1 or 0))
      if ok then break end
      Hn.sleep(0.5)
    end
    if not ok then error("publishing " .. ch.file .. ": " .. out) end
  end
end

--- Starts worker w (owning parts, a list of partition numbers) in the background.
function Hn:start(w, parts, opts)
  opts = opts or {}
  local pidfile = ("%s/worker%d.pid"):format(self.dir, w)
  os.remove(pidfile)
  os.execute(("RUNNEL_SYNC=%s %s run %s/worker.lua '%s' GAME '%s/states' %s %s %d %s >>'%s/worker%d.log' 2>&1 & echo $! > '%s'")
    :format(opts.sync and "1" or "0", self.runnel, here, self.url, self.dir, table.concat(parts, ","), opts.idle or 1,
            opts.batch or 20, opts.out or "board", self.dir, w, pidfile))
  local f = io.open(pidfile)
  self.workers[w] = { pid = f:read("n"), parts = parts, opts = opts }
  f:close()
end

--- A process that runs (a zombie does not: no init may reap it soon).
function Hn.running(pid)
  local f = pid and io.open("/proc/" .. pid .. "/stat")
  if not f then return false end
  local stat = f:read("a")
  f:close()
  return stat:match("^%d+ %b() (%a)") ~= "Z"
end

function Hn:alive(w)
  local wk = self.workers[w]
  return wk ~= nil and Hn.running(wk.pid)
end

function Hn:kill(w)
  if not self:alive(w) then return false end
  os.execute(("kill -9 %d 2>/dev/null"):format(self.workers[w].pid))
  for _ = 1, 100 do if not self:alive(w) then break end Hn.sleep(0.02) end
  self.kills = self.kills + 1
  return true
end

--- Waits (at most timeout seconds) for every worker to end by itself.
function Hn:wait(timeout)
  local t0 = runnel.now()
  while runnel.now() - t0 < timeout do
    local any = false
    for w in pairs(self.workers) do any = any or self:alive(w) end
    if not any then return true end
    Hn.sleep(0.1)
  end
  for w in pairs(self.workers) do self:kill(w) end
  return false
end

function Hn:stop_all() for w in pairs(self.workers) do self:kill(w) end end

--- Every partition state's board and scored rows, sorted, one line each.
local function dump_lines(p, rels, lines)
  for row in rels.board:rows() do
    lines[#lines + 1] = ("board|%d|%s|%s|%d|%d|%d"):format(row.guild, row.name, row.player, row.points, row.games, row.best)
  end
  for row in rels.scored:rows() do
    lines[#lines + 1] = ("scored|%d|%s|%d|%d|%s"):format(row.match, row.player, row.guild, row.score, row.name)
  end
end

function Hn:cluster_lines(states)
  local lines = {}
  for p = 0, self.P - 1 do
    -- quiet: a worker's JetStream sink added a CDC relation this does not declare
    local st = runnel.open{ path = (states or (self.dir .. "/states")) .. "/p" .. p, notes = false }
    dump_lines(st, declare(runnel, st), lines)
    st:close()
  end
  table.sort(lines)
  return lines
end

--- The oracle: one process applying all.ndjson with p:run. Returns its lines and its change count.
function Hn:oracle_lines()
  local p = runnel.open{ sync = false }
  local rels = declare(runnel, p)
  local st = p:run(runnel.ndjson_source(self.dir .. "/all.ndjson"), { batch = 500, progress = false })
  local lines = {}
  dump_lines(p, rels, lines)
  p:close()
  table.sort(lines)
  return lines, st.applied
end

--- Board rows of partition p keyed "guild|name|player" -> "points|games|best".
local function board_of(state)
  local st = runnel.open{ path = state, notes = false }
  local rels = declare(runnel, st)
  local rows = {}
  for row in rels.board:rows() do
    rows[("%d|%s|%s"):format(row.guild, row.name, row.player)] = ("%d|%d|%d"):format(row.points, row.games, row.best)
  end
  st:close()
  return rows
end

--- The published board events of every partition: returns events, ids
-- published twice (a list), and partitions whose net effect differs from
-- their board (a list).
function Hn:check_sink(stream)
  local events, twice, differ = 0, {}, {}
  for p = 0, self.P - 1 do
    local seen, net = {}, {}
    for line in self:ctl("dump", stream or "BOARD", "board." .. p):gmatch("[^\n]+") do
      local id, data = line:match("^%d+\t([^\t]*)\t(.*)$")
      events = events + 1
      if seen[id] then twice[#twice + 1] = id end
      seen[id] = true
      local ev = runnel.json_decode(data)
      local function key(r) return ("%d|%s|%s"):format(r.guild, r.name, r.player) end
      if type(ev.before) == "table" then net[key(ev.before)] = nil end
      if type(ev.after) == "table" then net[key(ev.after)] = ("%d|%d|%d"):format(ev.after.points, ev.after.games, ev.after.best) end
    end
    local board = board_of(self.dir .. "/states/p" .. p)
    local same = true
    for k, v in pairs(board) do same = same and net[k] == v end
    for k in pairs(net) do same = same and board[k] ~= nil end
    if not same then differ[#differ + 1] = p end
  end
  return events, twice, differ
end

function Hn:create_streams(replicas, dupe)
  self:ctl("add", "GAME", "'results.*,guilds'", "replicas=" .. (replicas or 1))
  self:ctl("add", "BOARD", "'board.*'", "replicas=" .. (replicas or 1), "dupe=" .. (dupe or 120))
  self:ctl("wait", "GAME", 20)
  self:ctl("wait", "BOARD", 20)
end

--- The name of GAME's stream leader ("n2"), or nil.
function Hn:leader(stream)
  local ok, out = sh(("%s '%s' info %s"):format(self.jsctl, self.url, stream or "GAME"))
  local name = ok and out:match("^%d+ %d+ %d+ (%S+)")
  return name ~= "-" and name or nil
end

return Hn
