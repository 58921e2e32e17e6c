-- runnel snapshot's destination (round 22).
local runnel = require "runnel"
local H = require "helper"

local bin = H.runnel_bin

describe("runnel snapshot into the state's own directory", function()
  after_each(H.cleanup)

  -- Regression: runnel snapshot st st/copy made the copy inside the state
  -- it copies, where rm -rf st, mv st or a restore of the copy over st
  -- takes the copy with it.
  it("is refused, however the path names it, and leaves no directory made", function()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir .. "/st", notes = false }
    p:table("t", { {"k","int"}, key = "k" }):insert{ k = 1 }
    p:close()
    assert.equal(0, select(3, H.sh(("ln -s '%s/st' '%s/link'"):format(dir, dir))))
    for _, dest in ipairs{ "st/copy", "st/../st/copy", "link/copy" } do
      local out, err, code = H.sh(("cd '%s' && %s snapshot st %s"):format(dir, bin, dest))
      assert.equal(1, code, out)
      assert.equal(("runnel: snapshot: %s: is inside the state st it would copy: the copy would go with the state "
                    .. "(rm, mv, a restore over it); a snapshot goes to a directory outside the state\n"):format(dest), err)
    end
    local out = H.sh(("ls '%s/st'"):format(dir))
    assert.equal("data.mdb\nlock.mdb\nwriter.lock\n", out)
    local _, err, code = H.sh(("cd '%s' && %s snapshot st copy"):format(dir, bin)) -- beside it: taken
    assert.same({ "", 0 }, { err, code })
  end)
end)
