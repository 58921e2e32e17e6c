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

  it("refuses a group that ends with a key two input rows give, rolling it back (MAPKEY-1)", function()
    p = runnel.open()
    local t, m = keyed(p)
    local log = H.record(m)
    t:insert{ id = 1, k = "a", v = 1 }
    p:begin()
    t:insert{ id = 3, k = "c", v = 3 }
    t:insert{ id = 2, k = "a", v = 2 }
    local err = H.error_of(p.commit, p)
    assert.equal('m: key (k = "a") is given by row id 1 of t already; row id 3 (id = 2) gives it too: ' ..
                 'a keyed map gives each key from one input row', err)
    assert.is_false(p:in_group())
    assert.is_nil(t:get(2))
    assert.is_nil(t:get(3))
    assert.equal(1, t:count())
    -- a key moved away or deleted is free again, in the same group too
    p:batch(function()
      t:update{ id = 1, k = "b" }
      t:insert{ id = 2, k = "a", v = 2 }
    end)
    t:delete{ id = 1 }
    t:insert{ id = 3, k = "b", v = 3 }
    err = H.error_of(t.update, t, { id = 3, k = "a" })
    assert.matches('^m: key %(k = "a"%) is given by row id 2 of t already; row id 3 %(id = 3%) gives it too', err)
    assert.same({ a = 2, b = 3 }, (function()
      local out = {}
      for r in m:rows() do out[r.k] = r.id end
      return out
    end)())
    assert.same({ "INSERT 1", "DELETE 1", "INSERT 1", "INSERT 2", "DELETE 1", "INSERT 3" }, H.verbs(log))
  end)

  it("lets rows swap keys within a group, and a claimed key go to its claimer (MAPKEY-1)", function()
    p = runnel.open()
    local t, m = keyed(p)
    local log = H.record(m)
    t:insert{ id = 1, k = "a", v = 1 }
    t:insert{ id = 2, k = "b", v = 2 }
    p:batch(function()
      t:update{ id = 1, k = "b" }
      t:update{ id = 2, k = "a" }
    end)
    p:batch(function()
      t:insert{ id = 3, k = "a", v = 3 } -- claims a from row 2 …
      t:update{ id = 2, k = "c" }        -- … which lets it go
    end)
    local held = {}
    for r in m:rows() do held[r.k] = r.id end
    assert.same({ a = 3, b = 1, c = 2 }, held)
    assert.matches("^m: key %(k = \"c\"%) is given by row id 2 of t already; row id 1 %(id = 1%) gives it too",
                   H.error_of(p.batch, p, function()
                     t:update{ id = 1, k = "c" }
                     t:update{ id = 3, k = "b" } -- b is free: c is still held twice at the end
                   end))
    assert.equal("b", t:get(1).k)
    p:batch(function() -- a claim dropped by its claimer settles nothing
      t:update{ id = 1, k = "c" }
      t:update{ id = 1, k = "d" }
    end)
    held = {}
    for r in m:rows() do held[r.k] = r.id end
    assert.same({ a = 3, c = 2, d = 1 }, held)
    assert.equal(13, #log)
  end)

  it("refuses a select keyed by a column two rows share", function()
    p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"name","string"}, key = "id" })
    local s = t:select({ "name", "id", key = "name" }, "by_name")
    t:insert{ id = 1, name = "ann" }
    assert.matches('^by_name: key %(name = "ann"%) is given by row id 1 of t already; row id 2 %(id = 2%)',
                   H.error_of(t.insert, t, { id = 2, name = "ann" }))
    t:insert{ id = 2, name = "bob" }
    assert.equal(2, #(function() local out = {} for r in s:rows() do out[#out + 1] = r end return out end)())
  end)

  it("refuses a declaration over rows that already share a key, naming the map", function()
    p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"k","string"}, {"v","int"}, key = "id" })
    t:insert{ id = 1, k = "a", v = 1 }
    t:insert{ id = 2, k = "a", v = 2 }
    local err = H.error_of(t.map, t, function(r) return r end,
                           { {"id","int"}, {"k","string"}, {"v","int"}, key = "k" }, "m")
    assert.matches('^m: key %(k = "a"%) is given by row id 1 of t already; row id 2 %(id = 2%)', err)
    assert.is_nil(p:relation("m"))
    t:update{ id = 2, k = "b" } -- the pipeline goes on
  end)

  it("keeps its keys across a reopen, and rebuilds them after groups it did not see (MAPKEY-2)", function()
    local path = H.tmpdir() .. "/state"
    p = runnel.open(path)
    local t = keyed(p)
    t:insert{ id = 1, k = "a", v = 1 }
    p:close()
    p = runnel.open(path)
    t = keyed(p)
    assert.matches("gives it too", H.error_of(t.insert, t, { id = 2, k = "a", v = 2 }))
    p:close()
    p = runnel.open(path) -- groups without the map: its keys are stale
    t = p:table("t", { {"id","int"}, {"k","string"}, {"v","int"}, key = "id" })
    t:update{ id = 1, k = "b" }
    t:insert{ id = 2, k = "a", v = 2 }
    p:close()
    p = runnel.open(path)
    t = keyed(p)
    assert.matches('^m: key %(k = "b"%) is given by row id 1 of t already; row id 3 %(id = 3%)',
                   H.error_of(t.insert, t, { id = 3, k = "b", v = 3 }))
    t:insert{ id = 3, k = "c", v = 3 }
  end)

  it("holds keys longer than LMDB's key limit, and refuses NaN in a key", function()
    p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"k","string"}, {"x","float", null = true}, key = "id" })
    local m = t:map(function(r) return { k = r.k, x = r.x or 0.0, id = r.id } end,
                    { {"k","string"}, {"x","float"}, {"id","int"}, key = { "k", "x" } }, "m")
    local long = ("x"):rep(700)
    t:insert{ id = 1, k = long .. "1" }
    t:insert{ id = 2, k = long .. "2" }
    assert.matches('^m: key %(k = "xxx.*%.%.%."%) is given by row id 1 of t already; row id 3 %(id = 3%)',
                   H.error_of(t.insert, t, { id = 3, k = long .. "1" }))
    t:delete{ id = 1 }
    t:insert{ id = 3, k = long .. "1" }
    assert.equal("m: column \"x\": NaN cannot be part of a key", H.error_of(t.insert, t, { id = 4, k = "n", x = 0/0 }))
    t:insert{ id = 4, k = "n", x = 0.0 }
    assert.matches("gives it too", H.error_of(t.insert, t, { id = 5, k = "n", x = -0.0 }))
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

  it("keep the sign of a zero, and make no change when a NaN is set to another NaN", function()
    p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"x","float"}, key = "id" })
    local log = H.record(t)
    t:insert{ id = 1, x = 0.0 }
    t:upsert{ id = 1, x = -0.0 }        -- a value of its own (1/x), as in lua_reentry_spec
    t:insert{ id = 2, x = nan }
    t:update{ id = 2, x = other_nan }
    assert.same({ "INSERT 1", "UPDATE 1", "INSERT 2" }, H.verbs(log))
    assert.equal(-math.huge, 1 / t:get(1).x)
  end)

  it("give a keyless delete and a distinct the row as it is held", function()
    p = runnel.open()
    local t = p:table("kl", { {"x","float"} })
    local d = t:distinct()
    local log, dlog = H.record(t), H.record(d)
    t:insert{ x = -0.0 }
    t:insert{ x = 0.0 }
    t:delete{ x = 0.0 }                 -- the first equal row: the -0.0 one
    assert.equal(-math.huge, 1 / log[3][4].x)
    assert.equal(1, d:count())
    t:update({ x = -0.0 }, { x = -0.0 }) -- finds the 0.0 row; sets it to -0.0
    t:delete{ x = -0.0 }
    assert.same({ "INSERT 1" , "DELETE 1" }, H.verbs(dlog))
    assert.equal(math.huge, 1 / dlog[1][3].x)  -- a distinct holds 0.0 for every zero (values_edges17_spec)
    assert.equal(math.huge, 1 / dlog[2][4].x) -- the row its INSERT gave
    assert.equal(0, t:count())
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
