-- Durable sinks across real crashes (OUTBOX-n in core/outbox.c): a child
-- lua5.4 applies numbered groups to a table with an NDJSON, an SQLite and a
-- durable Lua sink and is killed with SIGKILL at a random moment; the state
-- is then reopened. Before the reopen the NDJSON log may lag LMDB, never
-- lead it; after it, the log and the SQLite table hold exactly the
-- committed groups (no line ahead, none twice, none torn) and the Lua sink
-- got each at least once. Bounded: 10 kills per mode.
local runnel = require "runnel"
local H = require "helper"

local function read(path) return H.read(path) or "" end
local sql = H.sql

-- Group i inserts k = i and negates k = i - 1: the log of groups 1..n.
local expected_log, expected_rows = H.outbox_log, H.outbox_rows

local CHILD = [[
local runnel = require "runnel"
local p = runnel.open{ path = %q, sync = %s }
local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
t:sink(runnel.ndjson(%q))
t:sink(runnel.sqlite(%q, "t"))
local audit = assert(io.open(%q, "a"))
t:sink{ durable = true, name = "audit", insert = function(_, info) audit:write(info.seq, "\n"); audit:flush() end }
assert(io.open(%q, "w")):close() -- declared: kill me now
local i = p:seq()
while true do
  i = i + 1
  p:batch(function()
    t:insert{ k = i, v = i }
    if i > 1 then t:update{ k = i - 1, v = -(i - 1) } end
  end)
end
]]

local function sh(cmd)
  local out = H.sh(cmd)
  return out
end

-- Starts the child, waits until it has declared everything, lets it run
-- for a random moment, kills it with SIGKILL.
local function run_and_kill(script, ready)
  os.remove(ready)
  local pid = tonumber((sh(("lua5.4 %s >/dev/null 2>&1 & echo $!"):format(script))))
  assert(pid, "the child did not start")
  for _ = 1, 1000 do -- up to 10 s on a busy machine
    local f = io.open(ready)
    if f then f:close(); break end
    os.execute("sleep 0.01")
  end
  os.execute(("sleep %.2f"):format(0.02 + math.random() * 0.3))
  os.execute(("kill -9 %d 2>/dev/null"):format(pid))
  for _ = 1, 500 do -- gone (or a zombie) within 5 s
    local f = io.open(("/proc/%d/stat"):format(pid))
    local st = f and f:read("a") or ""
    if f then f:close() end
    if not st:match("^%d+ %b() [^Z]") then return end
    os.execute("sleep 0.01")
  end
  error("the child survived SIGKILL")
end

-- A scratch directory in memory when the machine has one: a killed process
-- leaves its writes in the page cache either way, and fsync costs nothing.
local function scratch()
  local d = sh("mktemp -d /dev/shm/runnel-durable.XXXXXX 2>/dev/null"):gsub("\n$", "")
  if d == "" then return H.tmpdir(), nil end
  return d, d
end

describe("durable sinks across SIGKILL", function()
  local own
  after_each(function()
    if own then os.execute("rm -rf '" .. own .. "'") end
    own = nil
    H.cleanup()
  end)

  for _, sync in ipairs{ true, false } do
    it(("keep the NDJSON log and the SQLite table equal to the committed groups (sync = %s)"):format(sync), function()
      math.randomseed(os.time())
      local dir
      dir, own = scratch()
      local state, log, db = dir .. "/st", dir .. "/out.ndjson", dir .. "/out.db"
      local script = dir .. "/child.lua"
      local f = assert(io.open(script, "w"))
      local audit = dir .. "/audit"
      local ready = dir .. "/ready"
      f:write(CHILD:format(state, tostring(sync), log, db, audit, ready))
      f:close()
      local last = 0
      for kill = 1, 10 do
        run_and_kill(script, ready)
        local p = runnel.open{ path = state, sync = sync }
        local n = p:seq()
        p:close()
        assert(n >= last, "a committed group was lost")
        -- before the reopen: complete lines only of committed groups, in order, once
        local text = read(log)
        local complete = text:match("^(.*\n)") or ""
        local want = expected_log(n)
        assert(want:sub(1, #complete) == complete,
               ("kill %d: the log is not a prefix of the %d committed groups"):format(kill, n))
        -- the reopen cuts back and delivers what is missing
        p = runnel.open{ path = state, sync = sync }
        local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
        t:sink(runnel.ndjson(log))
        t:sink(runnel.sqlite(db, "t"))
        local a = assert(io.open(audit, "a"))
        t:sink{ durable = true, name = "audit", insert = function(_, info) a:write(info.seq, "\n") end }
        a:close()
        assert.equal(n, p:seq())
        -- the durable Lua sink: every group at least once, none ahead
        local seen, count = {}, 0
        for l in io.lines(audit) do
          local seq = tonumber(l)
          assert(seq and seq <= n, ("kill %d: the audit sink got %s, past the %d committed groups"):format(kill, l, n))
          if not seen[seq] then seen[seq], count = true, count + 1 end
        end
        assert.equal(n, count)
        assert.equal(want, read(log))
        if n > 0 then
          assert.equal(expected_rows(n), sql(db, "select * from t order by k"))
          assert.equal("t|" .. n .. "\n", sql(db, "select tbl, seq from runnel_sinks"))
        end
        p:close()
        last = n
      end
      assert(last > 0, "no group ever committed")
    end)
  end
end)

-- GROUP-6: a group that rolls back among carried groups has them applied
-- again into a new transaction; their counters and seq must be written
-- again too, or a reopen reuses their row ids.
describe("carried groups replayed after a rollback", function()
  after_each(H.cleanup)

  for _, flush in ipairs{ false, true } do
    it(("keep their counters and seq across a reopen (%s)"):format(flush and "flushed at once" or "with a later group"), function()
      local state = H.tmpdir() .. "/st"
      local p = runnel.open{ path = state, sync = false }
      local a = p:table("a", { {"v","string"} })
      local b = p:table("b", { {"k","int"}, key = "k" })
      b:sink(function(_, row) if row.k < 0 then error("no") end end)
      a:insert{ v = "x" }
      a:insert{ v = "y" }
      assert.is_false(pcall(b.insert, b, { k = -1 })) -- rolls back alone: 1 and 2 are replayed
      if not flush then b:insert{ k = 1 } end
      local seq = p:seq()
      p:close()
      p = runnel.open{ path = state, sync = false }
      a = p:table("a", { {"v","string"} })
      assert.equal(seq, p:seq())
      assert.equal(2, a:count())
      a:insert{ v = "z" }
      local rows = {}
      for r, id in a:rows() do rows[#rows + 1] = id .. r.v end
      assert.same({ "1x", "2y", "3z" }, rows)
      p:close()
    end)
  end
end)
