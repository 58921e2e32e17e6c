-- runnel inspect, query and snapshot of a state whose pages are damaged:
-- LMDB keeps no checksums, and a damaged page can send it past the end of
-- the mapped file (SIGBUS). Each command reads in a child process, as
-- runnel verify walks: a crash is said, naming the state, with exit 1,
-- never runnel dying of a signal without a word (0.40 did, exit 135), and
-- a snapshot whose reading crashed leaves nothing behind. runnel run and
-- the REPL read in their own process: killed by SIGBUS, they say why.
local H = require "helper"
local runnel = require "runnel"

local R = H.runnel_bin

local function make_state(dir)
  local p = runnel.open(dir)
  local t = p:table("players", { {"id","int"}, {"name","string"}, key = "id" })
  p:stream("ev", { {"x","int"} })
  p:begin()
  for i = 1, 200 do t:insert{ id = i, name = "n" .. i } end
  p:commit()
  t:aggregate{ by = {}, n = runnel.count() }
  p:close()
end

-- A copy of the state at src in dst with 8 bytes at offset at inverted.
local function damaged_copy(src, dst, at)
  os.execute(("rm -rf '%s' && mkdir -p '%s'"):format(dst, dst))
  local data = H.read(src .. "/data.mdb")
  local flipped = data:sub(at + 1, at + 8):gsub(".", function(c) return string.char(~c:byte() & 0xFF) end)
  H.write(dst .. "/data.mdb", data:sub(1, at) .. flipped .. data:sub(at + 9))
end

local function listing(dir)
  return (H.sh(("ls -A '%s' 2>/dev/null"):format(dir)))
end

describe("runnel inspect, query and snapshot of a state with a damaged page", function()
  after_each(H.cleanup)

  it("exit 0 or say what they could not read, exit 1; a crash is named, never a signal", function()
    local dir = H.tmpdir()
    make_state(dir .. "/st")
    local pages = H.size_of(dir .. "/st/data.mdb") // 4096
    assert.is_true(pages > 4)
    local crashes = {}
    for page = 2, pages - 1 do
      for _, off in ipairs{ 16 } do -- its first node pointers
        local st = dir .. "/bad"
        damaged_copy(dir .. "/st", st, page * 4096 + off)
        for _, cmd in ipairs{ "inspect " .. st, "query " .. st .. " players 5", "snapshot " .. st .. " " .. dir .. "/snap" } do
          os.execute(("rm -rf '%s/snap'"):format(dir))
          local _, err, code = H.sh(("%s %s"):format(R, cmd))
          local what = ("runnel %s (page %d + %d)"):format(cmd, page, off)
          assert.is_true(code == 0 or code == 1, what .. ": exit " .. tostring(code) .. " " .. err)
          if code == 1 then assert.is_truthy(err:find(st, 1, true), what .. ": " .. err) end
          if err:find("crashed", 1, true) then
            assert.is_truthy(err:find(": reading " .. st .. " crashed (", 1, true), err)
            assert.is_truthy(err:find("the state is damaged (runnel verify " .. st .. " says where)", 1, true), err)
            crashes[cmd:match("^%a+")] = true
          end
          if cmd:match("^snapshot") then -- a whole copy, or nothing: no data.mdb.copy-PID-N, no directory
            local left = listing(dir .. "/snap")
            assert.is_true(left == "" or left == "data.mdb\n", what .. " left " .. left)
            if code == 1 then assert.are.equal("", left) end
          end
        end
      end
    end
    -- the damage this state takes does crash LMDB's reads: the test saw it said
    assert.is_true(crashes.inspect and crashes.query and crashes.snapshot or false)
  end)

  it("a snapshot crashed into a directory that existed keeps the directory, empty", function()
    local dir = H.tmpdir()
    make_state(dir .. "/st")
    local pages = H.size_of(dir .. "/st/data.mdb") // 4096
    local found = false
    for page = 2, pages - 1 do
      damaged_copy(dir .. "/st", dir .. "/bad", page * 4096 + 16)
      os.execute(("rm -rf '%s/snap' && mkdir '%s/snap'"):format(dir, dir))
      local _, err, code = H.sh(("%s snapshot %s/bad %s/snap"):format(R, dir, dir))
      if err:find("crashed", 1, true) then
        found = true
        assert.are.equal(1, code)
        assert.are.equal("", listing(dir .. "/snap"))
        assert.is_true(os.rename(dir .. "/snap", dir .. "/snap2") or false) -- still there
        break
      end
    end
    assert.is_true(found)
  end)

  it("runnel run that dies of SIGBUS reading one says why on stderr first", function()
    local dir = H.tmpdir()
    make_state(dir .. "/st")
    H.write(dir .. "/count.lua", 'local p = require("runnel").open(arg[1])\n'
      .. 'print(p:table("players", { {"id","int"}, {"name","string"}, key = "id" }):count())\np:close()\n')
    local pages = H.size_of(dir .. "/st/data.mdb") // 4096
    local crashed = false
    for page = 2, pages - 1 do
      damaged_copy(dir .. "/st", dir .. "/bad", page * 4096 + 16)
      local _, err, code = H.sh(("%s run %s/count.lua %s/bad"):format(R, dir, dir))
      if code ~= 0 and code ~= 1 then
        assert.is_true(code == 135 or code == 7, "exit " .. tostring(code)) -- killed by SIGBUS (the shell's 128 + 7)
        assert.are.equal(1, err:find("runnel: Bus error: a state's data.mdb, mapped by this process, could not back a "
          .. "page: the state is damaged (runnel verify STATE_DIR says where), or, opened with writemap = true, its "
          .. "disk is full\n", 1, true), err) -- the shell's "Bus error" after it
        crashed = true
      end
    end
    assert.is_true(crashed)
  end)

  it("leave a whole state's output as it was", function()
    local dir = H.tmpdir()
    make_state(dir .. "/st")
    local out, err, code = H.sh(("%s query %s/st players 5"):format(R, dir))
    assert.are.same({ " id | name\n----+------\n  5 | n5\n(1 row)\n", "", 0 }, { out, err, code })
    out, err, code = H.sh(("%s inspect %s/st"):format(R, dir))
    assert.are.equal(0, code)
    assert.are.equal("", err)
    assert.is_truthy(out:find(" players           | table     |  200 |     201 | id int key, name string\n", 1, true))
    out, err, code = H.sh(("%s snapshot %s/st %s/copy"):format(R, dir, dir))
    assert.are.same({ "", "", 0 }, { out, err, code })
    assert.are.equal("data.mdb\n", listing(dir .. "/copy"))
  end)
end)

describe("runnel query and snapshot, which read in a child", function()
  after_each(H.cleanup)

  -- SIGTERM to runnel's pid ends the child's work too (before the reading
  -- moved into a child, the one process ended): an orphan must not go on
  -- to finish and name a snapshot the user stopped.
  it("stop reading when runnel itself is killed", function()
    local dir = H.tmpdir()
    local p = runnel.open(dir .. "/st")
    local t = p:table("t", { {"id","int"}, {"v","string"}, key = "id" })
    p:begin()
    for i = 1, 20000 do t:insert{ id = i, v = ("x"):rep(40) } end
    p:commit()
    p:close()
    -- the query's output fills a FIFO nobody reads: its child blocks writing it
    H.write(dir .. "/kill.sh", ([[
      mkfifo "$1/out"
      (exec 3<>"$1/out"; exec sleep 20) & hold=$! # hold is the sleep itself: a kill of it leaves nothing behind
      "$2" query "$1/st" t > "$1/out" & runnel=$!
      child=
      for i in $(seq 100); do
        # not ps: under make asan it inherits LD_PRELOAD=libasan and hung in a futex
        child=$(cat /proc/$runnel/task/$runnel/children 2>/dev/null); child=${child%% *}
        [ -n "$child" ] && break
        sleep 0.05
      done
      [ -n "$child" ] || { echo "no child"; kill $hold; exit 0; }
      kill -TERM $runnel
      for i in $(seq 100); do
        state=$(awk '/^State:/ { print $2 }' /proc/$child/status 2>/dev/null)
        { [ -z "$state" ] || [ "$state" = Z ]; } && { echo gone; kill $hold; exit 0; }
        sleep 0.05
      done
      echo "still reading"
      kill -KILL $child $hold
    ]]):gsub("\n      ", "\n"))
    local out, err = H.sh(("timeout 60 sh '%s/kill.sh' '%s' '%s'"):format(dir, dir, R))
    assert.are.equal("gone\n", out, err)
  end)
end)
