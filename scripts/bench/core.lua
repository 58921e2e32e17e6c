-- core.lua [N] — changes/s pushed from Lua into a keyed table, groups of
-- 1,000 with sync = false: inserts, then patch updates of one column, then
-- a hand-written Lua table store doing the same for scale.
local runnel = require "runnel"
local N = tonumber(arg and arg[1]) or 200000
local GROUP = 1000
local clock = runnel.now -- monotonic wall clock

local function rate(n, seconds) return math.floor(n / seconds + 0.5) end

local p = runnel.open{ sync = false }
local players = p:table("players", { {"id","int"}, {"name","string"}, {"team_id","int", null = true},
                                     {"score","int"}, key = "id" })
local names = {}
for i = 1, N do names[i] = "player" .. i end

local t0 = clock()
for g = 0, N - 1, GROUP do
  p:begin()
  for i = g + 1, math.min(g + GROUP, N) do
    players:insert{ id = i, name = names[i], team_id = i % 1000, score = 0 }
  end
  p:commit()
end
local t_ins = clock() - t0

t0 = clock()
for g = 0, N - 1, GROUP do
  p:begin()
  for i = g + 1, math.min(g + GROUP, N) do
    players:update{ id = i, score = i + 1 }
  end
  p:commit()
end
local t_upd = clock() - t0
assert(players:count() == N and players:get(N).score == N + 1)
p:close()

-- The same work in a plain Lua table (no persistence, no ids, no checks).
local store = {}
t0 = clock()
for i = 1, N do store[i] = { id = i, name = names[i], team_id = i % 1000, score = 0 } end
for i = 1, N do local r = store[i]; r.score = i + 1 end
local t_lua = clock() - t0

print(("core.inserts_per_s: %d"):format(rate(N, t_ins)))
print(("core.updates_per_s: %d"):format(rate(N, t_upd)))
print(("core.lua_table_changes_per_s: %d"):format(rate(2 * N, t_lua)))
