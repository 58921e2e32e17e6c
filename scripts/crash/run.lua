-- run.lua — the crash test's driver: starts writer.lua on a state, sends it
-- SIGKILL after a random short time, checks the state (check.lua), starts
-- it again on the same state, and so on; a fresh state (and seed) every
-- `per_state` kills keeps each check small.
--
--   lua5.4 scripts/crash/run.lua [KILLS]     (make crash N=KILLS)
-- prints "crash: N kills, M failures" and the first failures; exits 1 if
-- any. Environment: CRASH_SINKS=0 leaves the NDJSON and SQLite sinks
-- unchecked (on by default here), CRASH_SEED fixes the seeds, CRASH_KEEP=1
-- keeps the states of failed kills, CRASH_REPAIR=0 leaves a failed NDJSON
-- log and SQLite file as they are for the next runs (later kills then fail
-- too: it shows lines written twice). Needs LUA_PATH/LUA_CPATH (make env).
local here = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
package.path = here .. "../?.lua;" .. package.path
local C = require "crash.check"
local M = require "crash.model"

local R = {}

local function sh(cmd) return os.execute(cmd) end
local function sleep(s) sh(("sleep %.3f"):format(s)) end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function write_file(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- A process is gone when /proc has no entry for it or it is a zombie (its
-- files and LMDB locks are released either way).
local function gone(pid)
  local stat = read_file("/proc/" .. pid .. "/stat")
  return not stat or stat:match("^%d+ %b() (%a)") == "Z"
end

-- Waits about `seconds` at most (each sleep also starts a process) for
-- cond(); returns whether it came true.
local function wait_for(cond, seconds)
  for _ = 1, math.ceil(seconds / 0.01) do
    if cond() then return true end
    sleep(0.01)
  end
  return cond()
end

-- Starts the writer in the background; returns its pid.
local function start_writer(root, seed, mode, carry)
  os.remove(root .. "/pid")
  local lua = os.getenv("CRASH_LUA") or "lua5.4"
  sh(("sh -c 'echo $$ > %s/pid; exec %s %swriter.lua %s %d %s %d 30 2>>%s/writer.err' </dev/null >/dev/null &")
    :format(root, lua, here, root, seed, mode, carry, root))
  assert(wait_for(function() return (read_file(root .. "/pid") or ""):match("%d+\n") end, 5), "writer did not start")
  return read_file(root .. "/pid"):match("%d+")
end

local CARRIES = { 0, 1, 4, 32 }

-- Rewrites the SQLite table as the model has it, marked with the model's
-- seq. If that mark is not the one the state recorded, the sink rewrites
-- the table at its declaration: with the same rows.
local function repair_sqlite(path, model)
  if not io.open(path) then return end
  local sql = { "BEGIN;", "DELETE FROM accounts;" }
  for _, a in pairs(model.accounts) do
    sql[#sql + 1] = ("INSERT INTO accounts VALUES (%d, %d, %d, %d);"):format(a.aid, a.oid, a.balance, a.seq)
  end
  sql[#sql + 1] = ("UPDATE runnel_sinks SET seq = %d WHERE tbl = 'accounts'; COMMIT;"):format(model.seq)
  local script = os.tmpname()
  write_file(script, table.concat(sql, "\n"))
  sh(("sqlite3 -batch '%s' < '%s' >/dev/null 2>&1"):format(path, script))
  os.remove(script)
end

-- One kill: start, wait, SIGKILL, wait until gone, check. Returns the
-- failure record or nil.
local function one_kill(st, opts)
  local mode = math.random(2) == 1 and "sync" or "nosync"
  local carry = CARRIES[math.random(#CARRIES)]
  local pid = start_writer(st.root, st.seed, mode, carry)
  sleep(math.random() * opts.max_sleep)
  sh("kill -9 " .. pid .. " 2>/dev/null")
  local msgs = {}
  if not wait_for(function() return gone(pid) end, 10) then msgs[1] = "writer " .. pid .. " did not die" end
  local err = read_file(st.root .. "/writer.err") or ""
  if err ~= "" then msgs[#msgs + 1] = "writer failed: " .. err:gsub("\n+$", "") end
  write_file(st.root .. "/writer.err", "")
  local seq, failures = C.check(st.root, st.seed, st.model, opts.sinks)
  table.move(failures, 1, #failures, #msgs + 1, msgs)
  if #msgs == 0 then return nil end
  -- Judge the next kill on its own: the acks, the log and the SQLite table
  -- as they should be. repair = false keeps the log and the table, to see
  -- what the next runs make of them.
  write_file(st.root .. "/acks", seq .. "\n")
  if opts.repair ~= false then
    write_file(st.root .. "/accounts.ndjson", #st.model.ndjson > 0 and table.concat(st.model.ndjson, "\n") .. "\n" or "")
    repair_sqlite(st.root .. "/accounts.db", st.model)
  end
  return { root = st.root, seed = st.seed, seq = seq, mode = mode, carry = carry, msgs = msgs }
end

local function new_state(base, i, seed)
  local root = ("%s/s%d"):format(base, i)
  assert(sh(("mkdir -p '%s/state'"):format(root)))
  return { root = root, seed = seed, model = M.new(true) }
end

--- run{ kills, sinks, seed, per_state = 25, max_sleep = 0.4, seconds = 600, keep, repair = true, log = fn }
-- -> { kills, failures = { { root, seed, seq, mode, carry, msgs }… }, seed }
-- Stops early (with fewer kills) when `seconds` have passed.
function R.run(opts)
  opts.per_state = opts.per_state or 25
  opts.max_sleep = opts.max_sleep or 0.4
  local seed = opts.seed or os.time()
  math.randomseed(seed)
  local base = os.tmpname()
  os.remove(base)
  local result, st = { kills = 0, failures = {}, seed = seed }, nil
  local stop = os.time() + (opts.seconds or 600)
  while result.kills < opts.kills and os.time() < stop do
    if result.kills % opts.per_state == 0 then
      if st and not st.failed or st and not opts.keep then sh(("rm -rf '%s'"):format(st.root)) end
      st = new_state(base, result.kills // opts.per_state, seed * 1000 + result.kills // opts.per_state)
    end
    local failure = one_kill(st, opts)
    result.kills = result.kills + 1
    if failure then
      st.failed = true
      result.failures[#result.failures + 1] = failure
    end
    if opts.log then opts.log(result, failure) end
  end
  if not opts.keep then sh(("rm -rf '%s'"):format(base)) end
  return result
end

--- The failure records as text: the first `limit` in full, then a count of
-- each kind (the message up to its second colon, numbers left out).
function R.report(result, limit)
  local out = { ("crash: %d kills, %d failures (seed %d)"):format(result.kills, #result.failures, result.seed) }
  local kinds, order = {}, {}
  for i, f in ipairs(result.failures) do
    if i <= limit then
      local mode = f.mode == "sync" and "sync" or ("nosync, carry %d"):format(f.carry) -- 0: runnel's default
      out[#out + 1] = ("  kill in %s (seed %d, %s): seq %d"):format(f.root, f.seed, mode, f.seq)
      for _, m in ipairs(f.msgs) do out[#out + 1] = "    " .. m end
    end
    for _, m in ipairs(f.msgs) do
      local kind = (m:match("^([^:]*:[^:]*)") or m):gsub("%d+", "#")
      if not kinds[kind] then kinds[kind] = 0; order[#order + 1] = kind end
      kinds[kind] = kinds[kind] + 1
    end
  end
  for _, kind in ipairs(order) do out[#out + 1] = ("  %5d × %s"):format(kinds[kind], kind) end
  return table.concat(out, "\n")
end

if arg and arg[0] and arg[0]:match("crash/run%.lua$") then
  local kills = math.tointeger(tonumber(arg[1] or "1000")) or error("usage: run.lua [KILLS]")
  local result = R.run{
    kills = kills, sinks = os.getenv("CRASH_SINKS") ~= "0", keep = os.getenv("CRASH_KEEP") == "1",
    repair = os.getenv("CRASH_REPAIR") ~= "0",
    seed = math.tointeger(tonumber(os.getenv("CRASH_SEED") or "")), seconds = tonumber(os.getenv("CRASH_SECONDS") or "1800"),
    log = function(r) if r.kills % 50 == 0 and r.kills < kills then io.stderr:write(("crash: %d kills, %d failures\n"):format(r.kills, #r.failures)) end end,
  }
  print(R.report(result, 5))
  os.exit(#result.failures == 0 and result.kills == kills and 0 or 1)
end

return R
