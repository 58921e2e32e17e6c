-- A key column whose default is NaN was declared, and then every row that
-- left the column out was refused ("NaN cannot be part of a key"): a
-- declaration no row could use. It is refused at the declaration, naming
-- the relation and the column; a NaN default on a column that is no key
-- stays allowed.
local runnel = require "runnel"
local H = require "spec.helper"

describe("a key column's default", function()
  it("of NaN is refused at the declaration, naming the relation and the column", function()
    local p = runnel.open{}
    assert.are.equal('k: key column "x": its default is NaN, which cannot be part of a key',
                     H.error_of(p.table, p, "k", { {"x","float", default = 0/0}, {"v","int"}, key = "x" }))
    assert.is_nil(p:relation("k"))
    local k2 = p:table("k2", { {"x","float", default = 0/0}, {"v","int"} })
    k2:insert{ v = 1 }
    assert.are.equal(1, k2:count())
    local k3 = p:table("k3", { {"x","float", default = 1.5}, {"v","int"}, key = "x" })
    k3:insert{ v = 1 }
    assert.are.equal(1.5, k3:get{ x = 1.5 }.x)
    p:close()
  end)
end)
