-- runnel snapshot and runnel inspect of what a deploy leaves (helper
-- round 21): each defect found has its regression test here.
local runnel = require "runnel"
local H = require "helper"

local bin = H.runnel_bin

local function map_line(dir)
  local out, err, code = H.sh(("%s inspect '%s'"):format(bin, dir))
  assert.equal(0, code, err)
  return out:match("lmdb: [^\n]*")
end

describe("runnel snapshot's copy", function()
  after_each(H.cleanup)

  -- Regression: the copy recorded the map of the environment that read it
  -- (a reader's, up to 1 TiB), so runnel inspect of the copy, and of the
  -- state restored from it for good (LMDB keeps the larger map), said
  -- "… of a 1048576.0 MiB map" of a state that never had one.
  it("records the map of the state it copies", function()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir .. "/st", notes = false }
    p:table("t", { {"k","int"}, key = "k" }):insert{ k = 1 }
    p:close()
    local _, err, code = H.sh(("%s snapshot '%s/st' '%s/copy'"):format(bin, dir, dir))
    assert.same({ "", 0 }, { err, code })
    assert.matches("of a 64.0 MiB map", map_line(dir .. "/st"), 1, true)
    assert.matches("of a 64.0 MiB map", map_line(dir .. "/copy"), 1, true)
    p = runnel.open{ path = dir .. "/copy", notes = false } -- the copy opens, and writes, as its state would
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:insert{ k = 2 }
    assert.equal(2, t:count())
    p:close()
    assert.matches("of a 64.0 MiB map", map_line(dir .. "/copy"), 1, true)
    local _, verr, vcode = H.sh(("%s verify '%s/copy'"):format(bin, dir))
    assert.equal(0, vcode, verr)
  end)
end)
