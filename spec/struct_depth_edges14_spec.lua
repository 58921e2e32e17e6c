-- A struct column nesting more containers than a value may hold
-- (RN_MAX_NESTING, 24: core/row.h) is refused at its declaration, naming
-- the relation and the column; before, it was accepted and then refused
-- every row, naming an inner field as the column.
local runnel = require "runnel"
local H = require "helper"

-- A struct column of `levels` nested structs around { leaf int }: levels + 1 containers.
local function nested(levels)
  local cols = { {"leaf","int"} }
  for i = 1, levels do cols = { { "s" .. i, cols } } end
  local v = { leaf = 1 }
  for i = 1, levels do v = { ["s" .. i] = v } end
  return cols, v
end

describe("a struct column nested past 24 containers", function()
  local p
  before_each(function() p = runnel.open() end)
  after_each(function() p:close() end)

  it("is refused at declaration, naming the relation and the column", function()
    local cols = nested(24)
    assert.equal('d: column "root": a struct nested 25 deep; a value nests at most 24 lists, maps or structs',
                 H.error_of(p.table, p, "d", { {"id","int"}, {"root", cols}, key = "id" }))
    assert.is_nil(p:relation("d"))
    cols = nested(62)
    assert.equal('d: column "root": a struct nested 63 deep; a value nests at most 24 lists, maps or structs',
                 H.error_of(p.table, p, "d", { {"id","int"}, {"root", cols}, key = "id" }))
    local t = p:table("t", { {"id","int"}, key = "id" })
    assert.equal('m: column "deep": a struct nested 25 deep; a value nests at most 24 lists, maps or structs',
                 H.error_of(t.map, t, function(r) return r end, { {"id","int"}, {"deep", (nested(24))}, key = "id" }, "m"))
  end)

  it("is taken up to 24, and its rows are", function()
    local cols, v = nested(23)
    local t = p:table("d", { {"id","int"}, {"root", cols}, key = "id" })
    t:insert{ id = 1, root = v }
    assert.same(v, t:get(1).root)
  end)
end)
