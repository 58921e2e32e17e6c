-- idx:range{ limit = 0 } (round 30B). The core reads a limit of 0 as "no
-- limit" (index.h), and the binding passed an explicit 0 through, so a
-- page size counted down to 0 (limit = page - shown) returned every row of
-- the range instead of none; an attached index did the same. `runnel query
-- --limit 0` already prints no row: a limit of 0 now returns no row
-- everywhere, its options still checked.
local runnel = require "runnel"
local H = require "helper"

local function ids(iter)
  local out = {}
  for row in iter do out[#out + 1] = row.id end
  return out
end

describe("index range with limit = 0", function()
  teardown(H.cleanup)

  it("returns no row, in the pipeline and through runnel.attach, while no limit returns them all", function()
    local dir = H.tmpdir()
    local p = runnel.open(dir)
    local t = p:table("t", { {"id","int"}, {"score","int"}, key = "id" })
    local ix = t:index{ "score", "desc", name = "by_score" }
    p:batch(function() for i = 1, 4 do t:insert{ id = i, score = i * 10 } end end)
    assert.same({ 4, 3, 2, 1 }, ids(ix:range{}))
    assert.same({ 4 }, ids(ix:range{ limit = 1 }))
    assert.same({}, ids(ix:range{ limit = 0 }))
    assert.same({}, ids(ix:range{ from = 30, to = 10, offset = 1, limit = 0 }))
    assert.same({}, ids(ix:range{ limit = 0.0 }))
    -- the other options are still checked
    assert.equal("by_score: range: offset must not be negative, got -1",
                 H.error_of(function() ix:range{ offset = -1, limit = 0 } end))
    assert.equal("by_score: range: from is NaN", H.error_of(function() ix:range{ from = 0 / 0, limit = 0 } end))
    local att = runnel.attach(dir, "by_score")
    assert.same({ 4, 3, 2, 1 }, ids(att:range{}))
    assert.same({ 4, 3 }, ids(att:range{ limit = 2 }))
    assert.same({}, ids(att:range{ limit = 0 }))
    assert.same({}, ids(att:range{ from = 30, limit = 0 }))
    assert.equal("attach by_score: range: limit must not be negative, got -1",
                 H.error_of(function() att:range{ limit = -1 } end))
    p:begin()                                           -- inside a group too
    t:insert{ id = 5, score = 50 }
    assert.same({}, ids(ix:range{ limit = 0 }))
    assert.same({ 5 }, ids(ix:range{ limit = 1 }))
    p:commit()
    p:close()
  end)
end)
