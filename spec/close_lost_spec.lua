-- p:close() commits the groups carried with sync = false; when that commit
-- fails (here the file may not grow, as on a full disk) the pipeline is
-- closed all the same and close raises, saying which groups were lost. It
-- was silent: the program believed them stored. An unreachable pipeline's
-- collection says it on stderr.
local helper = require("spec.helper")

describe("closing a pipeline whose carried groups cannot be committed", function()
  local runnel_bin = os.getenv("RUNNEL_BIN")
  local dir, script
  before_each(function()
    dir = helper.tmpdir()
    script = dir .. "/carry.lua"
  end)
  after_each(function() helper.cleanup() end)

  -- Runs body after the state is made (by a run that only declares), its
  -- file then not allowed to grow.
  local function run_limited(body)
    local head = ([[
local runnel = require("runnel")
local p = runnel.open{ path = %q, sync = false, carry = { groups = 1000000, changes = 1000000, seconds = 1e6 } }
local t = p:table("t", { {"id","int"}, key = "id" })
]]):format(dir .. "/st")
    helper.write(script, head .. "p:close()\n")
    local _, err, code = helper.sh(("%s run %s"):format(runnel_bin, script))
    assert.are.equal(0, code, err)
    helper.write(script, head .. body)
    return helper.sh(("trap '' XFSZ; ulimit -f $(( $(stat -c %%s %s/st/data.mdb) / 1024 )); %s run %s")
                     :format(dir, runnel_bin, script))
  end

  it("raises from p:close(), naming the lost groups, and the pipeline is closed", function()
    local out = run_limited([[
for id = 1, 20000 do t:insert{ id = id } end
local ok, msg = pcall(p.close, p)
print(ok, msg)
print(tostring(p))
]])
    assert.matches("false", out, 1, true)
    assert.matches("groups 1 to 20000", out, 1, true)
    assert.matches("could not be committed and are lost; the state holds group 0", out, 1, true)
    assert.matches("runnel.Pipeline (closed)", out, 1, true)
  end)
end)
