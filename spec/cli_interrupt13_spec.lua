-- runnel run stopped by Ctrl-C or SIGTERM while its input runs. Before,
-- p:run applied its input in C where the SIGINT handler's Lua hook never
-- fired: Ctrl-C did nothing until the input ended (never, for a stream on
-- stdin), and SIGTERM killed the process, losing the groups sync = false
-- carried. Now the run stops between two changes (rn_interrupt_runs), its
-- open group committed as at the end of its input, the pipeline closes
-- (carried groups written), and the exit status is 128 + the signal.
local H = require "helper"

-- Runs cmd in the background: a shell that writes its pid to dir/pid and
-- its exit status to dir/status once it ends. (Not pgrep: under make
-- asan, LD_PRELOAD reaches it and it can hang.)
local function start(cmd, dir)
  os.execute(("sh -c '%s & echo $! >%s/pid; wait $!; echo $? >%s/status' >/dev/null 2>&1 </dev/null &")
             :format(cmd, dir, dir))
end

local function wait_for_file(path)
  for _ = 1, 600 do -- up to 30 s: a loaded machine is slow, not wrong
    local f = io.open(path)
    if f then f:close() return end
    os.execute("sleep 0.05")
  end
  error("never appeared: " .. path)
end

-- The pid of the runnel that start ran.
local function runnel_pid(dir)
  wait_for_file(dir .. "/pid")
  return assert(H.read(dir .. "/pid"):match("%d+"), "no pid")
end

-- The exit status the wrapper recorded, waiting up to about 10 s.
local function status_of(path)
  for _ = 1, 200 do
    local f = io.open(path)
    local code = f and f:read("n")
    if f then f:close() end
    if code then return code end
    os.execute("sleep 0.05")
  end
  return nil
end

-- A script that declares players with a filter noting when it sees the
-- id `mark` (marker file), then slowing down (so the run is still going
-- when the signal comes).
local function script(dir, mark)
  return ([[
    local runnel = require "runnel"
    local p = runnel.open{ path = %q, sync = false }
    local t = p:table("players", { {"id","int"}, {"name","string"}, key = "id" })
    t:filter(function(r)
      if r.id == %d then io.open(%q, "w"):close() end
      if r.id > %d then os.execute("sleep 0.01") end
      return true
    end, "seen")
    return p
  ]]):format(dir .. "/st", mark, dir .. "/marker", mark)
end

local function line(id)
  return ('{"rel":"players","op":"insert","row":{"id":%d,"name":"n%d"}}\n'):format(id, id)
end

local function rows(dir)
  local out = H.sh(("%s query %s/st players --limit 1000000 --format ndjson"):format(H.runnel_bin, dir))
  local n = 0
  for _ in out:gmatch("\n") do n = n + 1 end
  return n
end

describe("runnel run interrupted", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  it("by Ctrl-C while it waits on stdin stops at once, commits the lines read and exits 130", function()
    H.write(dir .. "/s.lua", script(dir, 3))
    H.write(dir .. "/in.ndjson", line(1) .. line(2) .. line(3))
    -- stdin stays open 20 s after its 3 lines (a FIFO): the run blocks reading it
    os.execute(("mkfifo %s/fifo"):format(dir))
    os.execute(("sh -c '(cat %s/in.ndjson; exec sleep 20) >%s/fifo & echo $! >%s/writer' >/dev/null 2>&1")
               :format(dir, dir, dir))
    start(("%s run %s/s.lua --batch 2 --input - <%s/fifo >%s/out 2>%s/err"):format(H.runnel_bin, dir, dir, dir, dir),
          dir)
    wait_for_file(dir .. "/marker")
    os.execute("sleep 0.2") -- line 3 applied, the run back in its read
    os.execute("kill -INT " .. runnel_pid(dir))
    local code = status_of(dir .. "/status")
    os.execute(("kill %s 2>/dev/null"):format(H.read(dir .. "/writer"):match("%d+")))
    assert.equal(130, code)
    assert.equal("runnel: stdin: interrupted after line 3: the lines up to it are applied and committed\n",
                 H.read(dir .. "/err"))
    assert.equal(3, rows(dir)) -- group 2 (line 3 alone) committed and, carried, written at close
    assert.matches("last group: 2\n", (H.sh(("%s inspect %s/st"):format(H.runnel_bin, dir))), 1, true)
  end)

  it("commits and writes what it read when its input pauses, before waiting for more", function()
    -- before, the lines waited in the open group for the group's 1000th
    -- line, and carried groups for the next commit: a reader saw nothing
    H.write(dir .. "/s.lua", script(dir, 3))
    H.write(dir .. "/in.ndjson", line(1) .. line(2) .. line(3))
    os.execute(("mkfifo %s/fifo"):format(dir))
    os.execute(("sh -c '(cat %s/in.ndjson; exec sleep 20) >%s/fifo & echo $! >%s/writer' >/dev/null 2>&1")
               :format(dir, dir, dir))
    start(("%s run %s/s.lua --input - <%s/fifo >%s/out 2>%s/err"):format(H.runnel_bin, dir, dir, dir, dir), dir)
    wait_for_file(dir .. "/marker")
    local seen = 0
    for _ = 1, 200 do -- up to 10 s
      seen = rows(dir)
      if seen == 3 then break end
      os.execute("sleep 0.05")
    end
    os.execute("kill -INT " .. runnel_pid(dir))
    local code = status_of(dir .. "/status")
    os.execute(("kill %s 2>/dev/null"):format(H.read(dir .. "/writer"):match("%d+")))
    assert.equal(3, seen)
    assert.equal(130, code)
  end)

  it("by SIGTERM while it reads a file stops between two lines, writes what it carried and exits 143", function()
    H.write(dir .. "/s.lua", script(dir, 500))
    local lines = {}
    for id = 1, 3000 do lines[id] = line(id) end
    H.write(dir .. "/in.ndjson", table.concat(lines))
    start(("%s run %s/s.lua --batch 100 --input %s/in.ndjson >%s/out 2>%s/err"):format(H.runnel_bin, dir, dir, dir,
                                                                                        dir), dir)
    wait_for_file(dir .. "/marker")
    os.execute("kill -TERM " .. runnel_pid(dir))
    assert.equal(143, status_of(dir .. "/status"))
    local err = H.read(dir .. "/err")
    local n = tonumber(err:match("^runnel: [^:]+: interrupted after line (%d+): the lines up to it are applied and "
                                 .. "committed\n$"))
    assert.is_truthy(n, err)
    assert.is_true(n >= 500 and n < 3000)
    assert.equal(n, rows(dir)) -- every line read is in the state: none carried was lost
  end)
end)
