-- The REPL on a real terminal: tmux runs it, send-keys types, capture-pane
-- reads the screen (line editing, Tab completion, the banner, grids).
local H = require "helper"

local bin = H.runnel_bin
local have_tmux = os.execute("command -v tmux >/dev/null 2>&1")

local session = "runnel_spec_" .. tostring(os.time()) .. tostring(math.random(1000000))

local function tmux(args)
  return H.sh("tmux " .. args)
end

local function screen()
  return (tmux(("capture-pane -p -t %s"):format(session)))
end

-- Waits until the screen shows text (a slow machine is not a failure).
local function wait_for(text)
  for _ = 1, 1200 do -- up to a minute: a loaded machine is slow, not wrong
    local s = screen()
    if s:find(text, 1, true) then return s end
    os.execute("sleep 0.05")
  end
  error("the screen never showed " .. text .. ":\n" .. screen())
end

-- Ends the session and starts cmd in a new one of the same name: the old
-- one must be gone first (a loaded machine takes a while to end it, and
-- new-session refuses a name in use, leaving an empty screen).
local function restart_session(cmd, height)
  tmux("kill-session -t " .. session)
  for _ = 1, 200 do
    local _, _, code = tmux("has-session -t " .. session)
    if code ~= 0 then break end
    os.execute("sleep 0.05")
  end
  local _, err, code = tmux(("new-session -d -s %s -x 160 -y %d %q"):format(session, height, cmd))
  assert(code == 0, "tmux new-session: " .. err)
end

local function type_line(keys)
  tmux(("send-keys -t %s -l %q"):format(session, keys))
  tmux(("send-keys -t %s Enter"):format(session))
end

describe("the REPL in a terminal", function()
  local home
  before_each(function()
    assert.is_truthy(have_tmux, "tmux is needed (make deps installs it)")
    home = H.tmpdir()
    tmux(("new-session -d -s %s -x 160 -y 50 'HOME=%s %s'"):format(session, home, bin))
  end)
  after_each(function()
    tmux("kill-session -t " .. session)
    H.cleanup()
  end)

  it("greets, completes globals, methods and relation names with Tab, and prints grids", function()
    wait_for("`p` is a temporary pipeline; .help for help.")
    type_line('players = p:table("players", { {"id","int"}, {"name","string"}, key = "id" })')
    type_line('players:insert{ id = 1, name = "ann" }')
    wait_for("players · group 1")
    tmux(("send-keys -t %s -l 'playe'"):format(session))
    tmux(("send-keys -t %s Tab"):format(session))
    tmux(("send-keys -t %s -l ':cou'"):format(session))
    tmux(("send-keys -t %s Tab"):format(session))
    tmux(("send-keys -t %s -l '()'"):format(session))
    wait_for("> players:count()")
    tmux(("send-keys -t %s Enter"):format(session))
    local s = wait_for("> players:count()\n1")
    assert.matches("players · group 1", s, 1, true)
    tmux(("send-keys -t %s -l '.schema pl'"):format(session))
    tmux(("send-keys -t %s Tab"):format(session))
    wait_for(".schema players")
    tmux(("send-keys -t %s Enter"):format(session))
    s = wait_for(" name   | string |      |     |")
    type_line("players")
    s = wait_for("(1 row)")
    assert.matches(" row id | id | name", s, 1, true)
    assert.matches("      1 |  1 | ann", s, 1, true)
  end)

  it("shows errors without a traceback, continues multi-line input, and keeps history", function()
    wait_for(".help for help.")
    type_line("for i = 1, 2 do")
    wait_for(">>")
    type_line("  print('line ' .. i)")
    type_line("end")
    wait_for("line 2")
    type_line("error('boom')")
    local s = wait_for("error: stdin:1: boom")
    assert.is_nil(s:find("stack traceback", 1, true))
    tmux(("send-keys -t %s Up"):format(session)) -- history: the last line comes back
    wait_for("> error('boom')")
    tmux(("send-keys -t %s C-u"):format(session))
    type_line(".quit")
    -- Each line reaches the file as it is entered; wait for the content
    -- itself (the file can exist a moment before its lines are written).
    local text = ""
    for _ = 1, 300 do
      local f = io.open(home .. "/.runnel_history")
      if f then
        text = f:read("a")
        f:close()
        if text:find(".quit", 1, true) then break end
      end
      os.execute("sleep 0.05")
    end
    assert.matches("for i = 1, 2 do", text, 1, true)
    assert.matches("error('boom')", text, 1, true)
    assert.matches(".quit", text, 1, true)
  end)

  -- The REPL's own pid and p's directory, written where the spec reads them.
  local function pid_and_path()
    local out = home .. "/where"
    type_line(('io.open(%q, "w"):write(io.open("/proc/self/stat"):read("n"), " ", (p:path())):close()'):format(out))
    for _ = 1, 300 do
      local text = H.read(out)
      if text and text:match("^%d+ %S+$") then
        local pid, path = text:match("^(%d+) (%S+)$")
        return pid, path
      end
      os.execute("sleep 0.05")
    end
    error("the REPL never wrote its pid")
  end

  local function gone(path)
    for _ = 1, 300 do
      if not os.rename(path, path) then return true end
      os.execute("sleep 0.05")
    end
    return false
  end

  it("Ctrl-C clears the line or the pending multi-line input and never exits", function()
    wait_for(".help for help.")
    type_line("x = 41")
    tmux(("send-keys -t %s -l 'x = 999'"):format(session))
    wait_for("> x = 999") -- typed but not yet read, ^C would flush it from the terminal's queue
    tmux(("send-keys -t %s C-c"):format(session))
    wait_for("> x = 999^C")
    type_line("for i = 1, 3 do")
    wait_for(">>")
    tmux(("send-keys -t %s C-c"):format(session))
    wait_for(">> ^C")
    type_line("x + 1")           -- the pending `for` is gone: this is a fresh chunk
    local s = wait_for("\n42\n")
    assert.is_nil(s:find("error", 1, true))
    type_line("while true do end")
    os.execute("sleep 0.3")
    tmux(("send-keys -t %s C-c"):format(session))
    wait_for("error: interrupted!")
    type_line("x * 2")
    wait_for("\n82\n")
  end)

  it("Ctrl-C stops a p:run that waits on its input, its lines committed, and the REPL goes on", function()
    -- p:run reads in C, where the Lua hook Ctrl-C sets never fired: the
    -- run went on until its input ended (never: the FIFO stays open)
    local dir = H.tmpdir()
    os.execute(("mkfifo %s/fifo"):format(dir))
    local lines = {}
    for k = 1, 3 do lines[k] = ('{"rel":"t","op":"insert","row":{"k":%d}}\n'):format(k) end
    H.write(dir .. "/in.ndjson", table.concat(lines))
    os.execute(("sh -c '(cat %s/in.ndjson; exec sleep 20) >%s/fifo & echo $! >%s/writer' >/dev/null 2>&1")
               :format(dir, dir, dir))
    wait_for(".help for help.")
    type_line('t = p:table("t", { {"k","int"}, key = "k" })')
    type_line(('.watch off'))
    type_line(('st = p:run(runnel.ndjson_source(%q), { batch = 2 })'):format(dir .. "/fifo"))
    os.execute("sleep 1")
    tmux(("send-keys -t %s C-c"):format(session))
    local s = wait_for("interrupted after line 3: the lines up to it are applied and committed")
    os.execute(("kill %s 2>/dev/null"):format(H.read(dir .. "/writer"):match("%d+")))
    type_line("t:count(), p:seq()")
    s = wait_for("> t:count(), p:seq()\n3\n2\n")
    assert.is_nil(s:find("interrupted!", 1, true))
  end)

  it("Ctrl-D exits cleanly and removes the temporary state", function()
    wait_for(".help for help.")
    local _, path = pid_and_path()
    assert.truthy(os.rename(path, path), "the temporary state exists while the REPL runs")
    tmux(("send-keys -t %s C-d"):format(session))
    assert.is_true(gone(path), "the temporary state is removed on Ctrl-D")
  end)

  it("SIGTERM and SIGHUP end the REPL and remove the temporary state", function()
    for _, sig in ipairs{ "TERM", "HUP" } do
      wait_for(".help for help.")
      local pid, path = pid_and_path()
      os.execute(("kill -%s %s"):format(sig, pid))
      assert.is_true(gone(path), "the temporary state is removed on SIG" .. sig)
      os.remove(home .. "/where")
      restart_session(("HOME=%s %s"):format(home, bin), 50)
    end
  end)

  it("names stdin's line in an error from an expression's last call", function()
    wait_for(".help for help.")
    type_line('players = p:table("players", { {"id","int"}, {"name","string"}, key = "id" })')
    type_line('players:get("1")')
    wait_for('error: stdin:1: players: column "id": expected int, got string')
    type_line('players:insert{ id = 1, nam = "ann" }')
    wait_for('error: stdin:1: players: unknown column "nam" (did you mean "name"?)')
    type_line("p:close()")
    type_line("players:count()")
    wait_for("error: stdin:1: runnel: players: the pipeline of this relation is closed")
  end)

  it(".load runs a script on p, .watch quiets grids, and a big group's grid is cut", function()
    wait_for(".help for help.")
    H.write(home .. "/decl.lua", 't = p:table("t", { {"id","int"}, key = "id" })\nu = p:table("u", { {"k","int"}, key = "k" })\n')
    type_line(".load " .. home .. "/decl.lua")
    type_line("p:batch(function() for i = 1, 100 do t:insert{ id = i } end end)")
    wait_for("(100 changes, 20 shown)")
    type_line(".watch u")
    type_line("t:insert{ id = 101 }")
    type_line("u:insert{ k = 1 }")
    local s = wait_for("u · group 3")
    assert.is_nil(s:find("t · group 2", 1, true))
  end)

  it("says that an error inside an open group rolled the group back", function()
    wait_for(".help for help.")
    type_line('t = p:table("t", { {"id","int"}, key = "id" })')
    type_line("p:begin()")
    type_line("t:insert{ id = 1 }")
    type_line("t:insert{ id = 2 }")
    type_line('t:insert{ id = "three" }')
    wait_for('error: stdin:1: t: column "id": expected int, got string  (group rolled back: 2 earlier changes discarded)')
    type_line("p:in_group(), t:count()")
    wait_for("false\n0")
  end)
end)

describe("the REPL's banner on a terminal", function()
  after_each(function()
    tmux("kill-session -t " .. session)
    H.cleanup()
  end)

  it("names the state p is, after runnel repl STATE_DIR FILE.lua or a script that returns one", function()
    assert.is_truthy(have_tmux, "tmux is needed (make deps installs it)")
    local dir = H.tmpdir()
    H.write(dir .. "/decl.lua", 'players = p:table("players", { {"id","int"}, key = "id" })\n')
    H.write(dir .. "/own.lua", ('local runnel = require "runnel"\nreturn runnel.open(%q)\n'):format(dir .. "/own"))
    tmux(("new-session -d -s %s -x 160 -y 20 'HOME=%s %s repl %s/st %s/decl.lua'"):format(session, dir, bin, dir, dir))
    local s = wait_for(".help for help.")
    assert.matches(("`p` is the state at %s/st; .help for help."):format(dir), s, 1, true)
    restart_session(("HOME=%s %s repl %s/own.lua"):format(dir, bin, dir), 20)
    s = wait_for(".help for help.")
    assert.matches(("`p` is the state at %s/own; .help for help."):format(dir), s, 1, true)
    type_line(".open " .. dir .. "/st")
    wait_for(("`p` is a read-only view of the state at %s/st"):format(dir))
  end)
end)

describe("runnel run on a terminal", function()
  after_each(function()
    tmux("kill-session -t " .. session)
    H.cleanup()
  end)

  it("replaces the progress line by one summary, and says 1 group", function()
    assert.is_truthy(have_tmux, "tmux is needed (make deps installs it)")
    local dir = H.tmpdir()
    H.write(dir .. "/game.lua", 'local runnel = require "runnel"\nlocal p = runnel.open()\n' ..
      'p:table("players", { {"id","int"}, {"name","string"}, key = "id" })\nreturn p\n')
    H.write(dir .. "/in.ndjson", '{"rel":"players","op":"insert","row":{"id":1,"name":"ann"}}\n')
    tmux(("new-session -d -s %s -x 160 -y 20 '%s %s/game.lua --input %s/in.ndjson; echo finished; sleep 30'")
         :format(session, bin, dir, dir))
    local s = wait_for("finished")
    assert.equal(1, select(2, s:gsub("applied", "")), s)
    assert.matches("in.ndjson: 1 lines, 1 applied, 0 rejected, 1 group\n", s, 1, true)
  end)
end)
