-- p:stats() and rel:changes() after a group whose map grew (its changes
-- applied again): each change counted once (rel:changes() too:
-- changes_regrow_edges28; the group's "ch:" record is kept too,
-- changed_regrow_edges27).
local runnel = require "runnel"
local H = require "helper"

local function run(opts)
  local p = runnel.open(opts)
  local t = p:table("t", { {"k","string"}, {"pad","string"}, key = "k" })
  local f = t:filter(function(r) return true end, "f")
  local a = t:aggregate{ by = "pad", n = runnel.count(), name = "a" }
  p:begin()
  for i = 1, 3000 do t:upsert{ k = "r" .. i, pad = string.rep("p", 300) .. (i % 7) } end
  p:commit()
  local s = p:stats()
  local tc, fc, ac = t:changes(), f:changes(), a:changes()
  p:close()
  return s, tc, fc, ac
end

describe("stats after a regrow", function()
  teardown(H.cleanup)
  for _, wb in ipairs{ false, true } do
    for _, sync in ipairs{ false, true } do
      it(("p:stats() and rel:changes() count once (sync=%s wb=%s)"):format(tostring(sync), tostring(wb)), function()
        local dir = H.tmpdir()
        local s, tc, fc, ac = run{ path = dir, sync = sync, write_back = wb, map_size = 1 << 16, notes = false }
        assert(s.map_size > 1 << 16, "grew")
        assert.equal(3000, s.changes)
        assert.equal(1, s.groups)
        assert.equal(0, s.rollbacks)
        assert.same({ 3000, 0, 0 }, { tc.inserts, tc.updates, tc.deletes })
        assert.same({ 3000, 0, 0 }, { fc.inserts, fc.updates, fc.deletes })
        assert.same({ 7, 3000 - 7, 0 }, { ac.inserts, ac.updates, ac.deletes })
      end)
    end
  end
end)
