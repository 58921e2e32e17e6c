-- p:stats().changes when a callback's read fills the map (write_back,
-- GROUP-5; review 28d). A filter that reads (rows(), p:stats()) inside a
-- change writes the group's write-back entries into LMDB first; when that
-- fills the map the read raises MDB_MAP_FULL, and whatever the callback
-- does, the change is applied again after the map grew. A callback that
-- caught the error let its change go through: it was counted, then counted
-- again at the retry (3,018 changes for 3,017). A change is counted once,
-- as in the same run with a map that never grows.
local runnel = require "runnel"
local H = require "helper"

local SMALL, LARGE = 1 << 16, 1 << 26
local PAD = string.rep("p", 300)

local function session(size, sync, read)
  local dir = H.tmpdir() .. "/s"
  local p = runnel.open{ path = dir, map_size = size, sync = sync, write_back = true, notes = false }
  local t = p:table("t", { {"k","string"}, {"g","int"}, key = "k" })
  local u = p:table("u", { {"g","int"}, {"name","string"}, key = "g" })
  local caught = 0
  local f = t:filter(function(r)
    if r.k:sub(1, 4) == "trig" and not pcall(read, p, u) then caught = caught + 1 end
    return true
  end, "f")
  t:insert{ k = "c1", g = 1 }
  p:begin()
  for i = 1, 3000 do
    u:upsert{ g = i, name = PAD }
    if i % 200 == 0 then t:insert{ k = "trig" .. i, g = i % 3 } end
  end
  p:commit()
  t:insert{ k = "c2", g = 1 }
  local st = p:stats()
  local out = { changes = st.changes, groups = st.groups, rollbacks = st.rollbacks, t = t:changes(), f = f:changes(),
                u = u:changes(), rows = t:count() }
  p:close()
  return out, caught, st.map_size
end

local reads = {
  rows = function(_, u) for _ in u:rows() do end end,
  stats = function(p) p:stats() end,
}

describe("a change whose callback caught a full map", function()
  teardown(H.cleanup)
  for _, sync in ipairs{ true, false } do
    for name, read in pairs(reads) do
      it(("is counted once in p:stats().changes (%s, sync = %s)"):format(name, tostring(sync)), function()
        local small, caught, grown = session(SMALL, sync, read)
        local large, none, kept = session(LARGE, sync, read)
        assert.is_true(grown > (1 << 20), "the small map grew")
        assert.equal(LARGE, kept)
        assert.equal(0, none)
        assert.is_true(caught > 0, "the read raised in the callback")
        assert.same(large, small)
        assert.equal(3000 + 15 + 2, small.changes)
      end)
    end
  end
end)
