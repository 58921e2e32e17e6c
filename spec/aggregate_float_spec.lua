-- Float sum and avg retract exactly (issue 10, defect 9; AGG-1 for floats):
-- any sequence of inserts and deletes gives the exact sum of the rows
-- present, rounded once; int sums stay exact ints or fail loudly.
local runnel = require "runnel"
local H = require "helper"

describe("float sum and avg", function()
  local p, t, a
  before_each(function()
    p = runnel.open()
    t = p:table("t", { {"id","int"}, {"x","float", null = true}, key = "id" })
    a = t:aggregate{ s = runnel.sum("x"), a = runnel.avg("x") }
  end)
  after_each(function() p:close() end)

  local function result() return a:rows()() end

  it("recovers from an infinity once it is deleted", function()
    t:insert{ id = 1, x = 1.0 }
    t:insert{ id = 2, x = math.huge }
    assert.same({ s = math.huge, a = math.huge }, result())
    t:delete{ id = 2 }
    assert.same({ s = 1.0, a = 1.0 }, result())
    t:insert{ id = 3, x = -math.huge }
    t:insert{ id = 4, x = math.huge }
    local r = result()
    assert.is_true(r.s ~= r.s and r.a ~= r.a)   -- inf - inf: NaN while both are there
    t:delete{ id = 4 }
    assert.same({ s = -math.huge, a = -math.huge }, result())
    t:delete{ id = 3 }
    assert.same({ s = 1.0, a = 1.0 }, result())
  end)

  it("recovers from an overflow once the big rows go", function()
    t:insert{ id = 1, x = 1e308 }
    t:insert{ id = 2, x = 1e308 }
    t:insert{ id = 3, x = 1.0 }
    assert.equal(math.huge, result().s)
    assert.equal(2 * (1e308 / 3), result().a)  -- (2e308 + 1) / 3, rounded once: no overflow
    t:delete{ id = 1 }
    t:delete{ id = 2 }
    assert.same({ s = 1.0, a = 1.0 }, result())
  end)

  it("does not drift when a large row leaves a small one", function()
    t:insert{ id = 1, x = 1e16 }
    t:insert{ id = 2, x = 1.0 }
    t:delete{ id = 1 }
    assert.same({ s = 1.0, a = 1.0 }, result())
    t:update{ id = 2, x = 0.1 }
    t:insert{ id = 3, x = 0.2 }
    assert.equal(0.30000000000000004, result().s) -- 0.1 + 0.2 exactly, rounded once
    t:insert{ id = 4, x = 1e300 }
    t:delete{ id = 4 }
    t:delete{ id = 3 }
    assert.same({ s = 0.1, a = 0.1 }, result())
  end)

  it("gives the sum of the rows present, whatever the order", function()
    local xs = { 1e308, -1e308, 3.5, 1e-320, -7.25, 1e16, 2^-1074, math.huge, -math.huge, 0 / 0, 123.456 }
    local seed = 1
    local function rand(n) seed = (seed * 1103515245 + 12345) % 2^31; return seed % n + 1 end
    local present = {}
    for step = 1, 300 do
      local id = rand(12)
      if present[id] then t:delete{ id = id }; present[id] = nil
      else local x = xs[rand(#xs)]; t:insert{ id = id, x = x }; present[id] = x end
      if step % 25 == 0 then
        local q = runnel.open()
        local fresh = q:table("t", { {"id","int"}, {"x","float"}, key = "id" })
        local b = fresh:aggregate{ s = runnel.sum("x"), a = runnel.avg("x") }
        for i = 1, 12 do if present[i] then fresh:insert{ id = i, x = present[i] } end end
        local want, got = b:rows()(), result()
        q:close()
        assert.equal(tostring(want and want.s), tostring(got and got.s))
        assert.equal(tostring(want and want.a), tostring(got and got.a))
      end
    end
  end)

  it("keeps its exact state across a reopen", function()
    local dir = H.tmpdir()
    local q = runnel.open(dir)
    local u = q:table("u", { {"id","int"}, {"x","float"}, key = "id" })
    u:aggregate{ s = runnel.sum("x"), a = runnel.avg("x"), name = "agg" }
    u:insert{ id = 1, x = 1e16 }
    u:insert{ id = 2, x = 1.0 }
    u:insert{ id = 3, x = math.huge }
    q:close()
    q = runnel.open(dir)
    u = q:table("u", { {"id","int"}, {"x","float"}, key = "id" })
    local b = u:aggregate{ s = runnel.sum("x"), a = runnel.avg("x"), name = "agg" }
    u:delete{ id = 1 }
    u:delete{ id = 3 }
    assert.same({ s = 1.0, a = 1.0 }, b:rows()())
    q:close()
    H.cleanup()
  end)
end)

describe("int sum and avg", function()
  local p, t
  before_each(function()
    p = runnel.open()
    t = p:table("t", { {"id","int"}, {"i","int"}, key = "id" })
  end)
  after_each(function() p:close() end)

  it("averages exactly, rounding once", function()
    local a = t:aggregate{ a = runnel.avg("i") }
    t:insert{ id = 1, i = math.maxinteger }
    t:insert{ id = 2, i = math.maxinteger - 2 }
    assert.equal(2.0^63, a:rows()().a)         -- not 2^63 - 1 rounded twice, not an overflow
    t:delete{ id = 1 }
    t:delete{ id = 2 }
    t:insert{ id = 3, i = math.maxinteger }    -- neither is a double: summed as ints, exactly
    t:insert{ id = 4, i = 2 - math.maxinteger }
    assert.equal(1.0, a:rows()().a)
  end)

  it("fails an overflowing sum, naming the aggregate and the column, and rolls back", function()
    local a = t:aggregate{ s = runnel.sum("i") }
    t:insert{ id = 1, i = math.maxinteger }
    assert.equal('t.aggregate: sum "s" of column "i" overflows 64 bits',
                 H.error_of(t.insert, t, { id = 2, i = 1 }))
    assert.is_false(p:in_group())
    assert.is_nil(t:get{ id = 2 })
    assert.same({ s = math.maxinteger }, a:rows()())
  end)

  it("does not fail an update whose result fits", function()
    local a = t:aggregate{ s = runnel.sum("i") }
    t:insert{ id = 1, i = math.maxinteger }
    t:insert{ id = 2, i = -1 }
    t:insert{ id = 3, i = 1 }
    t:update{ id = 2, i = -2 }                 -- without row 2 the rest would not fit
    assert.same({ s = math.maxinteger - 1 }, a:rows()())
  end)
end)
