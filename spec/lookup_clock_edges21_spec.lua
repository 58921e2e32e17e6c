-- A lookup cache under a pipeline clock that moves backwards (round 21, core/lookup.c).
local runnel = require "runnel"

describe("a lookup cache when the pipeline's clock moves backwards", function()
  it("asks the source again for an entry fetched after the clock's now, then counts from the new fetch", function()
    local now, calls = 1000, 0
    local p = runnel.open{ clock = function() return now end }
    local orders = p:stream("orders", { {"oid","int"}, {"sku","string"} })
    local prices = p:lookup("prices", { {"sku","string"}, {"price","int"}, key = "sku",
      cache = { ttl = 30, size = 10 },
      source = function() calls = calls + 1 return { price = calls } end })
    local log = {}
    orders:join(prices, { on = "sku", kind = "left" }):sink(function(_, r) log[#log + 1] = r.price end)
    orders:insert{ oid = 1, sku = "a" }   -- fetched at 1000
    now = 1010
    orders:insert{ oid = 2, sku = "a" }   -- age 10: a hit
    now = 0                                -- a wall clock set back (NTP, a user's os.time clock)
    -- before: the age -1000 counted as fresh: the answer fetched at 1000 was served until 1030,
    -- for 1030 seconds of the clock instead of ttl = 30
    orders:insert{ oid = 3, sku = "a" }
    now = 29
    orders:insert{ oid = 4, sku = "a" }   -- fetched again at 0: age 29, a hit
    now = 30
    orders:insert{ oid = 5, sku = "a" }   -- age 30: stale
    assert.same({ 1, 1, 2, 2, 3 }, log)
    assert.same({ hits = 2, misses = 3, evictions = 0, source_calls = 3 }, p:stats().lookups.prices)
    p:close()
  end)
end)
