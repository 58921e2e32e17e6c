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

describe("os.exit(code) in runnel run", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  local function run(body)
    local script = dir .. "/exit.lua"
    H.write(script, 'local runnel = require "runnel"\n' .. body)
    local tmp = dir .. "/tmp"
    assert(os.execute("mkdir -p '" .. tmp .. "'"))
    local out, err, code = H.sh(("TMPDIR='%s' timeout 60 %s run '%s'"):format(tmp, H.runnel_bin, script))
    return code, out, err, H.sh(("ls '%s'"):format(tmp))
  end

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
