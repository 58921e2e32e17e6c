-- Lookups whose source misbehaves (adversarial review): a row of another
-- key, rows of the wrong shape, errors, yields and changes from inside the
-- source. Each fails its group naming the lookup; nothing committed is lost.
local runnel = require "runnel"
local H = require "helper"

describe("a lookup source that misbehaves", function()
  local p, orders, answer, calls, seen
  before_each(function()
    p = runnel.open()
    orders = p:table("orders", { {"id","int"}, {"sku","string"}, key = "id" })
    calls = 0
    local prices = p:lookup("prices", { {"sku","string"}, {"price","float"}, key = "sku",
      source = function(sku) calls = calls + 1; return answer(sku) end,
      cache = { ttl = 60, size = 10, missing = true } })
    local priced = orders:join(prices, { on = "sku", kind = "left",
                                         joiner = function(l, r) return { id = l.id, psku = r and r.sku, price = r and r.price } end,
                                         columns = { {"id","int"}, {"psku","string", null = true}, {"price","float", null = true}, key = "id" } })
    seen = H.record(priced)
    answer = function() return { price = 1.5 } end
    orders:insert{ id = 1, sku = "a" }
  end)
  after_each(function() p:close() end)

  -- the committed state after a refused change: order 1 priced, nothing more
  local function unchanged()
    assert.is_false(p:in_group())
    assert.equal(1, orders:count())
    assert.equal(1, #seen)
  end

  it("refuses a row of another key instead of joining and caching it under the key asked", function()
    answer = function() return { sku = "b", price = 9 } end
    assert.equal('prices: source returned a bad row for key (sku = "x"): its key is (sku = "b")',
                 H.error_of(function() orders:insert{ id = 2, sku = "x" } end))
    unchanged()
    answer = function(sku) return { sku = sku, price = 2 } end   -- nothing wrong was cached
    orders:insert{ id = 2, sku = "x" }
    assert.same({ id = 2, psku = "x", price = 2.0 }, seen[2][3])
  end)

  it("takes a row whose key is the one asked in another form (7.0 for the int 7)", function()
    local q = runnel.open()
    local o = q:table("o", { {"id","int"}, {"n","int"}, key = "id" })
    local l = q:lookup("l", { {"n","int"}, {"v","string"}, key = "n", source = function(n) return { n = n + 0.0, v = "x" .. n } end })
    local got = H.record(o:join(l, { on = "n" }))
    o:insert{ id = 1, n = 7 }
    assert.equal("x7", got[1][3].v)
    q:close()
  end)

  it("names the lookup, then the column, for a row of the wrong shape", function()
    for _, case in ipairs{
      { function() return { price = "cheap" } end, 'prices: source returned a bad row for key (sku = "x"): column "price": expected float, got string' },
      { function() return 42 end, 'prices: source returned a bad row for key (sku = "x"): a row is a table keyed by column names, got number' },
      { function(sku) return { sku = sku } end, 'prices: source returned a bad row for key (sku = "x"): column "price": missing (the column is not nullable)' },
      { function() return { price = 1, extra = 2 } end, 'prices: source returned a bad row for key (sku = "x"): unknown column "extra"' },
    } do
      answer = case[1]
      assert.equal(case[2], H.error_of(function() orders:insert{ id = 2, sku = "x" } end))
      unchanged()
    end
  end)

  it("fails the group for an error, a yield or a change made inside the source, and asks again next time", function()
    for _, case in ipairs{
      { function() error("db down") end, "prices: source: .*: db down" },
      { function() coroutine.yield(1) end, "prices: source: attempt to yield" },
      { function() orders:insert{ id = 99, sku = "z" } end, "prices: source: .*tables cannot be changed from inside a callback" },
      { function() p:commit() end, "prices: source: .*commit: not from inside a callback" },
    } do
      answer = case[1]
      local before = calls
      assert.matches(case[2], H.error_of(function() orders:insert{ id = 2, sku = "x" } end))
      assert.equal(before + 1, calls)
      unchanged()
    end
    answer = function() return { price = 3 } end
    orders:insert{ id = 2, sku = "x" }
    assert.same({ id = 2, psku = "x", price = 3.0 }, seen[2][3])
  end)
end)

describe("a SQLite lookup source with rows that do not fit", function()
  teardown(H.cleanup)

  it("names the lookup, the key and the column, releases its read, and refuses a row of another key", function()
    local dir = H.tmpdir()
    local db = dir .. "/shop.db"
    local _, err = H.sh(("sqlite3 %s \"create table products (sku text primary key collate nocase, price real, tags text);" ..
                         " insert into products values ('a', 'cheap', null), ('b', 1.5, 'not json'), ('C', 2.5, null);\""):format(db))
    assert.equal("", err)
    local p = runnel.open()
    local orders = p:table("orders", { {"id","int"}, {"sku","string"}, key = "id" })
    local products = p:lookup("products", { {"sku","string"}, {"price","float"}, {"tags","list", null = true},
      key = "sku", source = runnel.sqlite_source(db, "products") })
    orders:join(products, { on = "sku", kind = "left" })
    assert.equal('products: source returned a bad row for key (sku = "a"): column "price": expected float, got string',
                 H.error_of(function() orders:insert{ id = 1, sku = "a" } end))
    assert.matches('^products: source returned a bad row for key %(sku = "b"%): ',
                   H.error_of(function() orders:insert{ id = 1, sku = "b" } end))
    -- the failed fetch left no read open on the database: a writer goes ahead at once
    local _, werr, code = H.sh(("sqlite3 -cmd '.timeout 0' %s \"update products set price = 3 where sku = 'b'\""):format(db))
    assert.equal(0, code, werr)
    assert.equal('products: source returned a bad row for key (sku = "c"): its key is (sku = "C")',
                 H.error_of(function() orders:insert{ id = 1, sku = "c" } end))
    assert.equal(0, orders:count())
    p:close()
  end)
end)

describe("a lookup's cache options", function()
  it("are refused at the user's line, naming the lookup, when they are not a size >= 1 and a ttl > 0", function()
    local p = runnel.open()
    local line = debug.getinfo(1, "l").currentline + 2
    local function declare(cache)
      local l = p:lookup("l", { {"n","int"}, {"v","string"}, key = "n", source = function() end, cache = cache })
      return l
    end
    for _, case in ipairs{
      { { ttl = 1, size = 10.5 }, "l: cache: size must be a whole number >= 1, got 10.5" },
      { { ttl = 1, size = -1 }, "l: cache: size must be a whole number >= 1, got -1" },
      { { ttl = 1, size = 0 }, "l: cache: size must be a whole number >= 1, got 0" },
      { { ttl = 1, size = 2^70 }, "l: cache: size must be a whole number >= 1, got 1.1805916207174e+21" },
      { { ttl = 1, size = "10" }, "l: cache: size must be a whole number >= 1, got 10" },
      { { ttl = "x", size = 1 }, "l: cache: ttl must be a number of seconds > 0, got x" },
      { { ttl = 0 / 0, size = 1 }, "l: cache: ttl must be a number of seconds > 0, got nan" }, -- not "-nan" (29)
      { { ttl = -1 }, "l: cache: ttl must be a number of seconds > 0, got -1" },
    } do
      local ok, err = pcall(declare, case[1])
      assert.is_false(ok)
      assert.equal(debug.getinfo(1, "S").short_src .. ":" .. line .. ": " .. case[2], err)
    end
    local l = declare{ size = 1e3 }                        -- a whole float is a size; no ttl: never stale
    assert.equal("lookup", l:schema().kind)
    p:close()
  end)
end)

describe("a NaN looked up", function()
  it("is refused naming the lookup's key column, for a table or a stream on the left", function()
    local p = runnel.open()
    local o = p:table("o", { {"id","int"}, {"f","float"}, key = "id" })
    local calls = 0
    local l = p:lookup("l", { {"f","float"}, {"v","string"}, key = "f", source = function() calls = calls + 1; return { v = "x" } end })
    o:join(l, { on = "f", kind = "left" })
    assert.equal('o.join: column "f" of o (on) cannot be a key of l: column "f": NaN cannot be part of a key',
                 H.error_of(function() o:insert{ id = 1, f = 0 / 0 } end))
    local s = p:stream("s", { {"g","float"} })
    s:join(l, { on = "g" })
    assert.equal('s.join: column "g" of s (on) cannot be a key of l: column "f": NaN cannot be part of a key',
                 H.error_of(function() s:insert{ g = 0 / 0 } end))
    assert.equal(0, calls)
    assert.equal(0, o:count())
    p:close()
  end)
end)

describe("a lookup of another state's store whose rows do not fit it", function()
  teardown(H.cleanup)

  it("names the lookup, the key and the column", function()
    local dir = H.tmpdir()
    local w = runnel.open(dir .. "/src")
    local prices = w:table("prices", { {"sku","string"}, {"price","string"}, key = "sku" })
    prices:sink(runnel.store("prices"))
    prices:insert{ sku = "a", price = "cheap" }
    local p = runnel.open()
    local orders = p:table("orders", { {"id","int"}, {"sku","string"}, key = "id" })
    local l = p:lookup("l", { {"sku","string"}, {"price","float"}, key = "sku", source = runnel.attach(dir .. "/src", "prices") })
    orders:join(l, { on = "sku", kind = "left" })
    assert.equal('l: source returned a bad row for key (sku = "a"): column "price": expected float, got string',
                 H.error_of(function() orders:insert{ id = 1, sku = "a" } end))
    assert.equal(0, orders:count())
    p:close()
    w:close()
  end)
end)

describe("a value nested too deep", function()
  it("names the column it is in, from a lookup's source, a table's row and a runnel.agg's state", function()
    local p = runnel.open()
    local cyc = {}
    cyc[1] = cyc
    local o = p:table("o", { {"id","int"}, {"k","int"}, {"any","any", null = true}, key = "id" })
    local l = p:lookup("l", { {"k","int"}, {"tags","list", null = true}, key = "k", source = function() return { tags = { cyc } } end })
    o:join(l, { on = "k", kind = "left" })
    assert.equal('l: source returned a bad row for key (k = 1): column "tags": value nested more than 64 deep',
                 H.error_of(function() o:insert{ id = 1, k = 1 } end))
    assert.equal('o: column "any": value nested more than 64 deep', H.error_of(function() o:insert{ id = 1, k = 1, any = { x = cyc } } end))
    local q = runnel.open()
    local t = q:table("t", { {"id","int"}, key = "id" })
    t:aggregate{ u = runnel.agg{ add = function() return { cyc } end } }
    assert.equal('t.aggregate: aggregate "u": add: column "u": value nested more than 64 deep',
                 H.error_of(function() t:insert{ id = 1 } end))
    q:close()
    p:close()
  end)
end)

describe("a pipeline clock that is not finite", function()
  it("fails the lookup that asked the time, naming the clock; the next time is asked again", function()
    local now = 0 / 0
    local p = runnel.open{ clock = function() return now end }
    local o = p:table("o", { {"id","int"}, {"k","int"}, key = "id" })
    local l = p:lookup("l", { {"k","int"}, {"v","string"}, key = "k", source = function() return { v = "x" } end,
                             cache = { ttl = 10, size = 5 } })
    o:join(l, { on = "k", kind = "left" })
    assert.matches("l: clock: returned nan, expected a finite number of seconds", H.error_of(function() o:insert{ id = 1, k = 1 } end))
    now = math.huge
    assert.matches("l: clock: returned inf, expected a finite number of seconds", H.error_of(function() o:insert{ id = 1, k = 1 } end))
    now = 5
    o:insert{ id = 1, k = 1 }
    assert.equal(1, o:count())
    p:close()
  end)
end)
