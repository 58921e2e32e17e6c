-- A relation rebuilt at its declaration (another n for a top, another by
-- for an aggregate) keeps the count its rebuild gave through the first
-- group that rolls back: the count a rollback goes back to is the one the
-- declaration committed, not the one read before the rebuild
-- (relation.c rn_open_derived_state; regression).
local runnel = require "runnel"
local H = require "helper"

describe("a relation rebuilt at declaration, then a rolled-back group", function()
  after_each(H.cleanup)

  it("counts the rows its rebuild made", function()
    local dir = H.tmpdir()
    local function open(n, by)
      local p = runnel.open{ path = dir .. "/st", sync = false, notes = false }
      local t = p:table("t", { {"id","int"}, {"g","int"}, {"h","int"}, {"v","int"}, key = "id" })
      local top = t:top{ n = n, by = "g", order = { "v" }, name = "top" }
      local agg = t:aggregate{ by = by, n = runnel.count(), name = "agg" }
      return p, t, top, agg
    end
    local p, t, top, agg = open(1, "g")
    for i = 1, 12 do t:insert{ id = i, g = i % 3, h = i % 4, v = i } end
    assert.same({ 3, 3 }, { top:count(), agg:count() })
    p:close()
    p, t, top, agg = open(2, "h")                       -- both rebuilt
    assert.same({ 6, 4 }, { top:count(), agg:count() })
    p:begin()
    t:insert{ id = 13, g = 5, h = 5, v = 0 }
    p:rollback()
    local rows = 0
    for _ in top:rows() do rows = rows + 1 end
    assert.same({ 6, 6, 4 }, { rows, top:count(), agg:count() })
    t:insert{ id = 14, g = 0, h = 0, v = 0 }            -- a committed group after it
    assert.same({ 6, 4 }, { top:count(), agg:count() })
    p:close()
    p, t, top, agg = open(2, "h")
    assert.same({ 6, 4 }, { top:count(), agg:count() })
    p:close()
    local out, err, code = H.sh(("%s verify %s/st"):format(H.runnel_bin, dir))
    assert.equal(0, code, out .. err)
  end)
end)
