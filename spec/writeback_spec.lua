-- writeback_spec.lua — the write-back layer (core/wb.c) seen from Lua; the
-- randomized comparison with the plain LMDB path is spec/c/test_writeback.c.
local runnel = require "runnel"

describe("the write-back layer", function()
  it("counts the entries a carried transaction holds in p:stats().state", function()
    for _, wb in ipairs{ true, false } do
      local p = runnel.open{ sync = false, write_back = wb }
      local t = p:table("t", { {"id","int"}, key = "id" })
      for i = 1, 10 do t:insert{ id = i } end
      assert.equal(10, p:stats().state.t)
      p:close()
    end
  end)

  it("is switched off by write_back = false, and only by a boolean", function()
    local p = runnel.open{ write_back = false }
    p:close()
    assert.has_error(function() runnel.open{ write_back = 0 } end, "open: write_back must be a boolean")
  end)
end)
