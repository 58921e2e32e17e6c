-- orders.lua DIR [orders.ndjson] — the shop example, part 1.
--
-- An order stream is enriched from a SQLite product catalogue through a
-- cached lookup, the priced orders go to a SQLite table and an NDJSON log,
-- and per-customer totals are kept in a permanent store that report.lua
-- (part 2) reads, even while this one runs. The catalogue is written by
-- runnel itself (a table with a SQLite sink), so the example needs nothing
-- but runnel. Without an orders file, a few sample orders are pushed.
local runnel = require "runnel"
local dir = assert(arg[1], "usage: runnel run scripts/shop/orders.lua DIR [orders.ndjson]")
os.execute("mkdir -p '" .. dir .. "'")

local p <close> = runnel.open(dir .. "/state")

-- The catalogue: kept in SQLite, where the shop's other programs read it.
local products = p:table("products", { {"sku","string"}, {"name","string"}, {"price","float"}, key = "sku" })
products:sink(runnel.sqlite(dir .. "/shop.db", "products"))
p:batch(function()
  products:upsert{ sku = "tea", name = "Green tea", price = 4.5 }
  products:upsert{ sku = "mug", name = "Stone mug", price = 12.0 }
  products:upsert{ sku = "pot", name = "Tea pot", price = 30.0 }
end)

-- Orders look their product up in SQLite, through a cache.
local catalogue = p:lookup("catalogue", { {"sku","string"}, {"name","string"}, {"price","float"}, key = "sku",
  source = runnel.sqlite_source(dir .. "/shop.db", "products"), cache = { ttl = 60, size = 1000 } })
local orders = p:stream("orders", { {"order_id","int"}, {"customer","string"}, {"sku","string"}, {"qty","int"} })
local priced = orders:join(catalogue, { on = "sku", kind = "left" })
                     :map(function(o)
                       return { order_id = o.order_id, customer = o.customer, item = o.name or o.sku,
                                qty = o.qty, amount = o.price and o.price * o.qty }
                     end, { {"order_id","int"}, {"customer","string"}, {"item","string"}, {"qty","int"},
                            {"amount","float", null = true} }, "priced")
priced:sink(runnel.sqlite(dir .. "/shop.db", "priced_orders"))
priced:sink(runnel.ndjson(dir .. "/orders.log", { verb = false }))

-- Per-customer totals: a table of groups, kept in a store for report.lua.
local totals = priced:aggregate{ by = "customer", orders = runnel.count(), spent = runnel.sum("amount"),
                                 name = "totals" }
totals:sink(runnel.store("customer_totals"))

if arg[2] then
  local stats = p:run(runnel.ndjson_source(arg[2]), { batch = 500, on_error = "skip", rejects = dir .. "/rejects.txt" })
  print(("orders: %d lines, %d applied, %d rejected"):format(stats.lines, stats.applied, stats.rejected))
else
  p:batch(function()
    orders:insert{ order_id = 1, customer = "ann", sku = "tea", qty = 2 }
    orders:insert{ order_id = 2, customer = "bob", sku = "pot", qty = 1 }
    orders:insert{ order_id = 3, customer = "ann", sku = "mug", qty = 1 }
    orders:insert{ order_id = 4, customer = "cy", sku = "cake", qty = 3 } -- not in the catalogue
  end)
end
runnel.show(totals)
local s = p:stats().lookups.catalogue
print(("catalogue lookups: %d hits, %d misses"):format(s.hits, s.misses))
