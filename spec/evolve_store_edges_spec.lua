-- rel:sink(runnel.store(name)) keeps rel's rows: a store that was not
-- declared for some groups, or that starts on a relation holding rows, is
-- written again from the relation when declared (it had only the changes
-- of the groups it saw); a stream's store is its events from then on.
local runnel = require "runnel"
local H = require "helper"

local COLS = { {"k","int"}, {"v","int"}, key = "k" }

local function store_ks(dir, name)
  local ks = {}
  for row in runnel.attach(dir, name):rows() do ks[#ks + 1] = row.k .. "=" .. row.v end
  table.sort(ks)
  return table.concat(ks, " ")
end

describe("a store", function()
  after_each(H.cleanup)

  it("left out of some groups is written again from its relation", function()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", COLS)
    t:sink(runnel.store("ts"))
    t:insert{ k = 1, v = 1 }
    p:close()
    p = runnel.open{ path = dir, notes = false }
    t = p:table("t", COLS) -- no store this run
    t:insert{ k = 2, v = 2 }
    t:update{ k = 1, v = 10 }
    p:close()
    p = runnel.open{ path = dir, notes = false }
    t = p:table("t", COLS)
    t:sink(runnel.store("ts"))
    assert.equal("1=10 2=2", store_ks(dir, "ts"))
    t:delete{ k = 2 }
    assert.equal("1=10", store_ks(dir, "ts"))
    p:close()
  end)

  it("starting on a relation that has rows holds them", function()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", COLS)
    t:insert{ k = 1, v = 1 }
    p:close()
    p = runnel.open{ path = dir, notes = false }
    t = p:table("t", COLS)
    t:sink(runnel.store("ts"))
    assert.equal("1=1", store_ks(dir, "ts"))
    p:close()
  end)

  it("declared in every group is not written again", function()
    local dir = H.tmpdir()
    local calls = { n = 0 } -- a table: its contents are not part of the filter's fingerprint
    local function declare()
      local p = runnel.open{ path = dir, notes = false }
      local t = p:table("t", COLS)
      t:filter(function() calls.n = calls.n + 1; return true end, "f"):sink(runnel.store("fs"))
      return p, t
    end
    local p, t = declare()
    t:insert{ k = 1, v = 1 }
    p:close()
    calls.n = 0
    p, t = declare()
    assert.equal(0, calls.n) -- in step: not read again through the filter
    t:insert{ k = 2, v = 2 }
    assert.equal("1=1 2=2", store_ks(dir, "fs"))
    p:close()
  end)
end)
