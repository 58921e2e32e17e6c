-- p:drop of a table that a stored, undeclared top or index reads: the
-- order kept the dropped table's row ids as if current, so once the table
-- was declared again runnel verify called the state damaged ("order "ix":
-- row id 1 is no row of t") until the order was declared too. Found by the
-- API-sequence campaign (make sequences). The drop now makes such orders
-- stale, as ones that missed groups: verify notes them, and declared again
-- they are rebuilt from the table as it is.
local runnel = require "runnel"
local H = require "helper"

local COLS = { {"id","int"}, {"g","int"}, {"sc","int"}, key = "id" }

local function verify(dir)
  local out, err, code = H.sh(("%s verify %s"):format(H.runnel_bin, dir))
  assert.same({ "", 0 }, { err, code }, out)
  return out
end

describe("p:drop of a table that stored orders read", function()
  after_each(H.cleanup)

  it("makes them stale: the state verifies, and declared again they hold the new table's rows", function()
    local dir = H.tmpdir() .. "/st"
    local p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", COLS)
    t:index{ "sc", "desc", name = "ix" }
    t:top{ n = 2, by = "g", order = { {"sc", "desc"} }, name = "tp" }
    local other = p:table("o", COLS)
    other:index{ "sc", name = "oix" }
    p:batch(function()
      for i = 1, 3 do t:insert{ id = i, g = 1, sc = i } other:insert{ id = i, g = 1, sc = i } end
    end)
    p:close()

    p = runnel.open{ path = dir, notes = false }
    p:drop("t")
    p:table("t", COLS) -- declared again, no group since: the orders missed none
    p:close()
    local out = verify(dir) -- before: DAMAGED, order "ix": row id 1 is no row of t
    assert.matches('note: relation "ix" holds state as of group 0', out, 1, true)
    assert.matches('note: relation "tp" holds state as of group 0', out, 1, true)
    assert.not_matches('"oix"', out, 1, true) -- an order over another table is left as it is

    p = runnel.open{ path = dir, notes = false }
    t = p:table("t", COLS)
    t:insert{ id = 9, g = 1, sc = 9 } -- its ids go on after the dropped ones
    local ix = t:index{ "sc", "desc", name = "ix" }
    local tp = t:top{ n = 2, by = "g", order = { {"sc", "desc"} }, name = "tp" }
    local rows = {}
    for r in ix:rows() do rows[#rows + 1] = r.id end
    assert.same({ 9 }, rows)
    assert.equal(1, tp:count())
    other = p:table("o", COLS)
    assert.equal(3, other:index{ "sc", name = "oix" }:count())
    p:close()
    verify(dir)
  end)
end)
