-- A rebuild at declaration (a new relation over existing rows, or one whose
-- input changed) may outgrow LMDB's map: the map grows and the declaration
-- runs again, as a group's does, instead of failing with MDB_MAP_FULL.
local runnel = require "runnel"
local H = require "helper"

local COLS = { {"k","int"}, {"s","string"}, key = "k" }
local MAP = 1024 * 1024 -- 1 MiB: the rows below fill it more than once

local function filled(dir, keep)
  local p = runnel.open{ path = dir, map_size = MAP, notes = false }
  local t = p:table("t", COLS)
  local pad = string.rep("x", 100)
  for b = 0, 7 do
    p:batch(function() for k = b * 1000 + 1, b * 1000 + 1000 do t:insert{ k = k, s = pad .. k } end end)
  end
  p:close()
end

describe("a rebuild that outgrows the map", function()
  after_each(H.cleanup)

  it("grows it: an index declared over existing rows", function()
    local dir = H.tmpdir()
    filled(dir)
    local p = runnel.open{ path = dir, map_size = MAP, notes = false }
    local t = p:table("t", COLS)
    local ix = t:index{ "s", "desc", name = "ix" }
    assert.equal(8000, ix:count())
    assert.equal(999, (ix:range{ limit = 1 }()).k)
    t:insert{ k = 9000, s = "zz" }
    assert.equal(9000, (ix:range{ limit = 1 }()).k)
    p:close()
  end)

  it("grows it: an index rebuilt because the filter it reads changed", function()
    local dir = H.tmpdir()
    local function declare(limit)
      local p = runnel.open{ path = dir, map_size = MAP, notes = false }
      local t = p:table("t", COLS)
      local ix = t:filter(function(r) return r.k > limit end, "f"):index{ "s", name = "ix" }
      return p, t, ix
    end
    local p, t, ix = declare(0)
    p:close()
    filled(dir)
    p, t, ix = declare(0)
    assert.equal(8000, ix:count())
    p:close()
    p, t, ix = declare(4000)
    assert.equal(4000, ix:count())
    p:close()
  end)

  it("grows it: a store written again from its relation", function()
    local dir = H.tmpdir()
    filled(dir)
    local p = runnel.open{ path = dir, map_size = MAP, notes = false }
    local t = p:table("t", COLS)
    t:sink(runnel.store("ts"))
    p:close()
    local n = 0
    for _ in runnel.attach(dir, "ts"):rows() do n = n + 1 end
    assert.equal(8000, n)
  end)
end)
