-- idx:range{ limit = 0 } and att:range{ limit = 0 } (review 30RB). The
-- binding short-cut a limit of 0 before the core read the bounds, so a
-- bound of the wrong type (a string for an int column, 1.5, 2^70) or too
-- many values for an attached index's order raised with limit = 1 but
-- returned no row with limit = 0. Only the rows are left out now: the
-- bounds are still checked.
local runnel = require "runnel"
local H = require "helper"

local function count(iter)
  local n = 0
  for _ in iter do n = n + 1 end
  return n
end

describe("index range with limit = 0 still checks its bounds", function()
  teardown(H.cleanup)

  it("in the pipeline and through runnel.attach", function()
    local dir = H.tmpdir()
    local p = runnel.open(dir)
    local t = p:table("t", { {"id","int"}, {"score","int"}, key = "id" })
    local ix = t:index{ "score", name = "by_score" }
    p:batch(function() for i = 1, 4 do t:insert{ id = i, score = i * 10 } end end)
    for _, limit in ipairs{ 1, 0 } do
      assert.equal('by_score: column "score": expected int, got string',
                   H.error_of(function() ix:range{ from = "x", limit = limit } end))
      assert.equal('by_score: column "score": expected int, got number 1.5',
                   H.error_of(function() ix:range{ to = 1.5, limit = limit } end))
    end
    assert.equal(0, count(ix:range{ from = 20, limit = 0 }))
    assert.equal(0, count(ix:range{ offset = 2, limit = 0 }))
    assert.equal(2, count(ix:range{ from = 20, to = 30, limit = 5 }))
    local att = runnel.attach(dir, "by_score")
    for _, limit in ipairs{ 1, 0 } do
      assert.equal('by_score: column "score": expected int, got string',
                   H.error_of(function() att:range{ from = "x", limit = limit } end))
      assert.equal("by_score: a bound of 3 values for an order of 1 columns",
                   H.error_of(function() att:range{ to = { 1, 2, 3 }, limit = limit } end))
    end
    assert.equal(0, count(att:range{ from = 20, limit = 0 }))
    assert.equal(0, count(att:range{ offset = 9, limit = 0 }))
    assert.equal(3, count(att:range{ from = 20, limit = 5 }))
    att:close()
    p:close()
  end)
end)
