-- The row id's column beside a column named "id" (round 20): runnel.format
-- (runnel.show, the REPL printing a relation) and runnel.watch headed both
-- "id", so " id | id | name" said nothing of which was the row id, and a
-- relation keyed by its own "id" (the usual case) showed two equal columns
-- under one name. The row id's header is "row id" when a column is named
-- "id"; watch's "verb" is "change" when a column is named "verb".
local runnel = require "runnel"
local H = require "spec.helper"

describe("a grid's row id beside a column named id", function()
  local p
  before_each(function() p = runnel.open() end)
  after_each(function() p:close(); H.cleanup() end)

  it("runnel.format heads it \"row id\"", function()
    local t = p:table("t", { {"id","int"}, {"name","string"}, key = "id" })
    t:insert{ id = 7, name = "ann" }
    assert.equal(table.concat({
      " row id | id | name",
      "--------+----+------",
      "      1 |  7 | ann",
      "(1 row)" }, "\n"), runnel.format(t))
  end)

  it("runnel.format keeps \"id\" when no column has the name", function()
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:insert{ k = 7 }
    assert.equal(" id | k\n----+---\n  1 | 7\n(1 row)", runnel.format(t))
  end)

  it("runnel.watch heads the row id \"row id\" and the verb \"change\" when columns have those names", function()
    local t = p:table("t", { {"id","int"}, {"verb","string"}, key = "id" })
    local out = {}
    runnel.watch(t, function(text) out[#out + 1] = text end)
    t:insert{ id = 7, verb = "go" }
    assert.equal(table.concat({
      "t · group 1",
      " row id | change | id | verb",
      "--------+--------+----+------",
      "      1 | INSERT |  7 | go" }, "\n"), out[1])
  end)
end)
