-- Reading a state the user may not write (another user's, a service's):
-- LMDB's readers write the state's lock.mdb (their table of readers), so
-- runnel query, inspect, verify and attach fail there. They said only
-- "DIR: Permission denied", which reads as if the state could not be read;
-- they now say what needs writing (core/envs.c open_env).
-- The write permission is taken away; as root the command also runs
-- without the capabilities that pass over permissions (setpriv), as root
-- still: nobody might not reach a checkout under /root.
local runnel = require "runnel"
local H = require "helper"

local function as_other(cmd)
  local root = H.sh("id -u") == "0\n"
  if root then return "setpriv --bounding-set=-dac_override,-dac_read_search,-fowner " .. cmd end
  return cmd
end

describe("reading a state whose lock.mdb the user may not write", function()
  local dir
  before_each(function()
    dir = H.tmpdir() .. "/st"
    local p = runnel.open{ path = dir, notes = false }
    p:table("t", { {"id","int"}, key = "id" }):insert{ id = 1 }
    p:close()
    os.execute(("chmod 755 '%s' && chmod 755 '%s' && chmod 644 '%s'/* && chmod 555 '%s' && chmod 444 '%s/lock.mdb'")
               :format(dir:match("^(.*)/st$"), dir, dir, dir, dir))
  end)
  after_each(function()
    os.execute(("chmod -R u+w '%s'"):format(dir))
    H.cleanup()
  end)

  it("says that a reader writes lock.mdb, in query, inspect, verify and attach", function()
    local why = ("%s: permission denied: a reader of a state writes its lock.mdb (LMDB's table of readers): "
                 .. "reading needs write access to %s/lock.mdb"):format(dir, dir)
    local out, err, code = H.sh(as_other(("%s query %s t"):format(H.runnel_bin, dir)))
    -- before: "runnel: attach …/st: Permission denied"
    assert.same({ "", "runnel: attach " .. why .. "\n", 1 }, { out, err, code })
    out, err, code = H.sh(as_other(("%s inspect %s"):format(H.runnel_bin, dir)))
    assert.same({ "", "runnel: " .. why .. "\n", 1 }, { out, err, code })
    out, err, code = H.sh(as_other(("%s verify %s"):format(H.runnel_bin, dir)))
    assert.same({ "runnel: " .. why .. "\n", "", 1 }, { out, err, code })
  end)
end)
