-- The runnel command at its edges (round 17): what `runnel repl` does with
-- an argument that looks like an option (lua/cli.c command).
local H = require "helper"

local bin = H.runnel_bin

describe("runnel repl with an option it does not take", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  for _, args in ipairs{ "--help", "--bogus", "-x", "-- st", "st --traceback" } do
    it(("(runnel repl %s) is refused with exit 2, and no state is made in the working directory"):format(args),
       function()
      local opt = args:match("%-%S*")
      local out, err, code = H.sh(("cd '%s' && %s repl %s"):format(dir, bin, args), "print(p)\n")
      -- before: a state directory named after the option was made in the working directory
      assert.same({ "", ("runnel: repl: unknown option %s (repl takes [STATE_DIR] [FILE.lua]; a path that starts "
                         .. "with - as ./%s; runnel help)\n"):format(opt, opt), 2 }, { out, err, code })
      assert.equal("", (H.sh(("ls -A '%s'"):format(dir))))
    end)
  end

  it("still takes a state directory and a script, and ./-x as a path", function()
    H.write(dir .. "/decl.lua", 't = p:table("t", { {"k","int"}, key = "k" })\n')
    local out, err, code = H.sh(("cd '%s' && %s repl ./-x decl.lua"):format(dir, bin), "t:insert{ k = 1 }\nt:count()\n")
    assert.equal("", err)
    assert.equal(0, code)
    assert.matches("\n1\n", out, 1, true)
    out = H.sh(("%s inspect %s/-x"):format(bin, dir))
    assert.matches("t%s+|%s+table%s+|%s+1", out)
  end)
end)
