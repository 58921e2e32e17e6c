-- leaderboard.lua [UPDATES [VARIANTS]] — issue 16's board: 1,000 guilds ×
-- 200 players, UPDATES (1,000,000) score updates in groups of 1,000, a
-- per-guild top 10 with rank events, three ways in one run:
--   top   rel:top{} (state in LMDB, sync = false), events to a Lua sink;
--   lua   a plain Lua board: a sorted array per guild, binary-search
--         remove and insert, the same events to a Lua function;
--   agg   the board through runnel.agg as written by hand before rel:top
--         (a map of scores per guild, re-sorted on every change), on the
--         first UPDATES / 20 updates (it is that slow).
-- --steady (third argument): LMDB transactions end by group count only,
-- never by time, so that callgrind's instruction counts repeat.
-- VARIANTS: a comma list (default "top,lua,agg"; "table": the updates
-- into the players table alone, for scale). Figures: changes/s and
-- rank events/s (INSERT, UPDATE and DELETE of a top row each count one).
local runnel = require "runnel"
local UPDATES = tonumber(arg and arg[1]) or 1000000
local VARIANTS = arg and arg[2] or "top,lua,agg"
local GUILDS, PER_GUILD, N, GROUP = 1000, 200, 10, 1000
local PLAYERS = GUILDS * PER_GUILD
local clock = runnel.now
local OPEN = { sync = false, carry = arg and arg[3] == "--steady" and { seconds = 3600 } or nil }

local seed = 42
local function random(n)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n
end
local start_score, upd_id, upd_score = {}, {}, {}
for id = 1, PLAYERS do start_score[id] = random(100000) end
for i = 1, UPDATES do
  upd_id[i] = random(PLAYERS) + 1
  upd_score[i] = random(100000)
end
local function guild_of(id) return id % GUILDS end

local function report(name, n, events, dt, note)
  print(("leaderboard.%s.changes_per_s: %d"):format(name, math.floor(n / dt + 0.5)))
  print(("leaderboard.%s.rank_events_per_s: %d (%d changes, %d rank events%s)"):format(
    name, math.floor(events / dt + 0.5), n, events, note or ""))
end

-- with_top false: the table alone, for scale (variant "table").
-- Every player inserted, in groups (untimed).
local function load_players(p, players)
  for g = 1, PLAYERS, GROUP do
    p:begin()
    for id = g, math.min(g + GROUP - 1, PLAYERS) do
      players:insert{ id = id, guild_id = guild_of(id), score = start_score[id] }
    end
    p:commit()
  end
end

-- The first n score updates, in groups; returns the seconds they took.
local function apply_updates(p, players, n)
  local row = {}
  local t0 = clock()
  for g = 1, n, GROUP do
    p:begin()
    for i = g, math.min(g + GROUP - 1, n) do
      row.id, row.score = upd_id[i], upd_score[i]
      players:update(row)
    end
    p:commit()
  end
  return clock() - t0
end

local function run_top(with_top)
  local p = runnel.open(OPEN)
  local players = p:table("players", { {"id","int"}, {"guild_id","int"}, {"score","int"}, key = "id" })
  local board = with_top and players:top{ n = N, by = "guild_id", order = { {"score","desc"}, {"id","asc"} } }
  local events = 0
  if board then board:sink(function() events = events + 1 end) end
  load_players(p, players)
  events = 0
  local dt = apply_updates(p, players, UPDATES)
  assert(not board or board:count() == GUILDS * N)
  p:close()
  if board then report("top", UPDATES, events, dt, ", state in LMDB")
  else report("table", UPDATES, 0, dt, ", the players table alone, no board") end
end

-- The plain Lua board. A player's place is one number, score * 2^20 - id,
-- so "score desc, id asc" is that number descending.
local function run_lua()
  local SHIFT = 1 << 20
  local boards, key_of = {}, {}
  local events = 0
  local function event(verb, id, rank) events = events + 1 end -- luacheck: ignore
  -- the index of k in b (descending), or where it would go
  local function find(b, k)
    local lo, hi = 1, #b
    while lo <= hi do
      local mid = (lo + hi) // 2
      if b[mid] > k then lo = mid + 1 else hi = mid - 1 end
    end
    return lo
  end
  for id = 1, PLAYERS do
    local g = guild_of(id)
    local b = boards[g]
    if not b then b = {}; boards[g] = b end
    local k = start_score[id] * SHIFT - id
    key_of[id] = k
    table.insert(b, find(b, k), k)
  end
  local t0 = clock()
  for g = 1, UPDATES, GROUP do
    for i = g, math.min(g + GROUP - 1, UPDATES) do
      local id = upd_id[i]
      local b, old, new = boards[guild_of(id)], key_of[id], upd_score[i] * SHIFT - id
      if old ~= new then
        local from = find(b, old)
        table.remove(b, from)
        local to = find(b, new)
        table.insert(b, to, new)
        key_of[id] = new
        -- rank events: the rows between the two places move one; a row
        -- crossing the 10th place enters or leaves
        if from <= N or to <= N then
          local lo, hi = math.min(from, to), math.max(from, to)
          for r = lo, math.min(hi, N) do
            local kid = -(b[r] % -SHIFT)
            if r == to then event(from <= N and "UPDATE" or "INSERT", kid, r)
            elseif hi > N and r == N then event("INSERT", kid, r)
            else event("UPDATE", kid, r) end
          end
          if from <= N and to > N then event("DELETE", id, nil)
          elseif to <= N and from > N and #b > N then event("DELETE", -(b[N + 1] % -SHIFT), nil) end
        end
      end
    end
  end
  local dt = clock() - t0
  report("lua", UPDATES, events, dt, ", state in Lua tables")
end

local function run_agg()
  local n = UPDATES // 20
  local p = runnel.open(OPEN)
  local players = p:table("players", { {"id","int"}, {"guild_id","int"}, {"score","int"}, key = "id" })
  local top10 = runnel.agg{
    init = function() return {} end,
    add = function(st, r) st[tostring(r.id)] = r.score; return st end,
    remove = function(st, r) st[tostring(r.id)] = nil; return st end,
    result = function(st)
      local all = {}
      for id, score in pairs(st) do all[#all + 1] = { score, tonumber(id) } end
      table.sort(all, function(a, b) return a[1] > b[1] or (a[1] == b[1] and a[2] < b[2]) end)
      local ids = {}
      for r = 1, math.min(N, #all) do ids[r] = all[r][2] end
      return ids
    end }
  local board = players:aggregate{ by = "guild_id", top = top10 }
  local events = 0
  board:sink(function(verb, row, old) -- rank events: the places whose player changed
    for r = 1, N do
      if not old or (row and row.top[r]) ~= old.top[r] then events = events + 1 end
    end
  end)
  load_players(p, players)
  events = 0
  local dt = apply_updates(p, players, n)
  p:close()
  report("agg", n, events, dt, ", runnel.agg, the first " .. n .. " updates")
end

for v in VARIANTS:gmatch("[^,]+") do
  if v == "top" or v == "table" then run_top(v == "top") elseif v == "lua" then run_lua() elseif v == "agg" then run_agg()
  else error("unknown variant " .. v) end
end
