-- rel:rows() inside a group that rewrites the rows it reads, the map
-- filling on the way (review 28). With write_back on, each step of a
-- group's iteration writes the group's entries of the table into LMDB
-- first; when that filled the map the step raised "t: MDB_MAP_FULL:
-- Environment mapsize limit reached" after 1321 of 2000 rows, though a
-- full map inside a group grows it and goes on (a change does). Now the
-- map grows and the iteration reads on from the key it had reached.
local runnel = require "runnel"
local H = require "helper"

describe("rows() in a group as the map fills", function()
  local dir, p
  after_each(function()
    if p then p:close() end
    H.cleanup()
  end)

  for _, write_back in ipairs{ true, false } do
    it("reads every row, each rewritten once (write_back = " .. tostring(write_back) .. ")", function()
      dir = H.tmpdir()
      p = runnel.open{ path = dir, map_size = 1 << 20, write_back = write_back }
      local t = p:table("t", { {"id","int"}, {"v","int"}, {"pad","string"}, key = "id" })
      p:begin()
      for i = 1, 2000 do t:insert{ id = i, v = 0, pad = ("p"):rep(100) } end
      p:commit()
      p:begin()
      local n, last, stale = 0, 0, 0
      for row in t:rows() do
        assert.is_true(row.id > last)
        last = row.id
        if row.v ~= 0 then stale = stale + 1 end
        n = n + 1
        t:update{ id = row.id, v = 1, pad = ("q"):rep(300) }
      end
      assert.same({ 2000, 2000, 0 }, { n, last, stale })
      assert.equal(2, p:commit())
      p:close()
      p = runnel.open{ path = dir }
      t = p:table("t", { {"id","int"}, {"v","int"}, {"pad","string"}, key = "id" })
      local ones = 0
      for row in t:rows() do if row.v == 1 then ones = ones + 1 end end
      assert.equal(2000, ones)
    end)
  end
end)
