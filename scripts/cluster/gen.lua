-- gen.lua — the cluster workload: lua5.4 gen.lua DIR P CHANGES [SEED] [GUILDS] [RENAMES]
-- writes DIR/all.ndjson (every change in order: the oracle's input),
-- DIR/guilds.ndjson (the global table's changes) and DIR/results.<p>.ndjson
-- (the results of the guilds g with g % P == p, in order). RENAMES: the
-- share of changes that rename a guild (0.01), each moving every board row
-- of the guild (the FK join's fan-out).
local dir, P, changes, seed, nguilds = arg[1], tonumber(arg[2]), tonumber(arg[3]), tonumber(arg[4] or 1), tonumber(arg[5] or 40)
local renames = tonumber(arg[6] or 0.01)
math.randomseed(seed)
local all = assert(io.open(dir .. "/all.ndjson", "w"))
local gf = assert(io.open(dir .. "/guilds.ndjson", "w"))
local parts = {}
for p = 0, P - 1 do parts[p] = assert(io.open(dir .. "/results." .. p .. ".ndjson", "w")) end
local regions = { "eu", "na", "asia" }
local function emit(f, line) all:write(line, "\n"); f:write(line, "\n") end
local function guild_line(op, id, rename)
  return ('{"rel":"guilds","op":"%s","row":{"id":%d,"name":"guild %d%s","region":"%s"}}')
    :format(op, id, id, rename and ("/" .. rename) or "", regions[id % 3 + 1])
end
for g = 1, nguilds do emit(gf, guild_line("insert", g)) end
local live, order, next_match = {}, {}, 1
for i = 1, changes do
  local r = math.random()
  if r < renames then -- a guild renames itself: fans out to its results in one partition
    emit(gf, guild_line("update", math.random(nguilds), i))
  elseif r < 0.70 + renames or #order == 0 then
    local m, g = next_match, math.random(nguilds)
    next_match = next_match + 1
    live[m] = g
    order[#order + 1] = m
    emit(parts[g % P], ('{"rel":"results","op":"insert","row":{"match":%d,"player":"p%d","guild":%d,"score":%d}}')
      :format(m, math.random(200), g, math.random(0, 100)))
  else
    local at = math.random(#order)
    local m = order[at]
    local g = live[m]
    if r < 0.90 + renames then -- a corrected score
      emit(parts[g % P], ('{"rel":"results","op":"update","row":{"match":%d,"score":%d}}'):format(m, math.random(0, 100)))
    else -- a voided match
      emit(parts[g % P], ('{"rel":"results","op":"delete","row":{"match":%d}}'):format(m))
      order[at] = order[#order]
      order[#order] = nil
      live[m] = nil
    end
  end
end
all:close()
gf:close()
for p = 0, P - 1 do parts[p]:close() end
