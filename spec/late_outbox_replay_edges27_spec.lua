local runnel = require "runnel"
local H = require "helper"

describe("rev27d late and outbox through replays", function()
  teardown(H.cleanup)
  for _, sync in ipairs{ false, true } do
    it("late counts and outbox (sync = " .. tostring(sync) .. ")", function()
      local dir = H.tmpdir()
      local p = runnel.open{ path = dir, sync = sync, map_size = 1 << 16, notes = false }
      local e = p:stream("e", { {"k","string"}, {"ts","int"}, {"pad","string"} })
      e:aggregate{ by = "k", window = runnel.tumbling(10, "ts"), grace = 0, n = runnel.count(), name = "w" }
      e:sink(runnel.ndjson(dir .. "/out.ndjson", { verb = false }))
      local t = p:table("t", { {"k","string"}, key = "k" })
      e:insert{ k = "a", ts = 100, pad = "x" }
      p:begin()
      for i = 1, 2000 do e:insert{ k = "k" .. (i % 50), ts = (i % 3 == 0) and 1 or 100 + i, pad = string.rep("p", 300) } end
      p:commit()
      for i = 1, 3 do e:insert{ k = "b", ts = 1, pad = "x" } end
      assert.is_false(pcall(t.update, t, { k = "none" }))
      local s = p:stats()
      assert(s.map_size > 1 << 20, "grew")
      assert.equal(666 + 3, s.late.w)
      assert.equal(2004, s.changes)
      local n = 0
      for _ in pairs(s.outbox) do n = n + 1 end
      p:close()
      local text = H.text_of(dir .. "/out.ndjson")
      local lines = select(2, text:gsub("\n", ""))
      assert.equal(2004, lines)
    end)
  end
end)
