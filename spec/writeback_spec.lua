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

  it("is chosen by write_back = true or false (off by default), and only by a boolean", function()
    local p = runnel.open{ write_back = false }
    p:close()
    assert.has_error(function() runnel.open{ write_back = 0 } end, "open: write_back must be a boolean")
  end)

  -- rows() inside a group reads the group's writes, those made while it
  -- iterates too, as the plain path's LMDB cursor does.
  it("lets rows() inside a group see writes made while it iterates", function()
    local seen = {}
    for _, wb in ipairs{ true, false } do
      local p = runnel.open{ sync = false, write_back = wb }
      local t = p:table("t", { {"id","int"}, {"v","int"}, key = "id" })
      for i = 1, 6 do t:insert{ id = i, v = i } end
      p:flush()
      p:begin()
      t:update{ id = 2, v = 20 }
      local got = {}
      for row in t:rows() do
        if row.id == 1 then t:update{ id = 4, v = 40 } t:insert{ id = 7, v = 70 } t:delete{ id = 5 } end
        got[#got + 1] = row.id .. ":" .. row.v
      end
      p:commit()
      seen[#seen + 1] = table.concat(got, " ")
      p:close()
    end
    assert.equal("1:1 2:20 3:3 4:40 6:6 7:70", seen[2]) -- the plain path
    assert.equal(seen[2], seen[1])
  end)
end)
