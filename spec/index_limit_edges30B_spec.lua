-- idx:range{ limit = 0 } (round 30B). The core reads a limit of 0 as "no
-- limit" (index.h), and the binding passed an explicit 0 through, so a
-- page size counted down to 0 (limit = page - shown) returned every row of
-- the range instead of none; an attached index did the same. `runnel query
-- --limit 0` already prints no row: a limit of 0 now returns no row
-- everywhere, its options still checked.
local runnel = require "runnel"
local H = require "helper"

local function count(iter)
  local n = 0
  for _ in iter do n = n + 1 end
  return n
end

local function ids(iter)
  local out = {}
  for row in iter do out[#out + 1] = row.id end
  return out
end

-- A state in a new directory with t's rows 1..4 scored 10..40 and its
-- index by_score in order (a list of index entries): the dir, pipeline,
-- table and index.
local function board(order)
  local dir = H.tmpdir()
  local p = runnel.open(dir)
  local t = p:table("t", { {"id","int"}, {"score","int"}, key = "id" })
  order.name = "by_score"
  local ix = t:index(order)
  p:batch(function() for i = 1, 4 do t:insert{ id = i, score = i * 10 } end end)
  return dir, p, t, ix
end

describe("index range with limit = 0", function()
  teardown(H.cleanup)

  it("returns no row, in the pipeline and through runnel.attach, while no limit returns them all", function()
    local dir, p, t, ix = board{ "score", "desc" }
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

  -- idx:range{ limit = 0 } and att:range{ limit = 0 } (review 30RB). The
  -- binding short-cut a limit of 0 before the core read the bounds, so a
  -- bound of the wrong type (a string for an int column, 1.5, 2^70) or too
  -- many values for an attached index's order raised with limit = 1 but
  -- returned no row with limit = 0. Only the rows are left out now: the
  -- bounds are still checked.
  it("still checks its bounds, in the pipeline and through runnel.attach (review 30RB)", function()
    local dir, p, _, ix = board{ "score" }
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
