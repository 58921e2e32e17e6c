-- A join whose mapper makes right keys longer than the join's inline part
-- (RN_JOIN_FK_INLINE, 400 bytes: its index files them under their first
-- bytes and a hash) tells its sinks what a rebuild changed, as one with
-- short keys does (core/evolve_log.c, core/join_scan.c).
local runnel = require "runnel"
local H = require "helper"

local T = { {"k","int"}, {"g","int"}, key = "k" }
local U = { {"id","string"}, {"name","string"}, key = "id" }

local function long(n, size) return ("%d:"):format(n) .. ("x"):rep(size) end

-- t, u (keyed by long strings), and j = t joined with u by mapper; u is
-- the join's right side as it is (a keyed table) or through a filter (the
-- join keeps its own copy of the right rows).
local function joined(dir, mapper, through, kind)
  local p = runnel.open{ path = dir, notes = function() end }
  local t = p:table("t", T)
  local u = p:table("u", U)
  local right = through and u:filter(function() return true end, "uf") or u
  local j = t:join(right, { mapper = mapper, name = "j", kind = kind })
  return p, t, u, j
end

local function rows_of(rel)
  local out = {}
  for row in rel:rows() do out[row.k] = row end
  return out
end

for _, case in ipairs{ { "a keyed table", false, 600 }, { "a relation the join copies", true, 600 },
                       { "a relation the join copies, keys of 401 to 511 bytes", true, 420 } } do
  local what, through, size = case[1], case[2], case[3]
  describe("a join rebuilt for a changed mapper whose right keys are long, over " .. what, function()
    after_each(H.cleanup)

    it("tells its sinks what changed, so a copy from the log equals its rows", function()
      local dir = H.tmpdir()
      local p, t, u, j = joined(dir, function(r) return long(r.g, size) end, through)
      local copy = {}
      local function apply(verb, row, old)
        if verb == "DELETE" then copy[old.k] = nil else copy[row.k] = row end
      end
      j:sink(apply)
      for g = 0, 2 do u:insert{ id = long(g, size), name = "n" .. g } end
      for k = 1, 4 do t:insert{ k = k, g = k % 2 } end
      assert.same(rows_of(j), copy)
      p:close()

      p, t, u, j = joined(dir, function(r) if r.k ~= 4 then return long(r.k % 3, size) end end, through)
      local log = H.record(j)
      j:sink(apply)
      t:insert{ k = 5, g = 1 }
      -- k = 1 stays (1 % 3 = 1 % 2), k = 2 moves from 0 to 2, k = 3 from 1 to 0, k = 4 matches nothing
      assert.same({ "UPDATE 2", "UPDATE 3", "DELETE 4", "INSERT 5" }, H.verbs(log))
      assert.same({ k = 2, g = 0, id = long(0, size), name = "n0" }, log[1][4])
      assert.same({ k = 2, g = 0, id = long(2, size), name = "n2" }, log[1][3])
      assert.same({ k = 4, g = 0, id = long(0, size), name = "n0" }, log[3][4])
      assert.same(rows_of(j), copy)
      p:close()
    end)

    it("in a left join, tells of a row whose long key no right row held", function()
      local dir = H.tmpdir()
      local p, t, u, j = joined(dir, function(r) return long(r.k == 4 and 7 or r.g, size) end, through, "left")
      for g = 0, 2 do u:insert{ id = long(g, size), name = "n" .. g } end
      for k = 1, 4 do t:insert{ k = k, g = k % 2 } end
      assert.same({ k = 4, g = 0 }, j:get{ k = 4 })
      p:close()

      p, t, u, j = joined(dir, function(r) return long(r.k % 3, size) end, through, "left")
      local log = H.record(j)
      t:insert{ k = 5, g = 1 }
      assert.same({ "UPDATE 2", "UPDATE 3", "UPDATE 4", "INSERT 5" }, H.verbs(log))
      assert.same({ k = 4, g = 0 }, log[3][4])
      assert.same({ k = 4, g = 0, id = long(1, size), name = "n1" }, log[3][3])
      p:close()
    end)
  end)
end
