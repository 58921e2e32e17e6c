-- rel:scan inside a group reads the group's transaction: its callback may
-- read, but not end the group under it (that freed the transaction the
-- scan was reading: a double free for aggregates).
local runnel = require "runnel"

describe("rel:scan's callback", function()
  local function relations(p)
    local t = p:table("t", { {"id","int"}, {"g","int"}, key = "id" })
    local u = p:table("u", { {"g","int"}, key = "g" })
    return {
      table = t,
      filter = t:filter(function() return true end),
      join = t:join(u, { on = "g", kind = "left" }),
      aggregate = t:aggregate{ by = "g", n = runnel.count() },
    }
  end

  -- Joins and aggregates scan in C, calling back for each row.
  for _, kind in ipairs{ "join", "aggregate" } do
    it("cannot roll back or commit the group a " .. kind .. " scan reads", function()
      local p = runnel.open()
      local rels = relations(p)
      rels.table:insert{ id = 1, g = 1 }
      p:begin()
      rels.table:insert{ id = 2, g = 2 }
      local refused = {}
      rels[kind]:scan(function()
        refused[#refused + 1] = select(2, pcall(p.rollback, p))
        refused[#refused + 1] = select(2, pcall(p.commit, p))
      end)
      assert.is_true(#refused >= 2)
      for _, msg in ipairs(refused) do assert.matches("not from inside a callback", msg) end
      assert.is_true(p:in_group())
      p:commit()
      assert.equal(2, rels.table:count())
      p:close()
    end)
  end

  -- Tables and filters iterate rows() in Lua: ending the group stops the
  -- iteration with an error, and nothing of the group stays.
  for _, kind in ipairs{ "table", "filter" } do
    it("stops a " .. kind .. " scan whose group it rolled back", function()
      local p = runnel.open()
      local rels = relations(p)
      rels.table:insert{ id = 1, g = 1 }
      p:begin()
      rels.table:insert{ id = 2, g = 2 }
      local ok, err = pcall(rels[kind].scan, rels[kind], function() p:rollback() end)
      assert.is_false(ok)
      assert.matches("the group this iteration ran in has ended", err)
      assert.is_false(p:in_group())
      assert.equal(1, rels.table:count())
      p:close()
    end)
  end
end)
