-- runnel.attach in the process that writes the state, with sync = false:
-- the attach borrows the pipeline's LMDB environment, and the groups the
-- pipeline committed but still carries in its open LMDB transaction are
-- committed before each read outside a group, so the reader sees every
-- group p:seq() counts. Inside an open group the reader sees what LMDB
-- holds: whole groups only, never the open one.
local runnel = require "runnel"
local H = require "helper"

local function count(att)
  local n = 0
  for _ in att:rows() do n = n + 1 end
  return n
end

describe("attach of a carrying pipeline's state", function()
  after_each(H.cleanup)

  it("sees every committed group: count, rows, get and an index range", function()
    local d = H.tmpdir()
    local p = runnel.open{ path = d, sync = false, notes = false }
    local t = p:table("t", { { "k", "int" }, { "v", "int" }, key = "k" })
    local by_v = t:index{ "v" }
    t:aggregate{ by = "v", n = runnel.count(), name = "totals" }
    local att, idx, agg = runnel.attach(d, "t"), runnel.attach(d, by_v:name()), runnel.attach(d, "totals")
    t:insert{ k = 1, v = 10 }
    assert.are.equal(1, p:seq())
    assert.are.equal(1, att:count())
    t:insert{ k = 2, v = 10 }
    assert.are.equal(2, count(att))
    t:insert{ k = 3, v = 30 }
    assert.are.same({ k = 3, v = 30 }, att:get(3))
    t:update{ k = 1, v = 5 }
    local vs = {}
    for row in idx:range{} do vs[#vs + 1] = row.v end
    assert.are.same({ 5, 10, 30 }, vs)
    assert.are.same({ v = 10, n = 1 }, agg:get(10))
    -- a fresh attach too, and a reopen finds the same
    assert.are.equal(3, runnel.attach(d, "t"):count())
    p:close()
    assert.are.equal(3, runnel.attach(d, "t"):count())
  end)

  it("inside an open group sees whole groups only, never the open one", function()
    local d = H.tmpdir()
    local p = runnel.open{ path = d, sync = false, notes = false }
    local t = p:table("t", { { "k", "int" }, key = "k" })
    local att = runnel.attach(d, "t")
    t:insert{ k = 1 }
    assert.are.equal(1, att:count()) -- the carried group is committed by the read
    p:begin()
    t:insert{ k = 2 }
    assert.are.equal(1, att:count())
    assert.is_nil(att:get(2))
    p:commit()
    assert.are.equal(2, att:count())
    p:begin()
    t:insert{ k = 3 }
    p:rollback()
    assert.are.equal(2, att:count())
    p:close()
  end)

  it("a read from a sink of the same pipeline sees the groups before the one committing", function()
    local d = H.tmpdir()
    local p = runnel.open{ path = d, sync = false, notes = false }
    local t = p:table("t", { { "k", "int" }, key = "k" })
    local att = runnel.attach(d, "t")
    local seen = {}
    t:sink(function() seen[#seen + 1] = att:count() end)
    t:insert{ k = 1 }
    t:insert{ k = 2 }
    t:insert{ k = 3 }
    -- each sink ran inside its group: the earlier groups were carried, not
    -- in LMDB, and could not be committed without the open one
    for _, n in ipairs(seen) do assert.is_true(n <= 2) end
    assert.are.equal(3, att:count())
    p:close()
  end)
end)

describe("attach of an index", function()
  after_each(H.cleanup)

  it("gets a row by its input's key (an index's rows are its input's)", function()
    local d = H.tmpdir()
    local p = runnel.open{ path = d, notes = false }
    local t = p:table("players", { { "id", "int" }, { "score", "int" }, key = "id" })
    t:index{ "score", "desc", name = "by_score" }
    t:insert{ id = 4, score = 3 }
    t:insert{ id = 5, score = 9 }
    p:close()
    local att = runnel.attach(d, "by_score")
    assert.are.same({ id = 4, score = 3 }, att:get(4))
    assert.are.same({ id = 5, score = 9 }, att:get{ id = 5 })
    assert.is_nil(att:get(6))
    local cols, kind = att:columns()
    assert.are.equal("index", kind)
    assert.is_true(cols[1].key)
    local ids = {}
    for row in att:rows() do ids[#ids + 1] = row.id end
    assert.are.same({ 5, 4 }, ids)
    assert.are.equal(1, att:rank(9))
  end)
end)
