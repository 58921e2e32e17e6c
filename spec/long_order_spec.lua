-- A top's rows too big for their LMDB page (a rank shift rewrote them under
-- a key LMDB had just moved), and runnel verify over a table with deleted rows.
local runnel = require "runnel"
local H = require "helper"

describe("long rows in a top, and runnel verify over deleted rows", function()
  local p
  after_each(function() if p then p:close() end p = nil; H.cleanup() end)

  it("moves the rank of a row too big for its page without moving its key (regression)", function()
    -- a rank shift rewrote the entry with the key LMDB's own page held,
    -- which LMDB had just moved: the row landed under bytes of its neighbours
    -- (each group its own transaction: the row's overflow page is clean)
    local dir = H.tmpdir()
    p = runnel.open{ path = dir .. "/st" }
    local t = p:table("t", { {"id","int"}, {"score","int"}, {"bio","string"}, key = "id" })
    local top = t:top{ n = 3, order = { {"score","desc"} } }
    t:insert{ id = 1, score = 10, bio = string.rep("x", 3000) }
    t:insert{ id = 2, score = 20, bio = string.rep("y", 3000) }
    t:insert{ id = 3, score = 30, bio = "z" }               -- 1 and 2 move down one
    t:insert{ id = 4, score = 40, bio = string.rep("w", 5000) }
    local function ranks()
      local out = {}
      for r in top:rows() do out[r.id] = r.rank end
      return out
    end
    assert.same({ [4] = 1, [3] = 2, [2] = 3 }, ranks())
    t:update{ id = 2, score = 50 }
    t:update{ id = 3, score = 5 }                         -- out of the top: 1 comes back
    assert.same({ [2] = 1, [4] = 2, [1] = 3 }, ranks())
    p:close()
    p = nil
    local out, err, code = H.sh(("%s verify %s/st"):format(H.runnel_bin, dir))
    assert.equal(0, code, out .. err)
  end)

  it("finds an index over a table with deleted rows whole (runnel verify skips tombstones; regression)", function()
    local dir = H.tmpdir()
    p = runnel.open{ path = dir .. "/st", sync = false }
    local t = p:table("t", { {"id","int"}, {"name","string"}, key = "id" })
    t:index{ "name" }
    t:top{ n = 1, order = { "name" } }
    t:insert{ id = 1, name = "a" }
    t:insert{ id = 2, name = "b" }
    t:delete{ id = 1 }
    p:close()
    p = nil
    local out, err, code = H.sh(("%s verify %s/st"):format(H.runnel_bin, dir))
    assert.equal(0, code, out .. err)
    assert.matches("whole", out)
  end)
end)
