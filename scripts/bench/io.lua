-- io.lua FILE.ndjson [events] — issue 5's figures:
--  * NDJSON ingest: p:run over the fkjoin file into keyed tables (the file
--    read, parsed by the scanner (core/jscan.c) and applied in groups of 1,000, sync = false):
--    MB/s and changes/s, wall clock, everything included;
--  * a stream joined with a lookup whose source is a Lua function, at 0%,
--    90% and 100% cache hits: events/s.
local runnel = require "runnel"
local path = assert(arg[1], "usage: io.lua FILE.ndjson [events]")
local EVENTS = tonumber(arg[2]) or 200000

local f = assert(io.open(path, "rb"))
local bytes = f:seek("end")
f:close()
local p = runnel.open{ sync = false }
p:table("teams", { {"id","int"}, {"name","string"}, {"region","string"}, key = "id" })
p:table("players", { {"id","int"}, {"name","string"}, {"team_id","int", null = true}, {"score","int"}, key = "id" })
local t0 = runnel.now()
local st = p:run(runnel.ndjson_source(path), { batch = 1000, progress = false })
local dt = runnel.now() - t0
print(("io.ndjson_ingest: %.1f MB/s, %d changes/s (%d lines)"):format(bytes / dt / 1e6, math.floor(st.applied / dt), st.lines))
p:close()

local function lookup_run(hit_rate)
  local q = runnel.open{ sync = false }
  local prices = q:lookup("prices", { {"sku","int"}, {"price","float"}, key = "sku",
    source = function(sku) return { price = sku * 0.5 } end,
    cache = { ttl = 3600, size = 100000 } })
  local ev = q:stream("ev", { {"sku","int"} })
  ev:join(prices, { on = "sku", kind = "left" })
  local keys, seed, fresh = {}, 7, 1000000
  for i = 1, 1000 do keys[i] = i end
  local rows = {}
  for i = 1, EVENTS do
    seed = (seed * 1103515245 + 12345) % 2147483648
    if (seed % 1000) < hit_rate * 1000 then rows[i] = { sku = keys[seed % 1000 + 1] }
    else fresh = fresh + 1; rows[i] = { sku = fresh } end
  end
  q:batch(function() for i = 1, 1000 do ev:insert{ sku = i } end end) -- warm the 1,000 hot keys
  local s0 = q:stats().lookups.prices
  t0 = runnel.now()
  for g = 1, EVENTS, 1000 do
    q:begin()
    for i = g, math.min(g + 999, EVENTS) do ev:insert(rows[i]) end
    q:commit()
  end
  dt = runnel.now() - t0
  local s = q:stats().lookups.prices
  local hits, calls = s.hits - s0.hits, s.source_calls - s0.source_calls
  print(("io.lookup_join_%d%%: %d events/s (%d hits, %d source calls)"):format(
    math.floor(hit_rate * 100 + 0.5), math.floor(EVENTS / dt), hits, calls))
  q:close()
end
lookup_run(0)
lookup_run(0.9)
lookup_run(1)
