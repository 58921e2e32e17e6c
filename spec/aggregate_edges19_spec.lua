-- Aggregates, a distinct, a top and windows against a recomputation in
-- plain Lua: random inserts, updates, upserts and deletes in random groups
-- over one table, some groups rolled back by hand and some failing (so
-- runnel rolls them back), and after each group every derived relation is
-- compared with what the table's rows say it should hold, and with what
-- its sinks were told. Fixed seeds, bounded work.
local runnel = require "runnel"
local H = require "helper"

local SEEDS, GROUPS, KEYS = { 19, 1919, 424242, 7, 2026 }, 90, 30
local FLOATS = { -0.0, 0.0, 0.25, -1.5, 2.0, 3.75, -8.5 }
local LONG = ("x"):rep(300) -- longer than a value key: kept in a bucket of "am:"
local STRINGS = { "a", "b", "ab", "", "Straße", LONG .. "1", LONG .. "2" }
local WSIZE, WSTEP, TSIZE = 10, 5, 7
local FSIZE, FSTEP = 5.0, 2.5 -- over a float time column: starts and ends exact

local function pick(list) return list[math.random(#list)] end
local function maybe(v) if math.random() < 0.2 then return runnel.null end return v end

local function declare(p)
  local t = p:table("t", { {"id","int"}, {"g","int"}, {"v","int", null = true}, {"f","float", null = true},
                           {"s","string", null = true}, {"ts","int"}, {"ft","float"}, key = "id" })
  local r = { t = t }
  r.A = t:aggregate{ by = "g", name = "A", n = runnel.count(), k = runnel.count("v"), sv = runnel.sum("v"),
    lo = runnel.min("v"), hi = runnel.max("v"), av = runnel.avg("v"), sf = runnel.sum("f"), lf = runnel.min("f"),
    hf = runnel.max("f"), ls = runnel.min("s"), hs = runnel.max("s"),
    u = runnel.agg{ init = function() return {} end,
      add = function(st, row) -- reads its own aggregate too (it re-enters the aggregate's code)
        local _ = r.A:get(row.g)
        st[#st + 1] = row.id; table.sort(st); return st
      end,
      remove = function(st, row)
        local _ = r.A:get(row.g)
        for i, x in ipairs(st) do if x == row.id then table.remove(st, i) return st end end
        error("removed a row never added: " .. row.id)
      end,
      result = function(st) return table.concat(st, ",") end } }
  r.B = t:aggregate{ by = "g", name = "B", n = runnel.count(), k = runnel.count("v"), sv = runnel.sum("v"), -- A, attachable
    lo = runnel.min("v"), hi = runnel.max("v"), av = runnel.avg("v"), sf = runnel.sum("f"), lf = runnel.min("f"),
    hf = runnel.max("f"), ls = runnel.min("s"), hs = runnel.max("s") }
  r.G = t:aggregate{ name = "G", n = runnel.count(), sv = runnel.sum("v"), af = runnel.avg("f") }
  r.W = t:aggregate{ by = "g", window = runnel.hopping(WSIZE, WSTEP, "ts"), name = "W", n = runnel.count(),
                     sv = runnel.sum("v"), hf = runnel.max("f") }
  r.TW = t:aggregate{ window = runnel.tumbling(TSIZE, "ts"), name = "TW", n = runnel.count(), lo = runnel.min("s") }
  r.FW = t:aggregate{ by = "g", window = runnel.hopping(FSIZE, FSTEP, "ft"), name = "FW", n = runnel.count(),
                      sf = runnel.sum("f"), av = runnel.avg("v") }
  r.D = t:select({ "g", "s" }, "gs"):distinct("D")
  r.Df = t:select({ "f" }, "fs"):distinct("Df")
  r.top = t:top{ n = 3, by = "g", order = { {"v", "desc"}, {"s", "asc"} }, name = "top" }
  r.ftop = t:top{ n = 4, order = { "f", "ts" }, name = "ftop" } -- -0.0 and 0.0 tie: then ts, then row id
  return r
end

-- ---- the recomputation ----

local function add_value(e, name, x, min)
  if x == nil then return end
  if e[name] == nil or (min and x < e[name]) or (not min and x > e[name]) then e[name] = x end
end

local function zero(x) if x == 0 then return 0.0 end return x end -- -0.0 is 0.0 in min, max, sums, distinct

local function expect_A(rows)
  local out = {}
  for _, r in pairs(rows) do
    local e = out[r.g] or { g = r.g, n = 0, k = 0, ids = {}, fsum = nil, vsum = nil }
    out[r.g] = e
    e.n = e.n + 1
    e.ids[#e.ids + 1] = r.id
    if r.v then e.k = e.k + 1; e.vsum = (e.vsum or 0) + r.v end
    add_value(e, "lo", r.v, true); add_value(e, "hi", r.v, false)
    if r.f then e.fsum = (e.fsum or 0.0) + r.f end
    add_value(e, "lf", r.f and zero(r.f), true); add_value(e, "hf", r.f and zero(r.f), false)
    add_value(e, "ls", r.s, true); add_value(e, "hs", r.s, false)
  end
  for g, e in pairs(out) do
    table.sort(e.ids)
    out[g] = { g = g, n = e.n, k = e.k, sv = e.vsum, lo = e.lo, hi = e.hi,
               av = e.vsum and e.vsum / e.k, sf = e.fsum and zero(e.fsum), lf = e.lf, hf = e.hf,
               ls = e.ls, hs = e.hs, u = table.concat(e.ids, ",") }
  end
  return out
end

local function expect_G(rows)
  local n, sv, fs, fk = 0, nil, nil, 0
  for _, r in pairs(rows) do
    n = n + 1
    if r.v then sv = (sv or 0) + r.v end
    if r.f then fs = (fs or 0.0) + r.f; fk = fk + 1 end
  end
  if n == 0 then return {} end
  return { { n = n, sv = sv, af = fs and zero(fs / fk) } }
end

local function expect_W(rows)
  local out = {}
  for _, r in pairs(rows) do
    for start = (r.ts // WSTEP) * WSTEP - WSIZE + WSTEP, r.ts, WSTEP do
      local key = r.g .. "@" .. start
      local e = out[key] or { g = r.g, window_start = start, window_end = start + WSIZE, n = 0 }
      out[key] = e
      e.n = e.n + 1
      if r.v then e.sv = (e.sv or 0) + r.v end
      add_value(e, "hf", r.f and zero(r.f), false)
    end
  end
  return out
end

local function expect_FW(rows)
  local out = {}
  for _, r in pairs(rows) do
    for k = math.floor(r.ft / FSTEP) - 1, math.floor(r.ft / FSTEP) do
      local start = k * FSTEP
      local key = r.g .. "@" .. start
      local e = out[key] or { g = r.g, window_start = start + 0.0, window_end = start + FSIZE, n = 0 }
      out[key] = e
      e.n = e.n + 1
      if r.f then e.sf = zero((e.sf or 0.0) + r.f) end
      if r.v then e.vs, e.vk = (e.vs or 0) + r.v, (e.vk or 0) + 1; e.av = e.vs / e.vk end
    end
  end
  for _, e in pairs(out) do e.vs, e.vk = nil, nil end
  return out
end

local function expect_TW(rows)
  local out = {}
  for _, r in pairs(rows) do
    local start = (r.ts // TSIZE) * TSIZE
    local e = out[start] or { window_start = start, window_end = start + TSIZE, n = 0 }
    out[start] = e
    e.n = e.n + 1
    add_value(e, "lo", r.s, true)
  end
  return out
end

local function expect_distinct(rows, cols)
  local out = {}
  for _, r in pairs(rows) do
    local parts = {}
    for i, c in ipairs(cols) do
      local x = r[c]
      if type(x) == "number" then x = zero(x) end
      parts[i] = x == nil and "nil" or string.format("%q", x)
    end
    out[table.concat(parts, "|")] = true
  end
  return out
end

-- Order values: null after every value, in both directions; then row id.
local function before(x, y, desc)
  if x == y then return nil end
  if x == nil then return false end
  if y == nil then return true end
  if desc then return x > y end
  return x < y
end

-- order: { {col, desc}, … }; group: the by column or nil.
local function expect_top(rows, ids, n, group, order)
  local groups, out = {}, {}
  for _, r in pairs(rows) do
    local g = group and r[group] or 0
    groups[g] = groups[g] or {}
    table.insert(groups[g], r)
  end
  for _, list in pairs(groups) do
    table.sort(list, function(x, y)
      for _, o in ipairs(order) do
        local b = before(x[o[1]], y[o[1]], o[2])
        if b ~= nil then return b end
      end
      return ids[x.id] < ids[y.id]
    end)
    for rank = 1, math.min(n, #list) do
      local r = list[rank]
      out[r.id] = { id = r.id, g = r.g, v = r.v, f = r.f, s = r.s, ts = r.ts, ft = r.ft, rank = rank }
    end
  end
  return out
end

-- ---- runnel's side ----

local function read(rel, key_of)
  -- (a float window start's key: its %q form would differ from the model's number)
  local out = {}
  for r in rel:rows() do
    local k = key_of(r)
    assert(out[k] == nil, "two rows under one key")
    out[k] = r
  end
  return out
end

local function distinct_rows(rel, cols)
  local rows = {}
  for r in rel:rows() do rows[#rows + 1] = r end
  local out = expect_distinct(rows, cols)
  local n = 0
  for _ in pairs(out) do n = n + 1 end
  assert.equal(#rows, n, "a distinct holds one row twice")
  return out
end

-- A sink that keeps what it was told, only for committed groups.
local function replayed(rel, key_of)
  local state, pending = {}, {}
  rel:sink{
    insert = function(row) pending[#pending + 1] = { row = row } end,
    update = function(row, old) pending[#pending + 1] = { row = row, old = old } end,
    delete = function(old) pending[#pending + 1] = { old = old } end,
    commit = function()
      for _, c in ipairs(pending) do
        if c.old then
          local k = key_of(c.old)
          assert.same(c.old, state[k])
          state[k] = nil
        end
        if c.row then
          local k = key_of(c.row)
          assert.is_nil(state[k])
          state[k] = c.row
        end
      end
      pending = {}
    end,
    rollback = function() pending = {} end }
  return state
end

-- Floats are compared as their %q form: 0.0 and -0.0 differ there.
local function exact(x)
  if type(x) ~= "table" then return type(x) == "number" and math.type(x) == "float" and string.format("%q", x) or x end
  local out = {}
  for k, v in pairs(x) do out[k] = exact(v) end
  return out
end

local function run(seed)
  math.randomseed(seed)
  local dir = H.tmpdir()
  local p = runnel.open{ path = dir, sync = false }
  local r = declare(p)
  local attached = {} -- what another process reads: rows computed from the state by aggregate_read.c and others
  for _, name in ipairs{ "B", "G", "W", "TW", "FW", "D", "Df", "top", "ftop" } do
    attached[name] = runnel.attach(dir, name)
  end
  local t = r.t
  local by_g = function(x) return x.g end
  local by_gw = function(x) return x.g .. "@" .. x.window_start end
  local seen = {
    A = replayed(r.A, by_g), W = replayed(r.W, by_gw),
    TW = replayed(r.TW, function(x) return x.window_start end),
    top = replayed(r.top, function(x) return x.id end),
    ftop = replayed(r.ftop, function(x) return x.id end),
  }
  local rows, ids, next_id = {}, {}, 1 -- the model: the table's rows, row ids
  local function random_row(id)
    return { id = id, g = math.random(1, 4), v = maybe(math.random(-9, 9)), f = maybe(pick(FLOATS)),
             s = maybe(pick(STRINGS)), ts = math.random(-20, 40),
             ft = math.random(-16, 40) * 0.5 }
  end
  local function stored(row) -- the model's copy: nulls as nil
    local c = {}
    for k, v in pairs(row) do if v ~= runnel.null then c[k] = v end end
    return c
  end
  local function copy(m) local c = {}; for k, v in pairs(m) do c[k] = v end; return c end
  local rolled, failed = 0, 0
  for _ = 1, GROUPS do
    local keep_rows, keep_ids, keep_next = copy(rows), copy(ids), next_id
    local ending = math.random()
    p:begin()
    for _ = 1, math.random(1, 12) do
      local id = math.random(1, KEYS)
      local c = math.random()
      if not rows[id] then
        local row = random_row(id)
        if c < 0.5 then t:insert(row) else t:upsert(row) end
        rows[id] = stored(row)
        if not ids[id] then ids[id] = next_id; next_id = next_id + 1 end
      elseif c < 0.25 then
        t:delete{ id = id }
        rows[id] = nil
      elseif c < 0.4 then
        local row = random_row(id)
        t:upsert(row)
        rows[id] = stored(row)
      else
        local patch, col = { id = id }, pick{ "g", "v", "f", "s", "ts", "ft" }
        local fresh = random_row(id)[col]
        if col == "g" or col == "ts" or col == "ft" or fresh ~= runnel.null then patch[col] = fresh
        else patch[col] = runnel.null end
        t:update(patch)
        local row = copy(rows[id])
        if patch[col] == runnel.null then row[col] = nil else row[col] = patch[col] end
        rows[id] = row
      end
    end
    if ending < 0.15 then
      p:rollback()
      rolled = rolled + 1
    elseif ending < 0.25 then -- a change that fails: runnel rolls the group back
      local id = next(rows)
      local ok = pcall(t.insert, t, rows[id] or { id = 1, g = 1, ts = 0 })
      if rows[id] then assert.is_false(ok) else p:rollback() end
      failed = failed + 1
    else
      p:commit()
    end
    if ending < 0.25 then rows, ids, next_id = keep_rows, keep_ids, keep_next end
    for id in pairs(rows) do assert.equal(ids[id], t:id_of(id)) end

    local A, W, TW, top = expect_A(rows), expect_W(rows), expect_TW(rows),
      expect_top(rows, ids, 3, "g", { { "v", true }, { "s", false } })
    assert.same(exact(A), exact(read(r.A, by_g)))
    assert.same(exact(A), exact(seen.A))
    local B = {}
    for g, e in pairs(A) do B[g] = {}; for k, v in pairs(e) do B[g][k] = v end; B[g].u = nil end
    assert.same(exact(B), exact(read(r.B, by_g)))
    local G = {}
    for row in r.G:rows() do G[#G + 1] = row end
    assert.same(exact(expect_G(rows)), exact(G))
    assert.same(exact(W), exact(read(r.W, by_gw)))
    assert.same(exact(W), exact(seen.W))
    assert.same(exact(expect_FW(rows)), exact(read(r.FW, by_gw)))
    assert.same(exact(TW), exact(read(r.TW, function(x) return x.window_start end)))
    assert.same(exact(TW), exact(seen.TW))
    assert.same(expect_distinct(rows, { "g", "s" }), distinct_rows(r.D, { "g", "s" }))
    assert.same(expect_distinct(rows, { "f" }), distinct_rows(r.Df, { "f" }))
    assert.same(exact(top), exact(read(r.top, function(x) return x.id end)))
    assert.same(exact(top), exact(seen.top))
    local ftop = expect_top(rows, ids, 4, nil, { { "f", false }, { "ts", false } })
    assert.same(exact(ftop), exact(read(r.ftop, function(x) return x.id end)))
    assert.same(exact(ftop), exact(seen.ftop))
    for g, e in pairs(A) do assert.same(exact(e), exact(r.A:get(g))) end
    for name, att in pairs(attached) do
      local mine, theirs = {}, {}
      for row, id in r[name]:rows() do mine[#mine + 1] = { id, row } end
      for row, id in att:rows() do theirs[#theirs + 1] = { id, row } end
      assert.same(exact(mine), exact(theirs), name)
    end
  end
  assert.is_true(rolled > 0 and failed > 0, "the run rolled no group back")
  for _, att in pairs(attached) do att:close() end
  p:close()
  H.cleanup()
end

describe("aggregates, a distinct, a top and windows against a recomputation", function()
  for _, seed in ipairs(SEEDS) do
    it("agree after every group, rolled back or not (seed " .. seed .. ")", function() run(seed) end)
  end
end)
