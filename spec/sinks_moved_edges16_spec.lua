-- A SQLite mirror or a runnel.store declared on another relation than the
-- one that kept it before (a deploy moved `:sink(runnel.sqlite(db, "m"))`
-- from x to y, both with the same columns) holds the rows of the relation
-- it kept. Its marks said it saw every group, so it counted as in step and
-- kept x's rows, then took y's changes over them: a mix of both for good.
-- The relation the state recorded for the sink (its "oi:" record; a
-- store's owner, "So:") must be this one for the sink to be in step;
-- otherwise it is written again from its new relation.
local runnel = require "runnel"
local H = require "helper"

local COLS = { {"id","int"}, {"v","int"}, key = "id" }

describe("a sink keeping rows, moved to another relation", function()
  after_each(H.cleanup)

  local function first_deploy(dir)
    local p = runnel.open{ path = dir .. "/st", notes = false }
    local x, y = p:table("x", COLS), p:table("y", COLS)
    x:sink(runnel.sqlite(dir .. "/o.db", "m"))
    x:sink(runnel.store("sm"))
    p:begin(); x:insert{ id = 1, v = 1 }; y:insert{ id = 2, v = 2 }; p:commit()
    p:close()
  end

  local function store_ids(dir)
    local a = runnel.attach(dir .. "/st", "sm")
    local ids = {}
    for row in a:rows() do ids[#ids + 1] = row.id end
    a:close()
    return ids
  end

  it("holds its new relation's rows", function()
    local dir = H.tmpdir()
    first_deploy(dir)
    local p = runnel.open{ path = dir .. "/st", notes = false }
    local _, y = p:table("x", COLS), p:table("y", COLS)
    y:sink(runnel.sqlite(dir .. "/o.db", "m"))
    y:sink(runnel.store("sm"))
    p:begin(); y:insert{ id = 3, v = 3 }; p:commit()
    p:close()
    assert.are.equal("2|2\n3|3\n", H.sql(dir .. "/o.db", "SELECT id, v FROM m ORDER BY id"))
    assert.are.same({ 2, 3 }, store_ids(dir))
  end)

  it("stays in step when declared again on the same relation", function()
    local dir = H.tmpdir()
    first_deploy(dir)
    H.sql(dir .. "/o.db", "INSERT INTO m VALUES (7, 7)") -- a row of the user's in the mirror: not written over
    local p = runnel.open{ path = dir .. "/st", notes = false }
    local x = p:table("x", COLS)
    p:table("y", COLS)
    x:sink(runnel.sqlite(dir .. "/o.db", "m"))
    x:sink(runnel.store("sm"))
    p:close()
    assert.are.equal("1|1\n7|7\n", H.sql(dir .. "/o.db", "SELECT id, v FROM m ORDER BY id"))
    assert.are.same({ 1 }, store_ids(dir))
  end)
end)
