-- os.exit(code) in a script `runnel run` runs. Lua's os.exit ends the
-- process without closing the Lua state unless its second argument is
-- true, so the pipelines the script left open were never closed: with
-- sync = false the groups committed to the script but carried in LMDB's
-- open transaction were lost (p:seq() had said 3; the state held 0) and
-- a durable sink never got them, and a temporary state's directory stayed
-- behind. The REPL's os.exit already closed its pipelines first; runnel
-- run now closes the Lua state, as at the script's end, unless told not to
-- (os.exit(code, false)).
local H = require "helper"
local runnel = require "runnel"

local dir

-- Runs body (after runnel's require) with `runnel run`, TMPDIR a fresh
-- directory: its exit code, stdout, stderr and what TMPDIR then holds.
-- in_callback: body exits inside a callback, with the pipeline open under
-- the core's frames; what they held is unreachable at exit and
-- LeakSanitizer (make asan) would count it, as exit_spec says.
local function run(body, in_callback)
  local script = dir .. "/exit.lua"
  H.write(script, 'local runnel = require "runnel"\n' .. body)
  local tmp = dir .. "/tmp"
  assert(os.execute("mkdir -p '" .. tmp .. "'"))
  local out, err, code = H.sh(("%sTMPDIR='%s' timeout 60 %s run '%s'")
    :format(in_callback and "ASAN_OPTIONS=detect_leaks=0 " or "", tmp, H.runnel_bin, script))
  return code, out, err, H.sh(("ls '%s'"):format(tmp))
end

describe("os.exit(code) in runnel run", function()
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  it("keeps the carried groups the script committed, and its durable sink gets them", function()
    local code, out, err = run(([[
      local p = runnel.open{ path = %q, sync = false, carry = { groups = 1000, seconds = 3600 } }
      local t = p:table("t", { {"id","int"}, key = "id" })
      t:sink(runnel.ndjson(%q))
      for id = 1, 3 do t:insert{ id = id } end
      print(p:seq())
      os.exit(3)
    ]]):format(dir .. "/st", dir .. "/out.ndjson"))
    assert.equal(3, code, err)
    assert.equal("3\n", out)
    assert.equal("", err)
    local p = runnel.open(dir .. "/st")
    local t = p:table("t", { {"id","int"}, key = "id" })
    assert.equal(3, p:seq())
    assert.equal(3, t:count())
    p:close()
    assert.equal('{"verb":"INSERT","id":1}\n{"verb":"INSERT","id":2}\n{"verb":"INSERT","id":3}\n',
                 H.read(dir .. "/out.ndjson"))
  end)

  it("removes a temporary state", function()
    local code, _, err, left = run('runnel.open():table("t", { {"k","int"}, key = "k" }):insert{ k = 1 }\nos.exit(0)\n')
    assert.equal(0, code, err)
    assert.equal("", left)
  end)

  it("keeps Lua's meaning of os.exit(code, false) and of a boolean code", function()
    local code, _, err, left = run('runnel.open():table("t", { {"k","int"}, key = "k" }):insert{ k = 1 }\n'
                                   .. 'os.exit(false, false)\n')
    assert.equal(1, code, err)
    assert.matches("^runnel%-", left)
  end)
end)

-- os.exit in `runnel run` (run_exit_edges30A): runnel wraps it so that it
-- closes the Lua state. The wrapper was a Lua chunk, so Lua's own argument
-- errors named the chunk, not the script: os.exit(1.5) said
-- '[string "local exit = os.exit..."]:2: bad argument #1 to 'exit'' where
-- it said 'exit.lua:2: …' before.
describe("os.exit in runnel run (edges30RA)", function()
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  it("names the script's line for a code that is no integer", function()
    local code, _, err = run("os.exit(1.5)\n")
    assert.equal(1, code)
    assert.matches("exit%.lua:2: bad argument #1 to 'exit' %(number has no integer representation%)", err)
    assert.not_matches("string", err)
    code, _, err = run("local t = {}\nos.exit(t)\n")
    assert.equal(1, code)
    assert.matches("exit%.lua:3: bad argument #1 to 'exit' %(number expected, got table%)", err)
  end)

  it("still closes the state for a code given as a float with an integer value, or none", function()
    local code, _, err = run(("local p = runnel.open{ path = %q, sync = false }\n"
                              .. "p:table('t', { {'id','int'}, key = 'id' }):insert{ id = 1 }\nos.exit(2.0)\n")
                             :format(dir .. "/st"))
    assert.equal(2, code, err)
    assert.equal("", err)
    code, _, err = run(("local p = runnel.open{ path = %q, sync = false }\n"
                        .. "p:table('t', { {'id','int'}, key = 'id' }):insert{ id = 2 }\nos.exit()\n")
                       :format(dir .. "/st"))
    assert.equal(0, code, err)
    local out = H.sh(("%s query '%s' t"):format(H.runnel_bin, dir .. "/st"))
    assert.matches("1\n +2\n", out)
  end)
end)

-- os.exit(code) inside a callback closes the Lua state under the core's
-- frames: the pipeline cannot be closed there (lpipeline.c l_gc), so the
-- groups sync = false carried, which p:seq() had counted, are lost. They
-- were lost with no word (exit code 7, empty stderr) though l_gc says
-- groups a close could not commit on stderr.
describe("os.exit in a callback under runnel run (edges30RA)", function()
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  it("says the carried groups it loses", function()
    local code, _, err = run(([[
      local p = runnel.open{ path = %q, sync = false, carry = { groups = 1000, seconds = 3600 } }
      local t = p:table("t", { {"id","int"}, key = "id" })
      t:sink(function(verb, row) if row.id == 3 then os.exit(7) end end)
      for id = 1, 3 do t:insert{ id = id } end
    ]]):format(dir .. "/st"), true)
    assert.equal(7, code, err)
    assert.matches("groups 1 to 2, carried in LMDB's open transaction %(sync = false%), are lost", err)
    assert.matches("inside a callback", err)
    local out = H.sh(("%s query '%s' t"):format(H.runnel_bin, dir .. "/st"))
    assert.matches("%(0 rows%)", out)
  end)
end)
