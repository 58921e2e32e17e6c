-- An aggregate grouped by a column that is not a scalar is refused at its
-- declaration with the relation named once (it was named twice: the
-- message carried the name and the schema's error prefix added it again),
-- the column and its type, from the caller's file and line.
local runnel = require "runnel"
local H = require "helper"

describe("an aggregate by a column that is not a scalar", function()
  it("is refused naming the relation once, the column and its type", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"l","list", null = true}, {"s", { {"a","int"} }, null = true},
                             {"m","map", null = true}, {"y","any", null = true}, key = "id" })
    for _, c in ipairs{ { "l", "list" }, { "s", "struct" }, { "m", "map" }, { "y", "any" } } do
      local ok, err = pcall(function() t:aggregate{ by = c[1], n = runnel.count(), name = "a" .. c[1] } end)
      assert.is_false(ok)
      assert.are.equal(("spec/aggregate_edges16_spec.lua:14: a%s: by column \"%s\" has type %s; groups are keyed by scalars")
        :format(c[1], c[1], c[2]), err)
    end
    assert.are.equal('ab: by column "l" has type list; groups are keyed by scalars',
      H.error_of(function() t:aggregate{ by = { "id", "l" }, n = runnel.count(), name = "ab" } end))
    -- the pipeline goes on: a scalar by is declared
    local a = t:aggregate{ by = "id", n = runnel.count(), name = "ok" }
    p:begin(); t:insert{ id = 1, l = { 1 } }; p:commit()
    assert.are.equal(1, a:count())
    p:close()
  end)
end)
