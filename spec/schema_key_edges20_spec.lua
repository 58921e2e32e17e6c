-- A key naming a column by another case or a typo (round 20): "x: key
-- column \"ID\" is not a declared column" left the user to compare it with
-- the columns, where an unknown column of a row says "(did you mean
-- \"id\"?)"; and "ID" was no suggestion for "id" (two letters off). The
-- key's message suggests the nearest column too, a name in another case
-- first; a one-letter name is not taken for another one misspelt.
local runnel = require "runnel"
local H = require "spec.helper"

describe("a key naming no declared column", function()
  it("suggests the nearest column", function()
    local p = runnel.open()
    assert.equal('x: key column "ID" is not a declared column (did you mean "id"?)',
                 H.error_of(p.table, p, "x", { {"id","int"}, {"name","string"}, key = "ID" }))
    assert.equal('x: key column "nam" is not a declared column (did you mean "name"?)',
                 H.error_of(p.table, p, "x", { {"id","int"}, {"name","string"}, key = { "id", "nam" } }))
    assert.equal('x: key column "zzz" is not a declared column',
                 H.error_of(p.table, p, "x", { {"id","int"}, key = "zzz" }))
    p:close()
  end)
end)
