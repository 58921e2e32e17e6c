-- table.lua FIGURES [KNOWN_EVENTS KNOWN_CHECKSUM] — issue 13's table from the
-- figures make bench wrote ("prefix.name: value" lines: lua. the plain-Lua
-- fkjoin and lua2. its second run after the runnel paths, decl.
-- declarative, writemap., mapper., mapperlua. (--lua-joiner), run. p:run, floor. and floormin.
-- fkjoin_floor's two modes, host. the example host, lmdb. the declarative
-- state after its run). Every path is set against the plain-Lua version of
-- the same run; a figure that is missing (a run failed, a tool does not
-- print it yet) reads "n/a" and its target "n/a", never an error.
local path, known_events, known_checksum = arg[1], arg[2], arg[3]
local fig = {}
for line in assert(io.open(path)):lines() do
  local k, v = line:match("^([%w_.]+):%s*(.-)%s*$")
  if k then fig[k] = v end
end

local function num(k) return tonumber(fig[k] and fig[k]:match("^%-?[%d.]+")) end

local function thousands(n)
  local s = ("%d"):format(math.floor(n + 0.5))
  return (s:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", ""))
end

-- The plain-Lua version runs before the runnel paths and again after them
-- (lua2.): the base is the mean of the two, so a drift of the machine's
-- speed during the run does not lean every ratio one way.
local lua_first, lua_second = num("lua.changes_per_s"), num("lua2.changes_per_s")
local lua_rate = lua_first and lua_second and (lua_first + lua_second) / 2 or lua_first
local function ratio(x, base) return x and base and base > 0 and ("%.2f×"):format(x / base) or "n/a" end
local function verdict(ok) if ok == nil then return "n/a" end return ok and "yes" or "no" end

local rows = {}
local function row(what, figure, times, target, met) rows[#rows + 1] = { what, figure, times, target, met } end

local function rate_row(what, prefix, target, test)
  local r = num(prefix .. ".changes_per_s")
  local met = nil
  if r and test then met = test(r, lua_rate and r / lua_rate) end
  row(what, r and thousands(r) .. " changes/s" or "n/a", ratio(r, lua_rate), target, test and verdict(met) or "")
end

if lua_second then
  row("plain Lua, hash tables (fkjoin_lua.lua): before / after the runnel paths",
      ("%s / %s changes/s"):format(thousands(lua_first or 0), thousands(lua_second)), "1.00× (their mean)", "", "")
else
  rate_row("plain Lua, hash tables (fkjoin_lua.lua)", "lua", "", nil)
end
rate_row("declarative FK join, state in LMDB, sync = false", "decl", "≥ 1.3× plain Lua",
         function(_, x) return x and x >= 1.3 end)
rate_row("  the same, writemap = true", "writemap", "", nil)
-- fkjoin_floor.c: the LMDB work alone, what the declarative path cannot beat
-- with runnel's layout, and what no layout keeping the state in LMDB can
rate_row("LMDB calls alone, runnel's layout", "floor", "", nil)
rate_row("LMDB floor, minimal layout", "floormin", "", nil)
rate_row("Lua mapper + joiner", "mapper", "≥ 0.7× and ≥ 200,000/s",
         function(r, x) return x and x >= 0.7 and r >= 200000 end)
rate_row("  the same, a joiner Lua runs (it calls a function)", "mapperlua", "", nil)
rate_row("p:run over the NDJSON file, parsing included", "run", "≥ 400,000/s",
         function(r) return r >= 400000 end)

-- host: "group_ms: p50 A p99 B max C over_1ms N" and "ticks_over_1_ms: M
-- preempted": the target allows ticks over 1 ms only when the clock, not
-- the CPU time, passed 1 ms (another process ran), so N - M must be 0.
-- "control_ms: …" (RUNNEL_HOST_CONTROL, at a tick rate): a tick of
-- arithmetic alone run in each idle time, timed the same way; its ticks
-- over 1 ms are the machine's (the hypervisor's time shows in the CPU
-- clock too), shown beside the host's, not taken off them.
local function host_row(prefix, what)
  local g = fig[prefix .. ".group_ms"] or ""
  local p50, p99, max = g:match("p50 ([%d.]+) p99 ([%d.]+) max ([%d.]+)")
  local over = tonumber(g:match("over_1ms (%d+)"))
  local preempted = tonumber((fig[prefix .. ".ticks_over_1_ms"] or ""):match("^(%d+) preempted"))
  local ticks = num(prefix .. ".ticks")
  local met -- nil: cannot tell
  if p99 and tonumber(p99) >= 0.5 then met = false
  elseif p99 and over and preempted then met = over - preempted == 0 end
  local figure = "n/a"
  if p50 then
    figure = ("p50 %.2f p99 %.2f max %.2f ms; %s over 1 ms"):format(p50, p99, max, over and thousands(over) or "n/a")
    if preempted then figure = figure .. (" (%s preempted)"):format(thousands(preempted)) end
  end
  local c = fig[prefix .. ".control_ms"]
  local c50, c99, cmax = (c or ""):match("p50 ([%d.]+) p99 ([%d.]+) max ([%d.]+)")
  if c50 then
    figure = figure .. ("; control tick of arithmetic alone: p50 %.2f p99 %.2f max %.2f ms, %s over 1 ms")
      :format(c50, c99, cmax, thousands(tonumber(c:match("over_1ms (%d+)")) or 0))
  end
  row(what:format(ticks and thousands(ticks) or "n/a"), figure, "—",
      "p99 < 0.5 ms, none over 1 ms unless preempted", verdict(met))
end
host_row("host60", "example host at its default 60 Hz, %s ticks of 100 changes")
host_row("host", "  the same, ticks back to back (hz 0), %s ticks")

-- memory above the loaded input (the p:run path loads none)
local lua_mb = num("lua.rss_above_input_mb")
local function mem_row(what, prefix, test)
  local mb = num(prefix .. ".rss_above_input_mb")
  local anon, file = num(prefix .. ".anon_above_input_mb"), num(prefix .. ".file_above_input_mb")
  local figure = mb and ("+%s MB"):format(thousands(mb)) or "n/a"
  if mb and anon and file then -- what the process allocated, and LMDB's mapped file pages
    figure = figure .. (" (%s allocated, %s file pages)"):format(thousands(anon), thousands(file))
  end
  row(what, figure, ratio(mb, lua_mb),
      test and "≤ plain Lua's" or "", test and verdict(mb and lua_mb and mb <= lua_mb) or "")
end
mem_row("memory: RSS above the loaded input, plain Lua", "lua", false)
mem_row("memory: the same, declarative", "decl", true)
mem_row("memory: the same, Lua mapper + joiner", "mapper", true)

-- LMDB file of the declarative run against its live data: "N MiB live" in
-- runnel inspect's lmdb line, or "N MiB used" less "M MiB free", where it
-- says so
local file_mib = num("lmdb.file_mib")
local inspect = fig["lmdb.inspect"] or ""
local live_bytes = tonumber(inspect:match("space: (%d+) bytes live")) -- runnel inspect's space line
local live_mib = live_bytes and live_bytes / 1048576 or tonumber(inspect:match("([%d.]+) MiB live"))
if not live_mib and inspect:match("MiB free") then -- live is what is used less what is free
  local used, free = tonumber(inspect:match("([%d.]+) MiB used")), tonumber(inspect:match("([%d.]+) MiB free"))
  live_mib = used and free and used - free
end
row("LMDB file after the declarative run vs live data",
    ("%s MiB file, %s MiB live"):format(file_mib and ("%.1f"):format(file_mib) or "n/a",
                                         live_mib and ("%.1f"):format(live_mib) or "n/a"),
    "—", "≤ 1.5× live" .. (file_mib and live_mib and (" (%.2f×)"):format(file_mib / live_mib) or ""),
    verdict(file_mib and live_mib and file_mib <= 1.5 * live_mib))

-- events and checksum: every path the same as plain Lua (and as known for
-- the default file)
local want_e, want_c = fig["lua.events"], fig["lua.checksum"]
local differ = {}
for _, prefix in ipairs({ "decl", "writemap", "mapper", "mapperlua", "run" }) do
  if fig[prefix .. ".events"] ~= want_e or fig[prefix .. ".checksum"] ~= want_c then differ[#differ + 1] = prefix end
end
local known_ok = not known_events or (want_e == known_events and want_c == known_checksum)
row("fkjoin events / checksum, every path", ("%s / %s"):format(want_e or "n/a", want_c or "n/a"), "—",
    known_events and ("%s / %s"):format(known_events, known_checksum) or "equal to plain Lua",
    #differ == 0 and want_e and known_ok and "yes" or ("no" .. (#differ > 0 and " (" .. table.concat(differ, ", ") .. ")" or "")))

-- one block, aligned columns (widths in characters, not bytes: × and ≥ are two)
local head = { "path", "figure", "× plain Lua", "target", "met" }
local width = {}
local function len(s) return utf8.len(s) or #s end
for i, h in ipairs(head) do
  width[i] = len(h)
  for _, r in ipairs(rows) do width[i] = math.max(width[i], len(r[i])) end
end
local function line(cells)
  local out = {}
  for i, c in ipairs(cells) do out[i] = c .. (" "):rep(width[i] - len(c)) end
  print((table.concat(out, " | "):gsub("%s+$", "")))
end
line(head)
local rule = {}
for i = 1, #head do rule[i] = ("-"):rep(width[i]) end
print(table.concat(rule, "-+-"))
for _, r in ipairs(rows) do line(r) end
