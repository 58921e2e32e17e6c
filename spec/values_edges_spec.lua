-- Values, keys and rows at their edges: keyed maps and selects, -0.0 and NaN
-- in rows, distinct and keyless tables (core/derive.c, core/row.c, core/key.c).
local runnel = require "runnel"
local H = require "helper"

describe("a keyed map", function()
  local p
  after_each(function() if p then p:close() end p = nil; H.cleanup() end)

  local function keyed(q)
    local t = q:table("t", { {"id","int"}, {"k","string"}, {"v","int"}, key = "id" })
    local m = t:map(function(r) return { k = r.k, id = r.id, v = r.v } end,
                    { {"k","string"}, {"id","int"}, {"v","int"}, key = "k" }, "m")
    return t, m
  end

  it("gives a row whose key changes as a DELETE of the old key and an INSERT of the new one", function()
    local dir = H.tmpdir()
    p = runnel.open()
    local t, m = keyed(p)
    local log = H.record(m)
    m:sink(runnel.ndjson(dir .. "/m.ndjson"))
    t:insert{ id = 1, k = "a", v = 1 }
    t:update{ id = 1, v = 2 }          -- same key: an UPDATE
    t:update{ id = 1, k = "b" }        -- key moves
    assert.same({ "INSERT 1", "UPDATE 1", "DELETE 1", "INSERT 1" }, H.verbs(log))
    assert.same({ k = "a", id = 1, v = 2 }, log[3][4])
    assert.same({ k = "b", id = 1, v = 2 }, log[4][3])
    assert.equal('{"verb":"INSERT","k":"a","id":1,"v":1}\n' ..
                 '{"verb":"UPDATE","k":"a","id":1,"v":2}\n' ..
                 '{"verb":"DELETE","k":"a"}\n' ..
                 '{"verb":"INSERT","k":"b","id":1,"v":2}\n', H.read(dir .. "/m.ndjson"))
  end)

  it("gives a select whose declared key changes as a DELETE and an INSERT", function()
    p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"name","string"}, key = "id" })
    local s = t:select{ "name", "id", key = "name" }
    local log = H.record(s)
    t:insert{ id = 1, name = "ann" }
    t:update{ id = 1, name = "bob" }
    assert.same({ "INSERT 1", "DELETE 1", "INSERT 1" }, H.verbs(log))
  end)
end)

describe("-0.0 and NaN in rows", function()
  local p
  after_each(function() if p then p:close() end p = nil end)
  local nan, other_nan = 0/0, -(0/0) -- two NaNs of different bits on x86

  it("are one row in a distinct: -0.0 equals 0.0, and every NaN is one value", function()
    p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"x","float"}, key = "id" })
    local d = t:select{ "x" }:distinct()
    t:insert{ id = 1, x = 0.0 }
    t:insert{ id = 2, x = -0.0 }
    t:insert{ id = 3, x = nan }
    t:insert{ id = 4, x = other_nan }
    assert.equal(2, d:count())
    t:delete{ id = 1 }
    t:delete{ id = 3 }
    assert.equal(2, d:count())
    t:delete{ id = 2 }
    t:delete{ id = 4 }
    assert.equal(0, d:count())
  end)

  it("match in a keyless table whichever sign or NaN the delete gives", function()
    p = runnel.open()
    local t = p:table("kl", { {"x","float"}, {"l","list", null = true} })
    t:insert{ x = -0.0 }
    t:insert{ x = nan, l = { nan, -0.0 } }
    t:delete{ x = 0.0 }
    t:delete{ x = other_nan, l = { other_nan, 0.0 } }
    assert.equal(0, t:count())
  end)

  it("make no change when a row is set to the value it holds", function()
    p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"x","float"}, key = "id" })
    local log = H.record(t)
    t:insert{ id = 1, x = 0.0 }
    t:upsert{ id = 1, x = -0.0 }
    t:insert{ id = 2, x = nan }
    t:update{ id = 2, x = other_nan }
    assert.same({ "INSERT 1", "INSERT 2" }, H.verbs(log))
    local x = t:get(1).x
    assert.equal(math.huge, 1 / x)  -- stored as 0.0
  end)

  it("leave an aggregate's float result as 0.0 when it rounds to -0.0", function()
    p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"x","float"}, key = "id" })
    local a = t:aggregate{ mean = runnel.avg("x"), name = "a" }
    t:insert{ id = 1, x = -5e-324 }
    t:insert{ id = 2, x = 0.0 }
    t:insert{ id = 3, x = 0.0 }
    local mean = a:rows()().mean
    assert.equal(0, mean)
    assert.equal(math.huge, 1 / mean)
  end)

  it("are kept out of keys: NaN is an error naming the relation, -0.0 finds 0.0", function()
    p = runnel.open()
    local t = p:table("fk", { {"k","float"}, {"v","int"}, key = "k" })
    t:insert{ k = 0.0, v = 1 }
    assert.equal(1, t:get(-0.0).v)
    assert.matches("fk: .*NaN", H.error_of(t.insert, t, { k = nan, v = 2 }))
    assert.equal(1, t:count())
  end)
end)
