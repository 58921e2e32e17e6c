-- An order entry that says more than {column, direction} is refused (round
-- 29, A), as an order given as a map is since 0.36: the extra was dropped
-- and the leaderboard sorted another way than written.
local runnel = require "runnel"
local H = require "helper"

describe("an order of rel:top{} and rel:index{}", function()
  local p, t
  before_each(function()
    p = runnel.open()
    t = p:table("players", { {"id","int"}, {"score","int"}, {"name","string"}, key = "id" })
  end)
  after_each(function() p:close() end)

  -- Regression: { "score", dir = "desc" } (or desc = true) was taken as
  -- { "score" }: an ascending board, with no word.
  it("refuses a table entry with a key besides column and direction", function()
    assert.equal("best: order entry #1 must be {column, direction}, got a table with key dir",
                 H.error_of(function() t:top{ n = 3, order = { { "score", dir = "desc" } }, name = "best" } end))
    assert.equal("best: order entry #2 must be {column, direction}, got a table with key 3",
                 H.error_of(function() t:top{ n = 3, order = { "name", { "score", "desc", "id" } }, name = "best" } end))
    assert.equal("by_score: order entry #1 must be {column, direction}, got a table with key desc",
                 H.error_of(function() t:index{ { "score", desc = true }, name = "by_score" } end))
  end)

  -- Regression: in the flat form a second direction overruled the first:
  -- { "score", "desc", "asc" } ordered by score ascending.
  it("refuses a direction after a direction in the flat form", function()
    assert.equal('best: order entry #3: "asc" follows the direction of "score"; a direction follows its column once',
                 H.error_of(function() t:top{ n = 3, order = { "score", "desc", "asc" }, name = "best" } end))
    assert.equal('by_score: order entry #3: "desc" follows the direction of "score"; a direction follows its column once',
                 H.error_of(function() t:index{ "score", "asc", "desc", name = "by_score" } end))
  end)

  it("still takes the forms it took", function()
    local a = t:top{ n = 2, order = { "score", "desc", "name" }, name = "a" }
    local b = t:top{ n = 2, order = { { "score", "desc" }, { "name" } }, name = "b" }
    local c = t:index{ "score", "desc", name = "c" }
    for i, s in ipairs{ 10, 30, 20 } do t:insert{ id = i, score = s, name = "p" .. i } end
    local function names(rel) local o = {} for r in rel:rows() do o[#o + 1] = r.name end return o end
    assert.same({ "p2", "p3" }, names(a))
    assert.same({ "p2", "p3" }, names(b))
    assert.same({ "p2", "p3", "p1" }, names(c))
  end)
end)
