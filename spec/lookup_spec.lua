-- Lookups with cache and TTL, permanent stores and runnel.attach (DESIGN §8, §12).
local runnel = require "runnel"
local H = require "helper"

describe("lookups", function()
  local p, now, calls, prices, orders, log
  before_each(function()
    now, calls = 0, {}
    p = runnel.open{ clock = function() return now end }
    orders = p:stream("orders", { {"oid","int"}, {"sku","string"} })
  end)
  after_each(function() p:close() end)

  local function declare(cache)
    prices = p:lookup("prices", { {"sku","string"}, {"price","float"}, key = "sku", cache = cache,
      source = function(sku)
        calls[#calls + 1] = sku
        if sku ~= "none" then return { price = #sku + 0.5 } end
      end })
    local priced = orders:join(prices, { on = "sku", kind = "left" })
    log = {}
    priced:sink(function(_, r) log[#log + 1] = r.sku .. "=" .. tostring(r.price) end)
  end

  it("serves fresh entries from the cache and refetches by the age since the fetch", function()
    declare{ ttl = 10, size = 100 }
    orders:insert{ oid = 1, sku = "ab" }
    now = 9.5
    orders:insert{ oid = 2, sku = "ab" }  -- fetched at 0: fresh (age 9.5 < 10), a hit
    now = 10
    orders:insert{ oid = 3, sku = "ab" }  -- age 10: stale, asked again
    now = 19
    orders:insert{ oid = 4, sku = "ab" }  -- fetched at 10, used at 19: still fresh though used often
    assert.same({ "ab", "ab" }, calls)
    assert.same({ hits = 2, misses = 2, evictions = 0, source_calls = 2 }, p:stats().lookups.prices)
    assert.same({ "ab=2.5", "ab=2.5", "ab=2.5", "ab=2.5" }, log)
  end)

  it("caches absence with missing = true and asks again with missing = false", function()
    declare{ ttl = 10, size = 100, missing = true }
    orders:insert{ oid = 1, sku = "none" }
    orders:insert{ oid = 2, sku = "none" }
    assert.same({ "none" }, calls)
    p:close()
    calls = {}
    p = runnel.open{ clock = function() return now end }
    orders = p:stream("orders", { {"oid","int"}, {"sku","string"} })
    declare{ ttl = 10, size = 100, missing = false }
    orders:insert{ oid = 1, sku = "none" }
    orders:insert{ oid = 2, sku = "none" }
    assert.same({ "none", "none" }, calls)
    assert.same({ "none=nil", "none=nil" }, log)
  end)

  it("evicts the least recently used entry past size; a hit refreshes recency", function()
    declare{ ttl = 100, size = 2 }
    for _, sku in ipairs{ "a", "b", "a", "c", "a", "b" } do orders:insert{ oid = 1, sku = sku } end
    -- a b (a hit) c evicts b; a hit; b evicts c
    assert.same({ "a", "b", "c", "b" }, calls)
    assert.same({ hits = 2, misses = 4, evictions = 2, source_calls = 4 }, p:stats().lookups.prices)
  end)

  it("asks the source every time without a cache, normalizing keys to their types", function()
    local ids = {}
    local named = p:lookup("named", { {"id","int"}, {"name","string"}, key = "id",
      source = function(id) ids[#ids + 1] = math.type(id); return { name = "n" .. id } end })
    local ev = p:stream("ev", { {"who","float"} })
    local got = {}
    ev:join(named, { on = "who" }):sink(function(_, r) got[#got + 1] = r.name end)
    ev:insert{ who = 7.0 }
    ev:insert{ who = 7.0 }
    assert.same({ "integer", "integer" }, ids)
    assert.same({ "n7", "n7" }, got)
    assert.equal('ev.join: column "who" of ev (on) cannot be a key of named: column "id": expected int, got number 7.5',
                 H.error_of(ev.insert, ev, { who = 7.5 }))
    assert.same({ hits = 0, misses = 2, evictions = 0, source_calls = 2 }, p:stats().lookups.named)
  end)

  it("retracts exactly what a table join emitted, without asking the source again", function()
    declare{ ttl = 1, size = 10 }
    local carts = p:table("carts", { {"id","int"}, {"sku","string"}, key = "id" })
    local lc = H.record(carts:join(prices, { on = "sku" }))
    carts:insert{ id = 1, sku = "abc" }
    now = 50
    carts:delete{ id = 1 }
    assert.same({ "abc" }, calls)
    assert.same({ "INSERT 1", "DELETE 1" }, H.verbs(lc))
    assert.same({ id = 1, sku = "abc", ["prices.sku"] = "abc", price = 3.5 }, lc[2][4])
  end)

  it("reads a SQLite table with sqlite_source", function()
    local dir = H.tmpdir()
    local _, err = H.sh(("sqlite3 %s/shop.db \"create table products (sku text primary key, price real, tags text);" ..
                         " insert into products values ('x1', 9.5, '[\\\"a\\\"]');\""):format(dir))
    assert.equal("", err)
    local products = p:lookup("products", { {"sku","string"}, {"price","float"}, {"tags","list", null = true},
      key = "sku", source = runnel.sqlite_source(dir .. "/shop.db", "products") })
    local got = {}
    orders:join(products, { on = "sku", kind = "left" }):sink(function(_, r) got[#got + 1] = r end)
    orders:insert{ oid = 1, sku = "x1" }
    orders:insert{ oid = 2, sku = "x2" }
    assert.same({ { oid = 1, sku = "x1", ["products.sku"] = "x1", price = 9.5, tags = { "a" } }, { oid = 2, sku = "x2" } }, got)
    H.cleanup()
  end)
end)

describe("permanent stores", function()
  after_each(H.cleanup)

  it("keep a relation's net rows, readable with runnel.attach in this process", function()
    local dir = H.tmpdir()
    local p = runnel.open(dir)
    local t = p:table("t", { {"k","string"}, {"v","int"}, key = "k" })
    t:filter(function(r) return r.v > 0 end, "positive"):sink(runnel.store("positive"))
    t:insert{ k = "a", v = 1 }
    t:insert{ k = "b", v = 2 }
    t:update{ k = "a", v = -1 }
    local att = runnel.attach(dir, "positive")
    assert.is_nil(att:get("a"))
    assert.same({ k = "b", v = 2 }, att:get("b"))
    assert.matches('no relation or store "nope" there', select(2, pcall(runnel.attach, dir, "nope")), 1, true)
    att:close()
    p:close()
  end)

  it("are read by another process, which sees whole groups only", function()
    local dir = H.tmpdir()
    local writer = dir .. "/writer.lua"
    local f = io.open(writer, "w")
    f:write([[
local runnel = require "runnel"
local dir = arg[1]
local p = runnel.open(dir .. "/state")
local acct = p:table("acct", { {"who","string"}, {"bal","int"}, key = "who" })
acct:sink(runnel.store("balances"))
acct:insert{ who = "a", bal = 100 }
acct:insert{ who = "b", bal = 0 }
io.open(dir .. "/ready", "w"):close()
local function exists(path) local h = io.open(path) if h then h:close() end return h ~= nil end
local n = 0
while not exists(dir .. "/stop") and n < 100000 do -- move money back and forth, one group per move
  n = n + 1
  local amount = n % 7
  p:batch(function()
    local a, b = acct:get("a"), acct:get("b")
    acct:update{ who = "a", bal = a.bal - amount }
    acct:update{ who = "b", bal = b.bal + amount }
  end)
end
p:close()
io.open(dir .. "/done", "w"):close()
]])
    f:close()
    os.execute(("%s run %s %s >/dev/null 2>&1 &"):format(H.runnel_bin, writer, dir))
    local function wait(path)
      for _ = 1, 600 do
        local h = io.open(path)
        if h then h:close() return true end
        os.execute("sleep 0.05")
      end
    end
    assert.is_true(wait(dir .. "/ready"))
    local reader = dir .. "/reader.lua"
    f = io.open(reader, "w")
    f:write([[
local runnel = require "runnel"
local att = runnel.attach(arg[1] .. "/state", "balances")
local bad, distinct, last = 0, 0, nil
for _ = 1, 2000000 do -- until the writer has visibly moved on (bounded)
  local rows = {}
  for row in att:rows() do rows[#rows + 1] = row end -- one read transaction: one group's state
  local sum = rows[1].bal + rows[2].bal
  if sum ~= 100 then bad = bad + 1 end
  if rows[1].bal ~= last then distinct, last = distinct + 1, rows[1].bal end
  if distinct >= 20 then break end
end
print(bad, distinct)
]])
    f:close()
    local out, err = H.sh(("%s run %s %s"):format(H.runnel_bin, reader, dir))
    io.open(dir .. "/stop", "w"):close()
    assert.is_true(wait(dir .. "/done"))
    assert.equal("", err)
    local bad, distinct = out:match("^(%d+)\t(%d+)")
    assert.equal("0", bad)                -- never half a group
    assert.is_true(tonumber(distinct) > 1) -- and it did see the writer move on
  end)
end)
