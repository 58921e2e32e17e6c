-- rel:top{} and rel:index{}: ranked tops per group and ordered indexes,
-- compared with sorting the input after every group (core/top.c TOP-1..3,
-- core/index.c INDEX-1..3).
local runnel = require "runnel"
local H = require "helper"

local null = runnel.null
local function isnull(v) return v == nil or v == null end

-- Order values compared as the operators do: null after every value, in
-- either direction. -1, 0 or 1.
local function cmp_value(a, b, desc)
  if isnull(a) or isnull(b) then return (isnull(a) and 1 or 0) - (isnull(b) and 1 or 0) end
  if a == b then return 0 end
  local less = a < b
  if desc then less = not less end
  return less and -1 or 1
end

-- Rows (each with .id) sorted by order { {col, desc}, … } then id.
local function sorted(rows, order)
  local out = {}
  for _, r in pairs(rows) do out[#out + 1] = r end
  table.sort(out, function(x, y)
    for _, o in ipairs(order) do
      local c = cmp_value(x[o[1]], y[o[1]], o[2])
      if c ~= 0 then return c < 0 end
    end
    return x.id < y.id
  end)
  return out
end

local function text(row)
  local names = {}
  for k in pairs(row) do names[#names + 1] = k end
  table.sort(names)
  local parts = {}
  for _, k in ipairs(names) do parts[#parts + 1] = k .. "=" .. tostring(row[k]) end
  return table.concat(parts, ",")
end

-- { [id] = text } of the expected top: rows grouped by `by` (a column or
-- nil), the first n of each in order, with rank.
local function expected_top(rows, by, n, order)
  local groups = {}
  for _, r in pairs(rows) do
    local g = by and (isnull(r[by]) and "null" or tostring(r[by])) or ""
    groups[g] = groups[g] or {}
    groups[g][#groups[g] + 1] = r
  end
  local out = {}
  for _, g in pairs(groups) do
    for rank, r in ipairs(sorted(g, order)) do
      if rank > n then break end
      local copy = { rank = rank }
      for k, v in pairs(r) do if v ~= null then copy[k] = v end end
      out[r.id] = text(copy)
    end
  end
  return out
end

-- { [id] = text } of a relation's rows, by their id column (the tables'
-- row ids grow with it here, so the tie-break by row id is by it too).
local function actual(rel)
  local out = {}
  rel:scan(function(row) out[row.id] = text(row) end)
  return out
end

-- A copy of a relation kept by replaying its changes; fails on a change
-- that does not fit the copy (an INSERT of a present id, a no-op UPDATE …).
local function replayed(rel, copy)
  rel:sink(function(verb, row, old)
    local id = (row or old).id
    if verb == "INSERT" then
      assert.is_nil(copy[id], "INSERT of a present row " .. id)
      copy[id] = text(row)
    elseif verb == "DELETE" then
      assert.equal(copy[id], text(old), "DELETE of another row " .. id)
      copy[id] = nil
    else
      assert.equal(copy[id], text(old), "UPDATE from another row " .. id)
      assert.are_not.equal(text(old), text(row), "an UPDATE that changes nothing " .. id)
      copy[id] = text(row)
    end
  end)
  return copy
end

-- The changes between two tops, as the operator must emit them.
local function diff(before, after)
  local out = {}
  for id, t in pairs(after) do
    if before[id] == nil then out[#out + 1] = "INSERT " .. id
    elseif before[id] ~= t then out[#out + 1] = "UPDATE " .. id end
  end
  for id in pairs(before) do if after[id] == nil then out[#out + 1] = "DELETE " .. id end end
  table.sort(out)
  return out
end

describe("top and index", function()
  local p
  after_each(function() if p then p:close() end p = nil end)
  teardown(H.cleanup)

  it("keeps tops and indexes equal to sorting the input after every group (TOP-1..3, INDEX-1..3)", function()
    local dir = H.tmpdir()
    local rng = 12345
    local function random(n) rng = (rng * 1103515245 + 12345) % 2147483648; return rng % n + 1 end
    local by_g = { { "s", true }, { "t", false } }
    local global = { { "s", false } }
    local model = {}         -- [id] = row (with id)
    local copy_g, copy_all = {}, {}
    local rels
    local last_events
    local function declare()
      p = runnel.open{ path = dir, sync = random(2) == 1 }
      local t = p:table("players", { {"id","int"}, {"g","int", null = true}, {"s","int", null = true},
                                     {"t","string", null = true}, key = "id" })
      local tg = t:top{ n = 3, by = "g", order = { {"s","desc"}, {"t","asc"} }, name = "by_g" }
      local ta = t:top{ n = 4, order = { "s" }, rank = "place", name = "all" }
      local ix = t:index{ "s", "desc", "t", name = "ix" }
      replayed(tg, copy_g)
      replayed(ta, copy_all)
      last_events = {}
      tg:sink(function(verb, row, old) last_events[#last_events + 1] = verb .. " " .. (row or old).id end)
      rels = { t = t, tg = tg, ta = ta, ix = ix }
    end
    declare()
    local function rand_row(id)
      local s = random(6) == 1 and null or random(5)       -- ties and nulls
      local tt = random(4) == 1 and null or ("n" .. random(3))
      local g = random(8) == 1 and null or random(3)
      return { id = id, g = g, s = s, t = tt }
    end
    local function check()
      local exp_g = expected_top(model, "g", 3, by_g)
      local exp_all = expected_top(model, nil, 4, global)
      for id, t in pairs(exp_all) do exp_all[id] = t:gsub("rank=", "place=") end
      assert.same(exp_g, actual(rels.tg))
      assert.same(exp_all, actual(rels.ta))
      assert.same(exp_g, copy_g)
      assert.same(exp_all, copy_all)
      local n = 0
      for _ in pairs(exp_g) do n = n + 1 end
      assert.equal(n, rels.tg:count())
      -- the index: every row in order, ranges, counts and ranks
      local want = {}
      for i, r in ipairs(sorted(model, by_g)) do want[i] = r.id end
      local got = {}
      for row in rels.ix:range{} do got[#got + 1] = row.id end
      assert.same(want, got)
      local lo, hi = random(5), random(5)
      if lo > hi then lo, hi = hi, lo end
      local inside, before = 0, 0
      for _, r in pairs(model) do
        if not isnull(r.s) and r.s >= lo and r.s <= hi then inside = inside + 1 end
        if not isnull(r.s) and r.s > hi then before = before + 1 end
      end
      assert.equal(inside, rels.ix:count{ from = hi, to = lo })
      assert.equal(before + 1, rels.ix:rank(hi))
      local off, lim = random(3) - 1, random(4)
      local sub = {}
      for row in rels.ix:range{ from = hi, to = lo, offset = off, limit = lim } do sub[#sub + 1] = row.id end
      local exp_sub = {}
      for _, r in ipairs(sorted(model, by_g)) do
        if not isnull(r.s) and r.s >= lo and r.s <= hi then
          if off > 0 then off = off - 1 elseif #exp_sub < lim then exp_sub[#exp_sub + 1] = r.id end
        end
      end
      assert.same(exp_sub, sub)
    end
    local ids = 0
    for round = 1, 400 do
      if round % 80 == 0 then p:close(); declare() end
      local single = random(2) == 1
      local rollback = not single and random(6) == 1
      local before = expected_top(model, "g", 3, by_g)
      H.clear(last_events)
      local staged = {}
      for k, v in pairs(model) do staged[k] = v end
      if not single then p:begin() end
      for _ = 1, single and 1 or random(6) do
        local op, live = random(10), {}
        for id in pairs(staged) do live[#live + 1] = id end
        table.sort(live)
        if op <= 3 or #live < 4 then
          ids = ids + 1
          local r = rand_row(ids)
          rels.t:insert(r)
          staged[ids] = r
        elseif op <= 8 then
          local id = live[random(#live)]
          local r = rand_row(id)
          if random(3) > 1 then r.g = staged[id].g end        -- mostly a score change in its group
          rels.t:update(r)
          staged[id] = r
        else
          local id = live[random(#live)]
          rels.t:delete{ id = id }
          staged[id] = nil
        end
      end
      if rollback then p:rollback() else
        if not single then p:commit() end
        model = staged
      end
      if single then
        table.sort(last_events)
        assert.same(diff(before, expected_top(model, "g", 3, by_g)), last_events)
      end
      check()
    end
  end)

  it("moves only the rows between a row's two places, and fills a vacancy from the group (TOP-2, TOP-3)", function()
    p = runnel.open()
    local t = p:table("players", { {"id","int"}, {"g","int"}, {"score","int"}, key = "id" })
    local top = t:top{ n = 3, by = "g", order = { {"score","desc"} } }
    local log = H.record(top)
    for i = 1, 6 do t:insert{ id = i, g = 1, score = i * 10 } end   -- top: 6, 5, 4
    H.clear(log)
    t:update{ id = 4, score = 55 }                                 -- 4 passes 5: two rows swap
    assert.same({ "UPDATE 5", "UPDATE 4" }, H.verbs(log))
    assert.same({ 2, 3 }, { log[1][4].rank, log[1][3].rank })
    H.clear(log)
    t:delete{ id = 5 }                                             -- the 3rd row leaves: 3 fills in
    assert.same({ "DELETE 5", "INSERT 3" }, H.verbs(log))
    assert.equal(3, log[2][3].rank)
    H.clear(log)
    t:update{ id = 1, g = 2 }                                       -- another group: nothing here
    assert.same({ "INSERT 1" }, H.verbs(log))
    H.clear(log)
    t:delete{ id = 6 }; t:delete{ id = 4 }                          -- the group shrinks below n
    assert.same({ "DELETE 6", "UPDATE 4", "UPDATE 3", "INSERT 2", "DELETE 4", "UPDATE 3", "UPDATE 2" }, H.verbs(log))
    assert.same({ [2] = 2, [3] = 1, [1] = 1 }, (function()
      local out = {}
      for row, id in top:rows() do out[id] = row.rank end
      return out
    end)())
  end)

  it("ranks a per-guild leaderboard over a join (README example)", function()
    p = runnel.open()
    local guilds  = p:table("guilds",  { {"id","int"}, {"name","string"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"name","string"}, {"guild_id","int"},
                                         {"score","int", default = 0}, key = "id" })
    local board = players:join(guilds, { on = "guild_id" })
                         :top{ n = 3, by = "guild_id", order = { {"score","desc"}, {"name","asc"} } }
    local pushes = {}
    board:sink(function(verb, row, old)
      local r = row or old
      pushes[#pushes + 1] = ("%s %s %s #%s"):format(verb, r["guilds.name"], r.name,
                                                   row and row.rank or "-")
    end)
    p:begin()
    guilds:insert{ id = 1, name = "owls" }
    guilds:insert{ id = 2, name = "foxes" }
    for i, n in ipairs{ "ann", "bob", "cid", "dee", "eve" } do
      players:insert{ id = i, name = n, guild_id = i <= 4 and 1 or 2, score = i * 10 }
    end
    p:commit()
    pushes = {}
    players:update{ id = 1, score = 100 }              -- ann jumps to the top of the owls
    assert.same({ "DELETE owls bob #-", "UPDATE owls dee #2", "UPDATE owls cid #3", "INSERT owls ann #1" }, pushes)
    local idx = players:index{ "score", "desc" }
    local names = {}
    for row in idx:range{ limit = 3 } do names[#names + 1] = row.name end
    assert.same({ "ann", "eve", "dee" }, names)
    assert.equal(2, idx:rank(50))                      -- eve: one row scores more
    assert.equal(3, idx:count{ from = 100, to = 40 })
  end)

  it("ranks an aggregate: a global board of totals", function()
    p = runnel.open()
    local scores = p:table("scores", { {"player","string"}, {"points","int"} })
    local totals = scores:aggregate{ by = "player", total = runnel.sum("points") }
    local board = totals:top{ n = 2, order = { {"total","desc"} } }
    local log = H.record(board)
    scores:insert{ player = "a", points = 5 }
    scores:insert{ player = "b", points = 7 }
    scores:insert{ player = "c", points = 1 }
    scores:insert{ player = "c", points = 10 }           -- c passes both: b leaves
    local rows = {}
    for row in board:rows() do rows[row.rank] = row.player end
    assert.same({ "c", "b" }, rows)
    assert.equal("DELETE", log[#log - 2][1])
  end)

  it("rebuilds a top whose state missed groups or whose declaration changed (TOP-3)", function()
    local dir = H.tmpdir()
    local cols = { {"id","int"}, {"score","int"}, key = "id" }
    p = runnel.open{ path = dir }
    local t = p:table("t", cols)
    t:top{ n = 2, order = { {"score","desc"} }, name = "best" }
    for i = 1, 5 do t:insert{ id = i, score = i } end
    p:close()
    p = runnel.open{ path = dir }                       -- groups without the top
    t = p:table("t", cols)
    t:update{ id = 1, score = 50 }
    t:delete{ id = 5 }
    p:close()
    p = runnel.open{ path = dir }
    t = p:table("t", cols)
    local function board(top)
      local out = {}
      for row in top:rows() do out[row.rank] = row.id end
      return out
    end
    assert.same({ 1, 4 }, board(t:top{ n = 2, order = { {"score","desc"} }, name = "best" }))
    p:close()
    p = runnel.open{ path = dir }
    t = p:table("t", cols)
    assert.same({ 2, 3, 4 }, board(t:top{ n = 3, order = { "score" }, name = "best" }))
  end)

  it("reads an index through runnel.attach: whole groups only, in its order (INDEX-3)", function()
    local dir = H.tmpdir()
    p = runnel.open(dir)
    local t = p:table("t", { {"id","int"}, {"score","int", null = true}, {"name","string"}, key = "id" })
    local idx = t:index{ "score", "desc", "name", name = "by_score" }
    p:begin()
    for i, s in ipairs{ 30, 10, 20, 20 } do t:insert{ id = i, score = s, name = "p" .. i } end
    t:insert{ id = 5, name = "none" }
    p:commit()
    local att = runnel.attach(dir, "by_score")
    local function ids(iter)
      local out = {}
      for row in iter do out[#out + 1] = row.id end
      return out
    end
    assert.same({ 1, 3, 4, 2, 5 }, ids(att:range{}))
    assert.same({ 3, 4, 2 }, ids(att:range{ from = 20, to = 10 }))
    assert.same({ 4 }, ids(att:range{ from = { 20, "p4" }, limit = 1 }))
    assert.equal(2, att:rank(20))
    assert.equal(4, att:count{ from = 20 })             -- 20, 20, 10 and the null, last
    p:begin()
    t:update{ id = 2, score = 99 }                      -- read-your-writes inside the group …
    assert.same({ 2, 1, 3, 4, 5 }, ids(idx:range{}))
    assert.same({ 1, 3, 4, 2, 5 }, ids(att:range{}))    -- … whole groups only from attach
    p:commit()
    assert.same({ 2, 1, 3, 4, 5 }, ids(att:range{}))
    att:close()
    p:close()
    p = nil
    local out = H.sh(("cd %s && lua5.4 -e 'local a = require(\"runnel\").attach(%q, \"by_score\") " ..
                      "for r in a:range{ limit = 2 } do io.write(r.name, \" \") end print(a:rank(30))'"):format(H.root, dir))
    assert.equal("p2 p1 2\n", out)
    assert.matches('no relation or store "nosuch" there', H.error_of(runnel.attach, dir, "nosuch"))
    assert.equal(5, runnel.attach(dir, "t"):count())    -- the table under it reads too (a table, not an index)
  end)

  it("orders ints of every size and sign numerically, in both directions and as groups (compact order keys)", function()
    local dir = H.tmpdir()
    p = runnel.open(dir)
    local t = p:table("n", { {"id","int"}, {"g","int"}, {"v","int", null = true}, key = "id" })
    local up = t:index{ "v", name = "up" }
    local down = t:index{ "v", "desc", name = "down" }
    local best = t:top{ n = 3, by = "g", order = { {"v","desc"} }, name = "best" }
    local values = { math.mininteger, -(1 << 40), -65537, -65536, -257, -256, -255, -2, -1, 0, 1, 255, 256,
                     65535, 65536, 1 << 40, math.maxinteger, -1, 256 }
    p:begin()
    for i, v in ipairs(values) do t:insert{ id = i, g = values[#values + 1 - i], v = v } end
    t:insert{ id = 100, g = 0 }                           -- a null: last either way
    p:commit()
    local function ids(iter) local out = {} for row in iter do out[#out + 1] = row.id end return out end
    local sorted = {}
    for i = 1, #values do sorted[i] = i end
    table.sort(sorted, function(a, b) return values[a] < values[b] or (values[a] == values[b] and a < b) end)
    sorted[#sorted + 1] = 100
    assert.same(sorted, ids(up:range{}))
    local rev = {}
    for i = #values, 1, -1 do rev[#rev + 1] = sorted[i] end
    table.sort(rev, function(a, b) return values[a] > values[b] or (values[a] == values[b] and a < b) end)
    rev[#rev + 1] = 100
    assert.same(rev, ids(down:range{}))
    assert.same({ 4, 5, 6 }, ids(up:range{ from = -65536, to = -256 }))
    -- regression: outside a group the walk cleared the scratch its bounds were in, so a to bound
    -- was read from reused memory after the first row (to alone ended nowhere)
    assert.same({ 1, 2, 3 }, ids(up:range{ to = -65537 }))
    assert.equal(3, up:count{ to = -65537 })
    assert.equal(4, up:rank(-65536))
    local above = 0
    for _, v in ipairs(values) do if v > -1 then above = above + 1 end end
    assert.equal(above + 1, down:rank(-1))                -- 1 + the rows before -1 in descending order
    assert.equal(#values + 1, best:count())               -- no group holds more than 3 rows
    local ranks = {}
    for row in best:rows() do ranks[row.id] = row.rank end
    assert.same({ 1, 2 }, { ranks[7], ranks[1] })        -- g = 256: v -255, then the smallest int (desc)
    p:close()
    p = nil
    local out, err, code = H.sh(("%s verify %s"):format(H.runnel_bin, dir))
    assert.equal(0, code, out .. err)
  end)

  it("refuses what it cannot order, naming the relation and the column", function()
    p = runnel.open()
    local t = p:table("m", { {"id","int"}, {"x","float", null = true}, {"l","list", null = true}, {"rank","int", null = true}, key = "id" })
    assert.matches('m.top: column "l" has type list', H.error_of(function() t:top{ n = 1, order = { "l" } } end))
    assert.matches('no column "nope"', H.error_of(function() t:top{ n = 1, order = { "nope" } } end))
    assert.matches('the rank column "rank" is already a column of m',
                   H.error_of(function() t:top{ n = 1, order = { "x" } } end))
    assert.matches("n must be a positive integer", H.error_of(function() t:top{ n = 0, order = { "x" } } end))
    assert.matches('m.top: ties = "dense" (equal values sharing a rank) is not offered yet',
                   H.error_of(function() t:top{ n = 1, order = { "x" }, rank = "pos", ties = "dense" } end), 1, true)
    assert.matches('m.top: ties must be "row"', H.error_of(function() t:top{ n = 1, order = { "x" }, rank = "pos", ties = 1 } end), 1, true)
    local top = t:top{ n = 1, order = { "x" }, rank = "pos" }
    t:insert{ id = 1, x = 1.5 }
    assert.matches('m.top: column "x" of row id 2 is NaN', H.error_of(function() t:insert{ id = 2, x = 0 / 0 } end))
    assert.equal(1, t:count())                          -- the group rolled back
    assert.equal(1, top:count())
    local long = p:table("long", { {"id","int"}, {"team","string"}, {"name","string"}, key = "id" })
    local by_name = long:top{ n = 1, by = "team", order = { "name" } }
    long:insert{ id = 1, team = "a", name = "short" }
    long:insert{ id = 2, team = ("x"):rep(600), name = "b" } -- a group longer than a key: kept too
    assert.equal(2, long:count())
    assert.equal(2, by_name:count())
    local s = p:stream("events", { {"x","int"} })
    assert.matches("events is a stream", H.error_of(function() s:top{ n = 1, order = { "x" } } end))
  end)
end)
