-- Values at their edges, round 17. A distinct holds one row per class of
-- equal rows, and -0.0 equals 0.0: it showed the sign of whichever copy
-- came first, for as long as any copy stayed, so deleting the -0.0 row
-- left it showing -0.0 though only 0.0 rows remained (and a rebuild kept
-- it). Its rows now hold 0.0 for every zero, as an aggregate's group
-- values and SQLite's SELECT DISTINCT do: the same rows whatever the order
-- the copies came in.
local runnel = require "runnel"
local H = require "helper"

local function sign(x) return 1 / x > 0 and "+" or "-" end

describe("a distinct over -0.0 and 0.0", function()
  local p, dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function() if p then p:close() end p = nil H.cleanup() end)

  local function declare(without_distinct)
    local t = p:table("t", { {"id","int"}, {"x","float"}, {"l","list", null = true}, key = "id" })
    if without_distinct then return t end
    return t, t:select{ "x", "l" }:distinct("d")
  end

  it("holds 0.0 whichever sign came first, as an aggregate's group value does", function()
    p = runnel.open(dir .. "/s")
    local t, d = declare()
    local a = t:aggregate{ by = "x", n = runnel.count(), name = "a" }
    local log = H.record(d)
    t:insert{ id = 1, x = -0.0, l = { -0.0 } }
    t:insert{ id = 2, x = 0.0, l = { 0.0 } }
    t:delete{ id = 1 }                 -- only a 0.0 row is left
    assert.equal(1, d:count())
    for r in d:rows() do assert.equal("+", sign(r.x)); assert.equal("+", sign(r.l[1])) end
    for r in a:rows() do assert.equal("+", sign(r.x)) end
    assert.same({ "INSERT 1" }, H.verbs(log))
    assert.equal("+", sign(log[1][3].x))
    assert.equal("+", sign(log[1][3].l[1]))
    t:delete{ id = 2 }
    assert.same({ "INSERT 1", "DELETE 1" }, H.verbs(log))
    assert.equal("+", sign(log[2][4].x)) -- the row its INSERT gave
    assert.equal(0, d:count())
  end)

  it("holds 0.0 when built over existing rows, and across a reopen", function()
    p = runnel.open(dir .. "/s")
    local t = declare(true)
    t:insert{ id = 1, x = -0.0, l = { 1.5, -0.0 } }
    p:close()
    p = runnel.open(dir .. "/s")
    local _, d = declare()                   -- built from t's rows
    for r in d:rows() do assert.equal("+", sign(r.x)); assert.equal("+", sign(r.l[2])) end
    assert.equal("-", sign(p:relation("t"):get(1).x)) -- the table's row keeps its sign
    p:relation("t"):insert{ id = 2, x = 0.0, l = { 1.5, 0.0 } }
    p:relation("t"):delete{ id = 1 }
    p:close()
    p = runnel.open(dir .. "/s")
    _, d = declare()
    assert.equal(1, d:count())
    for r in d:rows() do assert.equal("+", sign(r.x)); assert.equal("+", sign(r.l[2])) end
  end)
end)
