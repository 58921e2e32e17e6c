-- A top rebuilt at declaration tells its sinks what the rebuild changed
-- (core/evolve_log.c), as joins, aggregates, distincts and indexes do: a
-- leaderboard kept from the top's change log stays equal to the top.
local runnel = require "runnel"
local H = require "helper"

local T = { {"k","int"}, {"v","int"}, {"g","int"}, key = "k" }

local function declared(dir, fn, n)
  local p = runnel.open{ path = dir, notes = false }
  local t = p:table("t", T)
  local f = t:filter(function(r) return fn(r) end, "kept")
  local top = f:top{ n = n, order = { {"v", "desc"} }, name = "board" }
  return p, t, top
end

local function copy_of(rel)
  local copy = {}
  rel:sink(function(verb, row, old)
    if verb == "DELETE" then copy[old.k] = nil else copy[row.k] = row.rank end
  end)
  return copy
end

local function ranks(rel)
  local out = {}
  for row in rel:rows() do out[row.k] = row.rank end
  return out
end

describe("a top rebuilt at declaration", function()
  after_each(H.cleanup)

  for _, case in ipairs{
    { "its input's function changed", function(r) return r.k % 2 == 0 end, 3 },
    { "its declaration changed (n)", function(r) return r.g >= 0 end, 2 },
  } do
    it("tells its sinks what changed when " .. case[1], function()
      local dir = H.tmpdir()
      local p, t, top = declared(dir, function(r) return r.g >= 0 end, 3)
      local copy = copy_of(top)
      for k = 1, 6 do t:insert{ k = k, v = 10 * k, g = k % 3 } end
      assert.same(ranks(top), copy)
      p:close()
      p, t, top = declared(dir, case[2], case[3])
      local after = {}
      for k, rank in pairs(copy) do after[k] = rank end
      top:sink(function(verb, row, old)
        if verb == "DELETE" then after[old.k] = nil else after[row.k] = row.rank end
      end)
      t:insert{ k = 100, v = -1, g = 0 } -- ranks last: no change of the board of its own
      assert.same(ranks(top), after)
      assert.are_not.same(copy, after)
      p:close()
    end)
  end
end)
