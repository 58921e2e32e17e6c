-- One writer per state, readers in any number (DESIGN §13, issue 11 defects 2 and 3).
local H = require "helper"

local bin = H.runnel_bin

local write, slurp = H.write, H.read

local function wait_for(path)
  for _ = 1, 600 do -- up to a minute: a slow machine, not a timing assertion
    if slurp(path) then return true end
    os.execute("sleep 0.02")
  end
  return false
end

-- Starts `lua5.4 script args…` in the background; returns its pid (the
-- shell execs lua5.4, so $$ is the interpreter's).
local function spawn(script, ...)
  local dir = H.tmpdir()
  local args = table.concat({ ... }, " ")
  os.execute(("sh -c 'echo $$ >%s/pid.tmp && mv %s/pid.tmp %s/pid; exec lua5.4 %s %s' >/dev/null 2>%s/stderr &"):format(dir, dir, dir, script, args, dir))
  assert.is_true(wait_for(dir .. "/pid"))
  return tonumber(slurp(dir .. "/pid"))
end

-- Waits until pid has exited (a zombie counts: its files, locks included,
-- are closed; this container's init reaps late).
local function wait_exit(pid)
  os.execute(("while [ -e /proc/%d ] && [ \"$(cut -d' ' -f3 /proc/%d/stat 2>/dev/null)\" != Z ]; do sleep 0.01; done")
             :format(pid, pid))
end

local function kill9(pid)
  os.execute(("kill -9 %d 2>/dev/null"):format(pid))
  wait_exit(pid)
end

-- A writer that inserts n rows into table t (kept in the store "s"), reads
-- them back, says "ready" and waits until the file stop exists (or forever
-- when stop is "-" and stdin a FIFO: killed, never closed).
local HOLDER = [[
local runnel = require "runnel"
local state, ready, stop, n = arg[1], arg[2], arg[3], tonumber(arg[4])
local p
local ok, err = pcall(function()
  p = runnel.open(state)
  local t = p:table("t", { {"k","int"}, key = "k" })
  t:sink(runnel.store("s"))
  local base = t:count()
  for i = 1, n do t:insert{ k = base + i } end
  assert(t:count() == base + n and t:get{ k = base + 1 })
end)
local f = io.open(ready, "w")
f:write(ok and "" or tostring(err)) -- "" says ready
f:close()
if not ok then return end
-- stop "-": block on stdin (a FIFO nobody writes) rather than fork sleeps,
-- whose children share the lock for the instant before their exec
-- (bounded: a failed spec that never says stop leaves no process behind)
local deadline = os.time() + 120
if stop == "-" then io.read("a") else while not io.open(stop) and os.time() < deadline do os.execute("sleep 0.05") end end
p:close()
]]

-- Tries to open the state; prints "ok <count>" or the error.
local SECOND = [[
local runnel = require "runnel"
local ok, p = pcall(runnel.open, arg[1])
if not ok then io.write(p) return end
local t = p:table("t", { {"k","int"}, key = "k" })
io.write("ok ", t:count())
p:close()
]]

-- Reads the store "s" with runnel.attach; prints its row count.
local READER = [[
local runnel = require "runnel"
local a = runnel.attach(arg[1], "s")
local n = 0
for _ in a:rows() do n = n + 1 end
io.write(n, " ", a:get(1).k)
a:close()
]]

describe("one writer per state", function()
  after_each(H.cleanup)

  local dir, scripts
  before_each(function()
    dir = H.tmpdir()
    scripts = {}
    for name, text in pairs{ holder = HOLDER, second = SECOND, reader = READER } do
      scripts[name] = dir .. "/" .. name .. ".lua"
      write(scripts[name], text)
    end
  end)

  it("refuses a second writer in another process, naming the first, while readers keep reading", function()
    local state = dir .. "/st"
    local pid = spawn(scripts.holder, state, dir .. "/ready", dir .. "/stop", 300)
    finally(function() kill9(pid) end)
    assert.is_true(wait_for(dir .. "/ready"))
    local out, err, code = H.sh(("lua5.4 %s %s"):format(scripts.second, state))
    assert.equal(("state %s is open for writing by process %d"):format(state, pid), out)
    out = H.sh(("lua5.4 %s %s"):format(scripts.reader, state))
    assert.equal("300 1", out)
    out, err, code = H.sh(("%s inspect %s"):format(bin, state))
    assert.equal("", err)
    assert.equal(0, code)
    assert.matches("last group: 300\n", out, 1, true)
    -- runnel run takes the same lock
    out, err, code = H.sh(("%s run %s %s"):format(bin, scripts.second, state))
    assert.equal(("state %s is open for writing by process %d"):format(state, pid), out)
    write(dir .. "/stop", "")
    wait_exit(pid)
    assert.equal("ok 300", (H.sh(("lua5.4 %s %s"):format(scripts.second, state))))
  end)

  it("lets the next writer open once the first was killed with SIGKILL", function()
    local state = dir .. "/st"
    assert(os.execute(("mkfifo %s/fifo"):format(dir)))
    local pid = spawn(scripts.holder, state, dir .. "/ready", "-", 50, "0<>" .. dir .. "/fifo")
    assert.is_true(wait_for(dir .. "/ready"))
    kill9(pid)
    assert.equal("ok 50", (H.sh(("lua5.4 %s %s"):format(scripts.second, state))))
  end)

  it("refuses the same state opened twice in one process, and frees it at close", function()
    local runnel = require "runnel"
    local state = dir .. "/st"
    local p = runnel.open(state)
    assert.equal(("state %s is already open for writing in this process (close it first; runnel.attach reads it)")
                 :format(state), H.error_of(runnel.open, state))
    p:close()
    local q = runnel.open(state)
    q:close()
  end)

  it("never lets stale reader slots of killed writers lock out the next one", function()
    local state = dir .. "/st"
    local pid = spawn(scripts.holder, state, dir .. "/ready0", dir .. "/stop", 1)
    assert.is_true(wait_for(dir .. "/ready0"))
    write(dir .. "/stop", "")
    wait_exit(pid)
    -- a reader holds the state open (and LMDB's reader table with it) throughout
    write(dir .. "/hold.lua", [[
local runnel = require "runnel"
local a = runnel.attach(arg[1], "s")
io.open(arg[2], "w"):close()
local deadline = os.time() + 120 -- bounded, as the writers are
while not io.open(arg[3]) and os.time() < deadline do assert(a:get(1)) os.execute("sleep 0.05") end
a:close()
]])
    local reader = spawn(dir .. "/hold.lua", state, dir .. "/reading", dir .. "/stop_reader")
    finally(function() kill9(reader) end)
    assert.is_true(wait_for(dir .. "/reading"))
    os.remove(dir .. "/stop")
    -- LMDB has 126 reader slots and each killed writer leaks one: 130 kills
    -- fill them unless each new writer reclaims the dead ones. The shell is
    -- the writers' parent, so `wait` reaps them at once; bounded by timeout.
    write(dir .. "/kills.sh", [[
d=$1
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; exit 1' TERM INT
mkfifo "$d/fifo"
exec 3<>"$d/fifo"
i=0
while [ $i -lt 130 ]; do
  i=$((i + 1))
  lua5.4 "$d/holder.lua" "$d/st" "$d/ready$i" - 1 <&3 2>"$d/err" & pid=$!
  while [ ! -e "$d/ready$i" ] && kill -0 $pid 2>/dev/null; do sleep 0.01; done
  kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
  if [ ! -e "$d/ready$i" ] || [ -s "$d/ready$i" ]; then
    echo "writer $i could not open: $(cat "$d/ready$i" "$d/err" 2>/dev/null)"; exit 1
  fi
done
echo "$i kills"
]])
    local out, err = H.sh(("timeout 120 sh %s/kills.sh %s"):format(dir, dir))
    assert.equal("130 kills\n", out, err)
    assert.equal("ok 131", (H.sh(("lua5.4 %s %s"):format(scripts.second, state))))
    write(dir .. "/stop_reader", "")
    wait_exit(reader)
  end)
end)
