-- The REPL browsing a state read its relations' schemas from runnel
-- inspect's text, split at every ", " and at the first space: a column
-- named "a b" became column "a" of type "b", "x, y" two columns, and the
-- relation printed as a grid of those wrong columns, all null. Names may
-- hold any character (DESIGN 3). Names and types now come from the
-- attached relation; only null and default are read from the text.
local H = require "helper"
local runnel = require "runnel"

local bin = H.runnel_bin

describe("the REPL browsing a state whose column names hold spaces and commas", function()
  after_each(H.cleanup)

  it("shows .schema and the rows with the columns as declared", function()
    local dir = H.tmpdir()
    local p = runnel.open(dir .. "/st")
    local t = p:table("odd", { {"a b","int"}, {"x, y","string", null = true}, {"k key","string", default = "p, q"},
                               {"n null", "int", null = true}, {"plain", "int", default = 7}, key = "a b" })
    t:insert{ ["a b"] = 1, ["x, y"] = "v", ["n null"] = 3 }
    p:close()
    local out, err, code = H.sh(("%s repl %s/st"):format(bin, dir), ".schema odd\nodd\n")
    assert.are.same({ table.concat({
      'table "odd"',
      " column | type   | null | key | default",
      "--------+--------+------+-----+---------",
      " a b    | int    |      | key |",
      " x, y   | string | null |     |",
      ' k key  | string |      |     | "p, q"',
      " n null | int    | null |     |",
      " plain  | int    |      |     | 7",
      " id | a b | x, y | k key | n null | plain",
      "----+-----+------+-------+--------+-------",
      "  1 |   1 | v    | p, q  |      3 |     7",
      "(1 row)",
    }, "\n") .. "\n", "", 0 }, { out, err, code })
  end)
end)
