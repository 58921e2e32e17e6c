-- model10_campaign.lua — a randomized differential test of runnel against a
-- plain-Lua model that recomputes every derived relation from scratch.
--
-- One fixed pipeline over three tables (A keyed, B keyed, K keyless) and a
-- stream E: tops, indexes, distincts, a filter/map chain over a left join,
-- an aggregate over it, windowed aggregates with and without grace, CDC
-- images and sinks (raw and consolidated). Random groups of changes (some
-- that must fail, explicit rollbacks, p:batch with errors, a sink that
-- fails the group, close and reopen of the state) are applied to runnel and
-- to the model; after each group every relation is compared with the model,
-- every sink's events with the relation's rows, and every CDC image with
-- the rows before and after the group.
--
-- Version 11 (opts.version = 11; `make model`'s default) draws its new
-- features from a second generator, so version 10's seeds replay as they
-- were: groups applied through p:run of NDJSON (blank and bad lines, stop
-- and skip), attach reads, id_of/get of absent keys, a second open of the
-- state refused, undeclared relations dropped or declared again, columns
-- of A, B and K added, dropped, moved and renamed (with and without was),
-- the inner join's on and kind, and the maps' columns changing. A note
-- that a relation's sinks were not told makes its copies start again.
--
-- M.run{ seed =, groups =, reopen_every =, version = } -> nil | "seed S group G: diff"
local runnel = require "runnel"
local null = runnel.null

local M = {}

local LONG = string.rep("L", 600)

-- ---- random numbers (own LCG: independent of math.random) ----------------
local function rng_new(seed)
  local s = (seed * 2654435761 + 12345) & 0x7fffffffffffffff
  local r = {}
  function r.int(a, b)
    s = (s * 6364136223846793005 + 1442695040888963407) & 0xffffffffffffffff
    local x = (s >> 33) & 0x7fffffff
    return a + x % (b - a + 1)
  end
  function r.pick(t) return t[r.int(1, #t)] end
  function r.chance(pct) return r.int(1, 100) <= pct end
  return r
end

-- ---- rows: plain tables, nil for null; canonical strings -----------------
local function fmt(v)
  if v == nil then return "~" end
  if type(v) == "string" then
    if #v > 24 then return ("%q"):format(v:sub(1, 3) .. "…(" .. #v .. ")…" .. v:sub(-3)) end
    return ("%q"):format(v)
  end
  if math.type(v) == "float" then return ("%.17g"):format(v) .. "f" end
  return tostring(v)
end

local function ser(row, cols)
  if row == nil then return "<none>" end
  local out = {}
  for i, c in ipairs(cols) do out[i] = c .. "=" .. fmt(row[c]) end
  return "{" .. table.concat(out, ",") .. "}"
end

local function copy_row(row, cols)
  if row == nil then return nil end
  local t = {}
  for _, c in ipairs(cols) do
    local v = row[c]
    if v == null then v = nil end
    t[c] = v
  end
  return t
end

local function cols_of(rel)
  local out = {}
  for i, c in ipairs(rel:schema().columns) do out[i] = c.name end
  return out
end

local function deepcopy(t)
  if type(t) ~= "table" or t == null then return t end
  local o = {}
  for k, v in pairs(t) do o[k] = deepcopy(v) end
  return o
end

-- ---- the pipeline ---------------------------------------------------------
local ACOLS = { "id", "g", "v", "s", "b", "c" }
local BCOLS = { "bid", "name", "w" }
local KCOLS = { "x", "y" }
local ECOLS = { "k", "ts", "v", "tf" }

local function declare(p, variant)
  local R = {}
  local adecl = { {"id","int"}, {"g","string", null = true}, {"v","int", null = true},
                  {"s","string"}, {"b","int", null = true}, {"c","int", default = 7}, key = "id" }
  local bdecl = { {"bid","int"}, {"name","string"}, {"w","int", null = true}, key = "bid" }
  -- version 11: a column added, dropped or renamed at a reopen (its place
  -- in the list varies too)
  for _, x in ipairs{ { variant.az, adecl }, { variant.bz, bdecl } } do
    local z, decl = x[1], x[2]
    if z then table.insert(decl, z.pos, { z.name, "int", null = true, default = z.default, was = z.was }) end
  end
  R.A = p:table("A", adecl)
  R.B = p:table("B", bdecl)
  local kdecl = { {"x","int"}, {"y","string", null = true} }
  if variant.kz then table.insert(kdecl, variant.kz.pos, { variant.kz.name, "int", null = true, was = variant.kz.was }) end
  R.K = p:table("K", kdecl)
  R.E = p:stream("E", { {"k","string"}, {"ts","int"}, {"v","int"}, {"tf","float"} })
  R.top1 = R.A:top{ n = variant.top1n, by = "g", order = { {"v", "desc"} }, name = "top1" }
  R.top2 = R.A:top{ n = variant.top2n, order = { "v", "asc", "s", "desc" }, rank = "pos", name = "top2" }
  R.ix1 = R.A:index{ "v", "desc", "s", variant.ix1s, name = "ix1" }
  R.ix2 = R.K:index{ "y", "x", "desc", name = "ix2" }
  R.d1 = R.A:select({ "g", "v" }, "A.sel"):distinct("d1")
  R.d2 = R.K:distinct("d2")
  R.j = R.A:join(R.B, { on = "b", kind = "left", name = "j" })
  local mod = variant.jfmod
  R.jf = R.j:filter(function(r) return r.w == nil or r.w % mod ~= 0 end, "jf")
  local sep = variant.sep
  R.jm = R.jf:map(function(r)
    return { id = r.id, label = (r.name or "-") .. sep .. r.s, tot = (r.v or 0) + (r.w or 0) }
  end, variant.jmx and { {"id","int"}, {"label","string"}, {"tot","int"}, {"note","string", null = true, default = variant.jmx.default }, key = "id" }
       or { {"id","int"}, {"label","string"}, {"tot","int"}, key = "id" }, "jm")
  R.ja = R.jf:aggregate{ by = "name", n = runnel.count(), sm = runnel.sum("v"), mn = variant.jamin and runnel.min("w") or runnel.max("w"), name = "ja" }
  R.ji = R.A:join(R.B, { on = variant.jion or "b", kind = variant.jikind, name = "ji" })
  R.jtop = R.ji:top{ n = 2, by = "name", order = { {"w", "desc"}, {"v", "asc"} }, name = "jtop" }
  R.kj = R.K:join(R.B, { on = "x", kind = "left", name = "kj" })
  R.ka = R.K:aggregate{ by = "y", n = runnel.count(), sx = runnel.sum("x"), name = "ka" }
  R.fA = R.A:filter(function(r) return r.v ~= nil end, "fA")
  R.ftop = R.fA:top{ n = variant.ftopn, by = "b", order = { {"s", "desc"} }, name = "ftop" }
  R.jix = R.jm:index{ "tot", "desc", name = "jix" }
  R.w1 = R.E:aggregate{ by = "k", window = runnel.tumbling(10, "ts"), grace = 5,
                        n = runnel.count(), sm = runnel.sum("v"), name = "w1" }
  R.w4 = R.E:aggregate{ window = runnel.tumbling(4, "tf"), grace = 1.5, n = runnel.count(), name = "w4" }
  R.top3 = R.A:top{ n = 1, by = { "g", "b" }, order = { "s", { "v", "desc" } }, name = "top3" }
  R.d3 = R.j:select({ "name", "g" }, "j.sel"):distinct("d3")
  R.ktop = R.K:top{ n = 2, by = "y", order = { {"x", "desc"} }, name = "ktop" }
  R.atop = R.ka:top{ n = 1, order = { {"n", "desc"} }, name = "atop" }
  R.jaf = R.ja:filter(function(r) return r.n >= 2 end, "jaf")
  R.d4 = R.top1:select({ "g", "rank" }, "top1.sel"):distinct("d4")
  R.wj = R.w1:join(R.B, { mapper = function(r) return r.n % 5 end, kind = "left", name = "wj" })
  R.w2 = R.E:aggregate{ window = runnel.hopping(10, 4, "ts"), n = runnel.count(), mx = runnel.max("v"), name = "w2" }
  R.w3 = R.E:aggregate{ by = "k", window = runnel.hopping(6, 3, "ts"), grace = 2, n = runnel.count(), name = "w3" }
  R.es = R.E:join(R.B, { mapper = function(r) return r.v % 5 end, name = "es" })
  R.cA = R.A:cdc{ preimage = "full", postimage = true, name = "cA" }
  R.cA2 = R.A:cdc{ preimage = true, postimage = true, name = "cA2" }
  R.cJ = R.jm:cdc{ preimage = "full", postimage = true, name = "cJ" }
  R.cT = R.top1:cdc{ preimage = "full", postimage = true, name = "cT" }
  R.cK = R.K:cdc{ preimage = "full", postimage = true, name = "cK" }
  R.zT = R.top1:cdc{ format = "debezium", name = "zT" }
  R.zD = R.d1:cdc{ format = "debezium", name = "zD" }
  R.fJ = R.jm:cdc{ format = "flink", name = "fJ" }
  R.fT = R.top2:cdc{ format = "flink", name = "fT" }
  R.cKa = R.ka:cdc{ preimage = true, postimage = true, name = "cKa" }
  R.cD = R.d1:cdc{ preimage = "full", postimage = true, name = "cD" }
  R.cW = R.w1:cdc{ preimage = true, postimage = true, name = "cW" }
  -- a plain (keyless) map over the keyless table; version 11 changes its
  -- columns at reopens, its function staying
  local kmcols = { {"x","int"}, {"yy","string", null = true} }
  if variant.kmx then table.insert(kmcols, variant.kmx.pos, { "extra", "int", null = true, default = variant.kmx.default }) end
  R.km = R.K:map(function(r) return { x = r.x, yy = r.y } end, kmcols, "km")
  return R
end

-- Relations whose events are mirrored (table-like), and the CDC streams
-- with the relation each one reads.
local TABLELIKE = { "A", "B", "K", "top1", "top2", "ix1", "ix2", "d1", "d2", "j", "jf", "jm", "ja",
                    "ji", "jtop", "w1", "w2", "w3", "kj", "ka", "fA", "ftop", "jix", "w4", "top3", "d3", "ktop", "atop", "jaf", "d4", "wj", "km" }
local CDCS = { cA = { "A", "full" }, cA2 = { "A", true }, cJ = { "jm", "full" }, cT = { "top1", "full" },
               cK = { "K", "full" }, cW = { "w1", true } }
local CDCNAMES = { "cA", "cA2", "cJ", "cT", "cK", "cW", "cD", "cKa" }
CDCS.cKa = { "ka", true }
CDCS.cD = { "d1", "full" }

local FMTS = { zT = { "top1", "debezium" }, zD = { "d1", "debezium" }, fJ = { "jm", "flink" }, fT = { "top2", "flink" } }
local DURABLE = { "A", "top1", "d2", "jm", "w1", "kj", "ftop" }
local function rel_sink_durable(rel, t) rel:sink(t) end

-- ---- sinks: buffered per group, dropped on rollback ------------------------
local function attach_sinks(R, S)
  S.pending, S.cpending, S.cdcpending = {}, {}, {}
  S.boom_armed = true
  for _, name in ipairs(TABLELIKE) do
    local rel, cols = R[name], S.cols[name]
    S.pending[name], S.cpending[name] = {}, {}
    local function rec(buf, verb, row, old, info)
      buf[#buf + 1] = { verb = verb, id = info.id, seq = info.seq, n = info.n,
                        row = copy_row(row, cols), old = copy_row(old, cols) }
    end
    for _, cons in ipairs{ false, true } do
      local key = cons and "cpending" or "pending"
      rel:sink{ consolidate = cons,
        insert = function(row, info) rec(S[key][name], "INSERT", row, nil, info) end,
        update = function(row, old, info) rec(S[key][name], "UPDATE", row, old, info) end,
        delete = function(old, info) rec(S[key][name], "DELETE", nil, old, info) end,
        commit = function(seq) S.committed[#S.committed + 1] = { key, name, seq } end,
        rollback = function(seq) S[key][name] = {}; S.rolled[#S.rolled + 1] = { key, name, seq } end }
    end
  end
  for _, name in ipairs(CDCNAMES) do
    local cols = cols_of(R[name])
    S.cdcpending[name] = {}
    R[name]:sink{
      insert = function(row, info)
        local t = copy_row(row, cols)
        t["#id"] = info.id
        S.cdcpending[name][#S.cdcpending[name] + 1] = t
      end,
      rollback = function() S.cdcpending[name] = {} end }
  end
  -- durable sinks (raw and consolidated): each group once, in order, after
  -- it is durable; compared with the in-group sinks' events of that group
  for _, name in ipairs(DURABLE) do
    local cols = S.cols[name]
    for _, cons in ipairs{ false, true } do
      local dk = name .. (cons and "+c" or "")
      S.dgot[dk] = S.dgot[dk] or {}
      local cur = {}
      local function rec(verb, row, old, info)
        cur[#cur + 1] = { verb = verb, id = info.id, seq = info.seq, n = info.n,
                          row = copy_row(row, cols), old = copy_row(old, cols) }
      end
      rel_sink_durable(R[name], {
        consolidate = cons, durable = true, name = "d_" .. name .. (cons and "_c" or ""),
        insert = function(row, info) rec("INSERT", row, nil, info) end,
        update = function(row, old, info) rec("UPDATE", row, old, info) end,
        delete = function(old, info) rec("DELETE", nil, old, info) end,
        commit = function(seq)
          S.dgot[dk][#S.dgot[dk] + 1] = { seq = seq, evs = cur }
          cur = {}
        end })
    end
  end
  -- debezium and flink logs: their rows as text
  S.fmtpending = {}
  for name, of in pairs(FMTS) do
    S.fmtpending[name] = {}
    local cols = S.cols[of[1]]
    R[name]:sink{
      insert = function(row)
        local t
        if of[2] == "debezium" then
          t = ("%s %s <- %s %s/%s/%s"):format(row.op, ser(copy_row(row.after, cols), cols),
            ser(copy_row(row.before, cols), cols), tostring(row.source.relation), tostring(row.source.seq), tostring(row.source.id))
        else
          t = row.rowkind .. " " .. ser(copy_row(row, cols), cols)
        end
        S.fmtpending[name][#S.fmtpending[name] + 1] = t
      end,
      rollback = function() S.fmtpending[name] = {} end }
  end
  -- the stream join's events
  S.espending = {}
  local escols = cols_of(R.es)
  S.escols = escols
  R.es:sink{
    insert = function(row, info)
      local t = copy_row(row, escols)
      t["#id"] = info.id
      S.espending[#S.espending + 1] = t
    end,
    rollback = function() S.espending = {} end }
  -- the sink that fails a group: an A row whose s is "boom"
  R.A:sink(function(verb, row)
    if row and row.s == "boom" then error("boom sink") end
  end)
end

-- ---- the model ------------------------------------------------------------
local function model_new()
  return { es = {}, A = {}, Aid = {}, Anext = 1, B = {}, Bid = {}, Bnext = 1, K = {}, Knext = 1,
           Enext = 1, wins = { w1 = { maxts = nil, acc = {}, late = 0 },
                               w3 = { maxts = nil, acc = {}, late = 0 }, w2 = { acc = {}, late = 0 },
                               w4 = { maxts = nil, acc = {}, late = 0 } } }
end

-- A snapshot of the model to go back to (its append-only lists by length).
local function model_snapshot(m)
  local snap = {}
  for k, v in pairs(m) do
    if k ~= "wins" and k ~= "es" then snap[k] = deepcopy(v) end
  end
  snap.nes = #m.es
  snap.wins = {}
  for name, w in pairs(m.wins) do snap.wins[name] = { maxts = w.maxts, late = w.late, nacc = #w.acc } end
  return snap
end

local function model_restore(m, snap)
  for k, v in pairs(snap) do
    if k ~= "wins" and k ~= "nes" then m[k] = v end
  end
  for i = #m.es, snap.nes + 1, -1 do m.es[i] = nil end
  for name, w in pairs(m.wins) do
    local sw = snap.wins[name]
    w.maxts, w.late = sw.maxts, sw.late
    for i = #w.acc, sw.nacc + 1, -1 do w.acc[i] = nil end
  end
end

local function rows_equal(a, b, cols)
  for _, c in ipairs(cols) do if a[c] ~= b[c] then return false end end
  return true
end

local WSPEC = {
  w1 = { size = 10, step = 10, grace = 5 },
  w2 = { size = 10, step = 4 },
  w4 = { size = 4, step = 4, grace = 1.5, col = "tf" },
  w3 = { size = 6, step = 3, grace = 2 },
}

local function windows_of(spec, ts)
  local out = {}
  local kmax = math.floor(ts / spec.step)
  local k = kmax
  while k * spec.step + spec.size > ts do k = k - 1 end
  for kk = k + 1, kmax do out[#out + 1] = spec.col and (kk * spec.step + 0.0) or kk * spec.step end
  return out
end

local function model_event(m, ev)
  local b = m.B[ev.v % 5]
  if b then
    local r = { k = ev.k, ts = ev.ts, v = ev.v, tf = ev.tf }
    for _, c in ipairs(m.bcols) do r[c] = b[c] end
    m.es[#m.es + 1] = r
  end
  for name, spec in pairs(WSPEC) do
    local w = m.wins[name]
    local kept, dropped = {}, false
    local t = ev[spec.col or "ts"]
    for _, start in ipairs(windows_of(spec, t)) do
      local g = spec.grace
      if g and not spec.col then g = math.ceil(g) end
      if g and w.maxts and w.maxts >= start + spec.size + g then
        dropped = true
      else
        kept[#kept + 1] = start
      end
    end
    if dropped then w.late = w.late + 1 end
    if #kept > 0 then w.acc[#w.acc + 1] = { ev = ev, starts = kept } end
    if spec.grace and (w.maxts == nil or t > w.maxts) then w.maxts = t end
  end
  m.Enext = m.Enext + 1
end

-- Order comparison (asc/desc per column, null after every value), then id.
local function order_cmp(a, b, order, ida, idb)
  for _, o in ipairs(order) do
    local x, y = a[o[1]], b[o[1]]
    if x ~= y then
      if x == nil then return false end
      if y == nil then return true end
      if o[2] == "desc" then return x > y end
      return x < y
    end
  end
  if ida then return ida < idb end
  return false
end

-- Compares a row's prefix with bound values: -1, 0, 1 in index order.
local function bound_cmp(row, bound, order)
  for i, bv in ipairs(bound) do
    local o = order[i]
    local x = row[o[1]]
    if x ~= bv then
      if x == nil then return 1 end
      local less = (o[2] == "desc") and (x > bv) or (o[2] ~= "desc" and x < bv)
      return less and -1 or 1
    end
  end
  return 0
end

-- The top of rows (list of { id, row }) per by group.
local function model_top(list, by, order, n, rankcol)
  local groups = {}
  for _, e in ipairs(list) do
    local g = by and fmt(e.row[by]) or ""
    groups[g] = groups[g] or {}
    table.insert(groups[g], e)
  end
  local out = {}
  for _, l in pairs(groups) do
    table.sort(l, function(x, y) return order_cmp(x.row, y.row, order, x.id, y.id) end)
    for i = 1, math.min(n, #l) do
      local r = deepcopy(l[i].row)
      r[rankcol] = i
      out[l[i].id] = r
    end
  end
  return out
end

local function join_rows(m, inner, on)
  local out = {}
  for k, a in pairs(m.A) do
    local b = a[on or "b"] and m.B[a[on or "b"]]
    if b or not inner then
      local r = deepcopy(a)
      if b then for _, c in ipairs(m.bcols) do r[c] = b[c] end end
      out[k] = r
    end
  end
  return out
end

-- ---- checks ---------------------------------------------------------------
local check_durable

local function fail(ctx, msg, ...)
  error({ diff = ctx .. ": " .. msg:format(...) }, 0)
end

-- Current rows of a relation by id (plain copies).
local function rows_by_id(rel, cols)
  local out = {}
  for row, id in rel:rows() do out[id] = copy_row(row, cols) end
  return out
end

local function compare_by_id(ctx, what, got, want, cols)
  for id, r in pairs(want) do
    if got[id] == nil then fail(ctx, "%s: id %d missing, model has %s", what, id, ser(r, cols)) end
    if not rows_equal(got[id], r, cols) then
      fail(ctx, "%s: id %d is %s, model has %s", what, id, ser(got[id], cols), ser(r, cols))
    end
  end
  for id, r in pairs(got) do
    if want[id] == nil then fail(ctx, "%s: id %d is %s, model has no such row", what, id, ser(r, cols)) end
  end
end

-- Compares rows by a key function; returns the key -> id map of got.
local function compare_by_key(ctx, what, got, want, cols, keyf)
  local gk, ids = {}, {}
  for id, r in pairs(got) do
    local k = keyf(r)
    if gk[k] then fail(ctx, "%s: key %s twice (ids %d and %d)", what, k, ids[k], id) end
    gk[k], ids[k] = r, id
  end
  for k, r in pairs(want) do
    if gk[k] == nil then fail(ctx, "%s: key %s missing, model has %s", what, k, ser(r, cols)) end
    if not rows_equal(gk[k], r, cols) then
      fail(ctx, "%s: key %s is %s, model has %s", what, k, ser(gk[k], cols), ser(r, cols))
    end
  end
  for k, r in pairs(gk) do
    if want[k] == nil then fail(ctx, "%s: key %s is %s, model has no such row", what, k, ser(r, cols)) end
  end
  return ids
end

-- A derived keyed relation's ids: a key keeps its id for good (reuse rule),
-- two keys never share one.
local function check_stable_ids(ctx, st, what, ids)
  if st.midgroup then return end
  st.k2id[what] = st.k2id[what] or {}
  st.id2k[what] = st.id2k[what] or {}
  local k2id, id2k = st.k2id[what], st.id2k[what]
  for k, id in pairs(ids) do
    if k2id[k] and k2id[k] ~= id then fail(ctx, "%s: key %s had id %d, now %d", what, k, k2id[k], id) end
    if id2k[id] and id2k[id] ~= k then fail(ctx, "%s: id %d was key %s, now key %s", what, id, id2k[id], k) end
    k2id[k], id2k[id] = id, k
  end
end

local function keyf_of(keys)
  return function(r)
    local out = {}
    for i, c in ipairs(keys) do out[i] = fmt(r[c]) end
    return table.concat(out, "|")
  end
end

local function model_expect(st)
  local m = st.m
  local W = {}
  local alist = {}
  for k, r in pairs(m.A) do alist[#alist + 1] = { id = m.Aid[k], row = r } end
  W.A = {}
  for k, r in pairs(m.A) do W.A[m.Aid[k]] = r end
  W.B = {}
  for k, r in pairs(m.B) do W.B[m.Bid[k]] = r end
  W.K = {}
  for id, r in pairs(m.K) do W.K[id] = r end
  W.top1 = model_top(alist, "g", { {"v", "desc"} }, st.variant.top1n, "rank")
  W.top2 = model_top(alist, nil, { {"v", "asc"}, {"s", "desc"} }, st.variant.top2n, "pos")
  W.ix1 = W.A
  W.ix2 = W.K
  return W, alist
end

local function distinct_of(rows, cols)
  local out = {}
  for _, r in pairs(rows) do
    local t = {}
    for _, c in ipairs(cols) do t[c] = r[c] end
    out[ser(t, cols)] = t
  end
  return out
end

local function check_distinct(ctx, st, name, got, want, cols)
  local gk = {}
  if st.midgroup then
    for id, r in pairs(got) do
      local k = ser(r, cols)
      if gk[k] then fail(ctx, "%s: row %s twice", name, k) end
      gk[k] = id
    end
    for k in pairs(want) do if not gk[k] then fail(ctx, "%s: row %s missing", name, k) end end
    for k in pairs(gk) do if not want[k] then fail(ctx, "%s: row %s not in the model", name, k) end end
    return
  end
  st.dmax[name] = st.dmax[name] or 0
  local prev = st.dprev[name] or {}
  local newmax = st.dmax[name]
  for id, r in pairs(got) do
    local k = ser(r, cols)
    if gk[k] then fail(ctx, "%s: row %s twice", name, k) end
    gk[k] = id
    if prev[id] == nil and id <= st.dmax[name] then
      fail(ctx, "%s: row %s got id %d, not above the ids used before (%d)", name, k, id, st.dmax[name])
    end
    if id > newmax then newmax = id end
  end
  for k in pairs(want) do if not gk[k] then fail(ctx, "%s: row %s missing", name, k) end end
  for k in pairs(gk) do if not want[k] then fail(ctx, "%s: row %s not in the model", name, k) end end
  st.dmax[name] = newmax
  st.dprev[name] = got
end

local function window_rows(m, name, by, aggs)
  local spec = WSPEC[name]
  local out = {}
  for _, a in ipairs(m.wins[name].acc) do
    for _, start in ipairs(a.starts) do
      local key = (by and fmt(a.ev[by]) or "") .. "|" .. start
      local r = out[key]
      if not r then
        r = { window_start = start, window_end = start + spec.size, n = 0 }
        if spec.col then r.window_end = start + spec.size + 0.0 end
        if by then r[by] = a.ev[by] end
        out[key] = r
      end
      r.n = r.n + 1
      if aggs.sm then r.sm = (r.sm or 0) + a.ev.v end
      if aggs.mx then r.mx = math.max(r.mx or a.ev.v, a.ev.v) end
    end
  end
  local keyed = {}
  local kf = keyf_of(by and { by, "window_start", "window_end" } or { "window_start", "window_end" })
  for _, r in pairs(out) do keyed[kf(r)] = r end
  return keyed, kf
end

-- The index checks: range/rank/count against the model's ordered list.
local function check_index(ctx, st, name, idx, list, order)
  local rng = st.rng
  table.sort(list, function(x, y) return order_cmp(x.row, y.row, order, x.id, y.id) end)
  if idx:count() ~= #list then fail(ctx, "%s: count() %d, model %d", name, idx:count(), #list) end
  local function boundv(i)
    local c = order[i][1]
    if c == "v" then return st.rng.int(-1, 6) end
    if c == "s" then return st.rng.pick{ "p", "q", "r", "a", "z", LONG, LONG .. "p", LONG .. "q", LONG .. "pp" } end
    if c == "x" then return st.rng.int(0, 4) end
    if c == "y" then return st.rng.pick{ "u", "v", "t", "w", LONG .. "u", LONG, LONG .. "v" } end
    if c == "tot" then return st.rng.int(-1, 13) end
  end
  for _ = 1, 3 do
    local from, to
    if rng.chance(70) then from = {}; for i = 1, rng.int(1, #order) do from[i] = boundv(i) end end
    if rng.chance(70) then to = {}; for i = 1, rng.int(1, #order) do to[i] = boundv(i) end end
    local offset = rng.chance(50) and rng.int(0, 3) or nil
    local limit = rng.chance(50) and rng.int(0, 4) or nil
    local want = {}
    local skipped = 0
    for _, e in ipairs(list) do
      if (not from or bound_cmp(e.row, from, order) >= 0) and (not to or bound_cmp(e.row, to, order) <= 0) then
        if skipped < (offset or 0) then skipped = skipped + 1
        elseif not limit or #want < limit then want[#want + 1] = name ~= "ix2" and e.row.id or ser(e.row, { "x", "y" }) end
      end
    end
    local function arg(b) if b and #b == 1 and rng.chance(50) then return b[1] end return b end
    local opts = { from = arg(from), to = arg(to), offset = offset, limit = limit }
    local got = {}
    for row in idx:range(opts) do
      got[#got + 1] = name ~= "ix2" and row.id or ser(copy_row(row, { "x", "y" }), { "x", "y" })
    end
    local function desc() return ("range{from=%s,to=%s,offset=%s,limit=%s}"):format(
      from and table.concat(from, ",") or "-", to and table.concat(to, ",") or "-", tostring(offset), tostring(limit)) end
    local gs, ws = table.concat(got, ","), table.concat(want, ",")
    if gs ~= ws then fail(ctx, "%s: %s gave %s, model %s", name, desc(), gs, ws) end
    -- count with the same bounds, without offset/limit
    local n = 0
    for _, e in ipairs(list) do
      if (not from or bound_cmp(e.row, from, order) >= 0) and (not to or bound_cmp(e.row, to, order) <= 0) then n = n + 1 end
    end
    local cn = idx:count{ from = opts.from, to = opts.to }
    if cn ~= n then fail(ctx, "%s: count{from=%s,to=%s} %d, model %d", name, from and table.concat(from, ",") or "-",
      to and table.concat(to, ",") or "-", cn, n) end
    if from then
      local before = 0
      for _, e in ipairs(list) do if bound_cmp(e.row, from, order) < 0 then before = before + 1 end end
      local rk = idx:rank(opts.from)
      if rk ~= before + 1 then fail(ctx, "%s: rank(%s) %d, model %d", name, table.concat(from, ","), rk, before + 1) end
    end
  end
end

-- Events of one relation in one group against its rows before and after.
local function check_events(ctx, name, evs, before, after, cols, seq)
  if os.getenv("M11DEBUG") == name then
    io.stderr:write(ctx, "\n")
    for id, r in pairs(before) do io.stderr:write("  before ", id, " ", ser(r, cols), "\n") end
    for _, e in ipairs(evs) do io.stderr:write("  ", e.verb, " ", e.id, " ", ser(e.row, cols), " <- ", ser(e.old, cols), "\n") end
  end
  local mirror = {}
  for id, r in pairs(before) do mirror[id] = r end
  for i, e in ipairs(evs) do
    if e.n ~= i then fail(ctx, "%s: event %d has info.n %s", name, i, tostring(e.n)) end
    if e.seq ~= seq then fail(ctx, "%s: event %d has info.seq %s, group seq %d", name, i, tostring(e.seq), seq) end
    if e.verb == "INSERT" then
      if mirror[e.id] then fail(ctx, "%s: INSERT of id %d, which holds %s", name, e.id, ser(mirror[e.id], cols)) end
      mirror[e.id] = e.row
    else
      if not mirror[e.id] then fail(ctx, "%s: %s of id %d, which holds nothing", name, e.verb, e.id) end
      if not rows_equal(mirror[e.id], e.old, cols) then
        fail(ctx, "%s: %s of id %d: old %s, mirror holds %s", name, e.verb, e.id, ser(e.old, cols), ser(mirror[e.id], cols))
      end
      if e.verb == "UPDATE" then
        if rows_equal(e.old, e.row, cols) then fail(ctx, "%s: UPDATE of id %d changes nothing: %s", name, e.id, ser(e.row, cols)) end
        mirror[e.id] = e.row
      else mirror[e.id] = nil end
    end
  end
  compare_by_id(ctx, name .. " (sink mirror vs rows)", mirror, after, cols)
end

local function check_consolidated(ctx, name, cevs, evs, before, after, cols)
  local order, seen = {}, {}
  for _, e in ipairs(evs) do if not seen[e.id] then seen[e.id] = true; order[#order + 1] = e.id end end
  local want = {}
  for _, id in ipairs(order) do
    local b, a = before[id], after[id]
    if b == nil and a ~= nil then want[#want + 1] = "INSERT " .. id .. " " .. ser(a, cols)
    elseif b ~= nil and a == nil then want[#want + 1] = "DELETE " .. id .. " " .. ser(b, cols)
    elseif b ~= nil and a ~= nil and not rows_equal(a, b, cols) then
      want[#want + 1] = "UPDATE " .. id .. " " .. ser(a, cols) .. " <- " .. ser(b, cols)
    end
  end
  local got = {}
  for i, e in ipairs(cevs) do
    if e.verb == "INSERT" then got[i] = "INSERT " .. e.id .. " " .. ser(e.row, cols)
    elseif e.verb == "DELETE" then got[i] = "DELETE " .. e.id .. " " .. ser(e.old, cols)
    else got[i] = "UPDATE " .. e.id .. " " .. ser(e.row, cols) .. " <- " .. ser(e.old, cols) end
  end
  local gs, ws = table.concat(got, "\n  "), table.concat(want, "\n  ")
  if gs ~= ws then fail(ctx, "%s consolidated:\n got\n  %s\n want\n  %s", name, gs, ws) end
end

local function check_cdc(ctx, name, rows, evs, before, after, cols, keys, pre, seq)
  local touched, seen = {}, {}
  for _, e in ipairs(evs) do if not seen[e.id] then seen[e.id] = true; touched[#touched + 1] = e.id end end
  local want = {}
  local function keyof(id)
    local r = after[id] or before[id]
    for _, e in ipairs(evs) do if e.id == id then r = r or e.row or e.old end end
    return r
  end
  local iskey = {}
  for _, k in ipairs(keys or {}) do iskey[k] = true end
  for _, id in ipairs(touched) do
    local b = before[id]
    local img = { ["cdc$operation"] = 0, ["cdc$id"] = id }
    local kr = keyof(id)
    for _, c in ipairs(cols) do
      if iskey[c] then img[c] = kr[c] elseif b then img[c] = b[c] end
    end
    want[#want + 1] = { img = img, pre = true }
  end
  for _, e in ipairs(evs) do
    local d = { ["cdc$id"] = e.id }
    if e.verb == "INSERT" then
      d["cdc$operation"] = 2
      for _, c in ipairs(cols) do d[c] = e.row[c] end
    elseif e.verb == "DELETE" then
      d["cdc$operation"] = 3
      for _, c in ipairs(cols) do if iskey[c] then d[c] = e.old[c] end end
    else
      d["cdc$operation"] = 1
      for _, c in ipairs(cols) do
        if iskey[c] then d[c] = e.row[c]
        elseif e.row[c] ~= e.old[c] then
          d[c] = e.row[c]
          if e.row[c] == nil then d["cdc$deleted_" .. c] = true end
        end
      end
    end
    want[#want + 1] = { img = d, delta = true }
  end
  for _, id in ipairs(touched) do
    if after[id] then
      local img = { ["cdc$operation"] = 9, ["cdc$id"] = id }
      for _, c in ipairs(cols) do img[c] = after[id][c] end
      want[#want + 1] = { img = img }
    end
  end
  if #rows ~= #want then
    fail(ctx, "%s: %d log rows, model %d (touched %d, deltas %d)", name, #rows, #want, #touched, #evs)
  end
  for i, w in ipairs(want) do
    local g = rows[i]
    if g["cdc$seq"] ~= seq then fail(ctx, "%s: row %d cdc$seq %s, group %d", name, i, tostring(g["cdc$seq"]), seq) end
    if g["cdc$batch_seq_no"] ~= i - 1 then fail(ctx, "%s: row %d cdc$batch_seq_no %s", name, i, tostring(g["cdc$batch_seq_no"])) end
    local function show(t)
      local o = {}
      for k, v in pairs(t) do if k:sub(1, 4) ~= "cdc$" or k == "cdc$id" or k == "cdc$operation" or k:find("deleted") then o[#o + 1] = k .. "=" .. fmt(v) end end
      table.sort(o)
      return table.concat(o, ",")
    end
    for k, v in pairs(w.img) do
      if g[k] ~= v then
        if not (w.pre and pre == true and not iskey[k] and g[k] == nil and k:sub(1, 4) ~= "cdc$") then
          fail(ctx, "%s: row %d: got {%s}, model {%s}", name, i, show(g), show(w.img))
        end
      end
    end
    for k, v in pairs(g) do
      if k:sub(1, 4) ~= "cdc$" and k:sub(1, 1) ~= "#" and w.img[k] == nil and v ~= nil then
        fail(ctx, "%s: row %d: got {%s}, model {%s} (column %s)", name, i, show(g), show(w.img), k)
      end
      if k:find("^cdc%$deleted_") and v and not w.img[k] then
        fail(ctx, "%s: row %d: got {%s}, model {%s}", name, i, show(g), show(w.img))
      end
    end
  end
end

-- Durable sinks: what each received is a prefix of the committed groups
-- (all of them when all is true), each group's events equal to the in-group
-- sink's of that group.
local function ev_text(e, cols)
  return ("%s %d n=%d %s <- %s"):format(e.verb, e.id, e.n, ser(e.row, cols), ser(e.old, cols))
end

check_durable = function(ctx, st, all)
  local S = st.S
  for _, name in ipairs(DURABLE) do
    for _, dk in ipairs{ name, name .. "+c" } do
      local got, want = S.dgot[dk], S.dwant[dk]
      -- dpos: the groups received and checked so far, and the place in want
      local pos = S.dpos[dk] or { got = 0, want = 1 }
      S.dpos[dk] = pos
      local wi = pos.want
      for gi = pos.got + 1, #got do
        local g = got[gi]
        -- groups with no events of the relation: a durable sink may skip them
        while want[wi] and want[wi].seq < g.seq and #want[wi].evs == 0 do wi = wi + 1 end
        local w = want[wi]
        if not w or w.seq ~= g.seq then
          fail(ctx, "durable %s: group %d delivered (%d events), expected group %s", dk, g.seq, #g.evs, w and w.seq or "none")
        end
        local gs, ws = {}, {}
        for i, e in ipairs(g.evs) do gs[i] = ev_text(e, S.cols[name]) end
        for i, e in ipairs(w.evs) do ws[i] = ev_text(e, S.cols[name]) end
        if table.concat(gs, "\n  ") ~= table.concat(ws, "\n  ") then
          fail(ctx, "durable %s group %d:\n got\n  %s\n in-group sink\n  %s", dk, g.seq,
            table.concat(gs, "\n  "), table.concat(ws, "\n  "))
        end
        wi = wi + 1
      end
      pos.got, pos.want = #got, wi
      if all then
        local k = wi
        while want[k] and #want[k].evs == 0 do k = k + 1 end
        if want[k] then fail(ctx, "durable %s: group %d never delivered", dk, want[k].seq) end
      end
    end
  end
end

-- ---- one campaign ---------------------------------------------------------
local function check_all(st, ctx, seq, group_committed, midgroup)
  local R, S, m = st.R, st.S, st.m
  local W, alist = model_expect(st)
  local got = {}
  for _, name in ipairs(TABLELIKE) do got[name] = rows_by_id(R[name], S.cols[name]) end
  if st.resync and not midgroup then
    for name in pairs(st.resync) do st.prev[name] = got[name] end
    st.resync = nil
  end
  -- count(), scan() and get(key) agree with rows() (every third group)
  for _, name in ipairs(st.heavy and TABLELIKE or {}) do
    local rel, cols, rows = R[name], S.cols[name], got[name]
    local n = 0
    for _ in pairs(rows) do n = n + 1 end
    if rel:count() ~= n then fail(ctx, "%s: count() %d, rows() gave %d", name, rel:count(), n) end
    local scanned = 0
    rel:scan(function(row, id)
      scanned = scanned + 1
      if not rows[id] or not rows_equal(copy_row(row, cols), rows[id], cols) then
        fail(ctx, "%s: scan gave id %s %s, rows() %s", name, tostring(id), ser(copy_row(row, cols), cols), ser(rows[id], cols))
      end
    end)
    if scanned ~= n then fail(ctx, "%s: scan gave %d rows, rows() %d", name, scanned, n) end
    local keys = rel:schema().key
    if keys and name ~= "ix1" and name ~= "ix2" and name ~= "jix" then
      for id, r in pairs(rows) do
        local k = {}
        for _, c in ipairs(keys) do k[c] = r[c] == nil and null or r[c] end
        local g = copy_row(rel:get(k), cols)
        if not g or not rows_equal(g, r, cols) then
          fail(ctx, "%s: get(%s) gave %s, rows() has id %d %s", name, keyf_of(keys)(r), ser(g, cols), id, ser(r, cols))
        end
      end
    end
  end
  for _, name in ipairs{ "j", "jf", "jm" } do
    for k = 1, 10 do
      if not m.A[k] and R[name]:get(k) ~= nil then fail(ctx, "%s: get(%d) gave a row, A has no key %d", name, k, k) end
    end
  end
  -- sources by id (row ids §4)
  compare_by_id(ctx, "A", got.A, W.A, S.cols.A)
  compare_by_id(ctx, "B", got.B, W.B, S.cols.B)
  compare_by_id(ctx, "K", got.K, W.K, S.cols.K)
  for k in pairs(m.A) do -- (id_of of a deleted key is nil; its reinsert checks the reuse)
    local id = m.Aid[k]
    local rid = R.A:id_of(k)
    if rid ~= id then fail(ctx, "A: id_of(%d) %s, model %d", k, tostring(rid), id) end
  end
  for k, r in pairs(m.A) do
    local g = copy_row(R.A:get(k), S.cols.A)
    if not g or not rows_equal(g, r, S.cols.A) then fail(ctx, "A: get(%d) %s, model %s", k, ser(g, S.cols.A), ser(r, S.cols.A)) end
  end
  compare_by_id(ctx, "top1", got.top1, W.top1, S.cols.top1)
  compare_by_id(ctx, "top2", got.top2, W.top2, S.cols.top2)
  do
    local groups = {}
    for _, e in ipairs(alist) do
      local g = fmt(e.row.g) .. "|" .. fmt(e.row.b)
      groups[g] = groups[g] or {}
      table.insert(groups[g], e)
    end
    local want = {}
    for _, l in pairs(groups) do
      table.sort(l, function(x, y) return order_cmp(x.row, y.row, { {"s", "asc"}, {"v", "desc"} }, x.id, y.id) end)
      local r = deepcopy(l[1].row)
      r.rank = 1
      want[l[1].id] = r
    end
    compare_by_id(ctx, "top3", got.top3, want, S.cols.top3)
  end
  compare_by_id(ctx, "ix1", got.ix1, W.ix1, S.cols.ix1)
  compare_by_id(ctx, "ix2", got.ix2, W.ix2, S.cols.ix2)
  check_index(ctx, st, "ix1", R.ix1, alist, { {"v", "desc"}, {"s", st.variant.ix1s} })
  local klist = {}
  for id, r in pairs(m.K) do klist[#klist + 1] = { id = id, row = r } end
  check_index(ctx, st, "ix2", R.ix2, klist, { {"y", "asc"}, {"x", "desc"} })
  check_distinct(ctx, st, "d1", got.d1, distinct_of(m.A, { "g", "v" }), { "g", "v" })
  check_distinct(ctx, st, "d2", got.d2, distinct_of(m.K, st.kcols), st.kcols)
  check_distinct(ctx, st, "d3", got.d3, distinct_of(join_rows(m, false), { "name", "g" }), { "name", "g" })
  local kid = keyf_of{ "id" }
  local jw = join_rows(m, false)
  local jwk = {}
  for k, r in pairs(jw) do jwk[fmt(k)] = r end
  local ids = compare_by_key(ctx, "j", got.j, jwk, S.cols.j, kid)
  check_stable_ids(ctx, st, "j", ids)
  local jfw = {}
  for k, r in pairs(jwk) do if r.w == nil or r.w % st.variant.jfmod ~= 0 then jfw[k] = r end end
  compare_by_key(ctx, "jf", got.jf, jfw, S.cols.jf, kid)
  for id in pairs(got.jf) do
    if not got.j[id] then fail(ctx, "jf: id %d is no id of j", id) end
  end
  local jmw = {}
  for k, r in pairs(jfw) do
    jmw[k] = { id = r.id, label = (r.name or "-") .. st.variant.sep .. r.s, tot = (r.v or 0) + (r.w or 0),
               note = st.variant.jmx and st.variant.jmx.default }
  end
  compare_by_key(ctx, "jm", got.jm, jmw, S.cols.jm, kid)
  for id, r in pairs(got.jm) do
    if not got.jf[id] or got.jf[id].id ~= r.id then fail(ctx, "jm: id %d does not pass jf's id through", id) end
  end
  local jaw = {}
  for _, r in pairs(jfw) do
    local k = fmt(r.name)
    local a = jaw[k] or { name = r.name, n = 0 }
    jaw[k] = a
    a.n = a.n + 1
    if r.v ~= nil then a.sm = (a.sm or 0) + r.v end
    if r.w ~= nil then a.mn = st.variant.jamin and math.min(a.mn or r.w, r.w) or math.max(a.mn or r.w, r.w) end
  end
  ids = compare_by_key(ctx, "ja", got.ja, jaw, S.cols.ja, keyf_of{ "name" })
  check_stable_ids(ctx, st, "ja", ids)
  local jiw = {}
  for k, r in pairs(join_rows(m, st.variant.jikind ~= "left", st.variant.jion)) do jiw[fmt(k)] = r end
  ids = compare_by_key(ctx, "ji", got.ji, jiw, S.cols.ji, kid)
  check_stable_ids(ctx, st, "ji", ids)
  local jlist = {}
  for id, r in pairs(got.ji) do jlist[#jlist + 1] = { id = id, row = r } end
  compare_by_id(ctx, "jtop", got.jtop, model_top(jlist, "name", { {"w", "desc"}, {"v", "asc"} }, 2, "rank"), S.cols.jtop)
  -- a keyless left join: its rows as a multiset
  local kjw, kjg = {}, {}
  for _, r in pairs(m.K) do
    local b = m.B[r.x]
    local t = {}
    for _, c in ipairs(st.kcols) do t[c] = r[c] end
    if b then for _, c in ipairs(m.bcols) do t[c] = b[c] end end
    kjw[#kjw + 1] = ser(t, S.cols.kj)
  end
  for _, r in pairs(got.kj) do kjg[#kjg + 1] = ser(r, S.cols.kj) end
  table.sort(kjw) table.sort(kjg)
  if table.concat(kjw, " ") ~= table.concat(kjg, " ") then
    fail(ctx, "kj: rows %s, model %s", table.concat(kjg, " "), table.concat(kjw, " "))
  end
  local kaw = {}
  for _, r in pairs(m.K) do
    local k = fmt(r.y)
    local a = kaw[k] or { y = r.y, n = 0, sx = 0 }
    kaw[k] = a
    a.n, a.sx = a.n + 1, a.sx + r.x
  end
  ids = compare_by_key(ctx, "ka", got.ka, kaw, S.cols.ka, keyf_of{ "y" })
  check_stable_ids(ctx, st, "ka", ids)
  local faw, flist = {}, {}
  for k, r in pairs(m.A) do
    if r.v ~= nil then faw[m.Aid[k]] = r; flist[#flist + 1] = { id = m.Aid[k], row = r } end
  end
  compare_by_id(ctx, "fA", got.fA, faw, S.cols.fA)
  compare_by_id(ctx, "ftop", got.ftop, model_top(flist, "b", { {"s", "desc"} }, st.variant.ftopn, "rank"), S.cols.ftop)
  local jmid = {}
  for id, r in pairs(got.jm) do jmid[id] = r end
  compare_by_id(ctx, "jix", got.jix, jmid, S.cols.jix)
  local jlist2 = {}
  for id, r in pairs(got.jm) do jlist2[#jlist2 + 1] = { id = id, row = r } end
  check_index(ctx, st, "jix", R.jix, jlist2, { {"tot", "desc"} })
  do
    local kl = {}
    for id, r in pairs(m.K) do kl[#kl + 1] = { id = id, row = r } end
    compare_by_id(ctx, "ktop", got.ktop, model_top(kl, "y", { {"x", "desc"} }, 2, "rank"), S.cols.ktop)
    local al = {}
    for id, r in pairs(got.ka) do al[#al + 1] = { id = id, row = r } end
    compare_by_id(ctx, "atop", got.atop, model_top(al, nil, { {"n", "desc"} }, 1, "rank"), S.cols.atop)
    local jafw = {}
    for id, r in pairs(got.ja) do if r.n >= 2 then jafw[id] = r end end
    compare_by_id(ctx, "jaf", got.jaf, jafw, S.cols.jaf)
    check_distinct(ctx, st, "d4", got.d4, distinct_of(got.top1, { "g", "rank" }), { "g", "rank" })
    local wjw = {}
    local w1w = window_rows(m, "w1", "k", { sm = true })
    for _, r in pairs(w1w) do
      local b = m.B[r.n % 5]
      local t = deepcopy(r)
      if b then for _, c in ipairs(m.bcols) do t[c] = b[c] end end
      wjw[fmt(r.k) .. "|" .. fmt(r.window_start)] = t
    end
    local ids2 = compare_by_key(ctx, "wj", got.wj, wjw, S.cols.wj, function(r) return fmt(r.k) .. "|" .. fmt(r.window_start) end)
    check_stable_ids(ctx, st, "wj", ids2)
  end
  for _, w in ipairs{ { "w1", "k", { sm = true } }, { "w2", nil, { mx = true } }, { "w3", "k", {} }, { "w4", nil, {} } } do
    local want, kf = window_rows(m, w[1], w[2], w[3])
    ids = compare_by_key(ctx, w[1], got[w[1]], want, S.cols[w[1]], kf)
    check_stable_ids(ctx, st, w[1], ids)
    if R[w[1]]:late() ~= m.wins[w[1]].late then
      fail(ctx, "%s: late() %d, model %d", w[1], R[w[1]]:late(), m.wins[w[1]].late)
    end
  end
  do
    local kmw = {}
    for id, r in pairs(m.K) do kmw[id] = { x = r.x, yy = r.y, extra = st.variant.kmx and st.variant.kmx.default } end
    compare_by_id(ctx, "km", got.km, kmw, S.cols.km)
  end
  for _, x in ipairs(st.extras) do
    local g = rows_by_id(x.rel, x.cols)
    local al, kl = {}, {}
    for k, r in pairs(m.A) do al[#al + 1] = { id = m.Aid[k], row = r } end
    for id, r in pairs(m.K) do kl[#kl + 1] = { id = id, row = r } end
    if x.kind == 1 then compare_by_id(ctx, x.name, g, model_top(al, "b", { {"c", "asc"}, {"s", "desc"} }, x.n, "rank"), x.cols)
    elseif x.kind == 2 then compare_by_id(ctx, x.name, g, model_top(kl, nil, { {"y", "desc"}, {"x", "asc"} }, x.n, "rank"), x.cols)
    elseif x.kind == 3 then
      local seen = {}
      for _, r in pairs(g) do
        local k = ser(r, x.cols)
        if seen[k] then fail(ctx, "%s: row %s twice", x.name, k) end
        seen[k] = true
      end
      local want = distinct_of(m.K, st.kcols)
      for k in pairs(want) do if not seen[k] then fail(ctx, "%s: row %s missing", x.name, k) end end
      for k in pairs(seen) do if not want[k] then fail(ctx, "%s: row %s not in the model", x.name, k) end end
    else
      compare_by_id(ctx, x.name, g, got.jm, x.cols)
      local jl = {}
      for id, r in pairs(got.jm) do jl[#jl + 1] = { id = id, row = r } end
      table.sort(jl, function(a, b) return order_cmp(a.row, b.row, { {"label", "desc"} }, a.id, b.id) end)
      local ws, gs = {}, {}
      for i, e in ipairs(jl) do ws[i] = e.row.id end
      for r in x.rel:range{} do gs[#gs + 1] = r.id end
      if table.concat(ws, ",") ~= table.concat(gs, ",") then
        fail(ctx, "%s: range{} gave %s, model %s", x.name, table.concat(gs, ","), table.concat(ws, ","))
      end
    end
  end
  if st.v11 then
    -- id_of between groups: a live key's id, nil for a key not in the table
    for k = 1, 10 do
      local rid = R.A:id_of(k)
      if rid ~= (m.A[k] and m.Aid[k] or nil) then fail(ctx, "A: id_of(%d) %s, model %s", k, tostring(rid), tostring(m.A[k] and m.Aid[k])) end
      if not m.A[k] and R.A:get(k) ~= nil then fail(ctx, "A: get(%d) gave a row, the model has none", k) end
    end
    for k = 1, 4 do
      local rid = R.B:id_of(k)
      if rid ~= (m.B[k] and m.Bid[k] or nil) then fail(ctx, "B: id_of(%d) %s, model %s", k, tostring(rid), tostring(m.B[k] and m.Bid[k])) end
      local g = copy_row(R.B:get{ bid = k }, S.cols.B)
      if (g == nil) ~= (m.B[k] == nil) or (g and not rows_equal(g, m.B[k], S.cols.B)) then
        fail(ctx, "B: get(%d) %s, model %s", k, ser(g, S.cols.B), ser(m.B[k], S.cols.B))
      end
    end
    if not midgroup and st.rng2.chance(12) then st.check_attach(st, ctx, got) end
  end
  if midgroup then return end
  -- events against rows (only a committed group delivers; else none)
  for _, name in ipairs(TABLELIKE) do
    local evs, cevs = S.pending[name], S.cpending[name]
    local before = st.prev[name] or {}
    if not group_committed then
      if #evs > 0 or #cevs > 0 then fail(ctx, "%s: a group that did not commit left %d events", name, #evs + #cevs) end
      if not st.stale[name] then
        compare_by_id(ctx, name .. " (rows vs rows before the group)", got[name], before, S.cols[name])
      end
    else
      check_events(ctx, name, evs, before, got[name], S.cols[name], seq)
      check_consolidated(ctx, name, cevs, evs, before, got[name], S.cols[name])
    end
  end
  for name, of in pairs(FMTS) do
    local want = {}
    local cols = S.cols[of[1]]
    for _, e in ipairs(S.pending[of[1]]) do
      if of[2] == "debezium" then
        local op = e.verb == "INSERT" and "c" or e.verb == "UPDATE" and "u" or "d"
        want[#want + 1] = ("%s %s <- %s %s/%s/%s"):format(op, ser(e.row, cols), ser(e.old, cols), of[1], seq, e.id)
      else
        if e.old then want[#want + 1] = (e.verb == "UPDATE" and "-U " or "-D ") .. ser(e.old, cols) end
        if e.row then want[#want + 1] = (e.verb == "UPDATE" and "+U " or "+I ") .. ser(e.row, cols) end
      end
    end
    local gs, ws = table.concat(S.fmtpending[name], "\n  "), table.concat(want, "\n  ")
    if gs ~= ws then fail(ctx, "%s:\n got\n  %s\n want\n  %s", name, gs, ws) end
    S.fmtpending[name] = {}
  end
  -- streams number their events 1, 2, 3 … across groups
  for _, cname in ipairs(CDCNAMES) do
    for _, r in ipairs(S.cdcpending[cname]) do
      local want = (st.evnext[cname] or 0) + 1
      if r["#id"] ~= want then fail(ctx, "%s: event id %d, the next is %d", cname, r["#id"], want) end
      st.evnext[cname] = want
    end
  end
  do
    local got, want = {}, {}
    for i, r in ipairs(S.espending) do
      local n = (st.evnext.es or 0) + 1
      if r["#id"] ~= n then fail(ctx, "es: event id %d, the next is %d", r["#id"], n) end
      st.evnext.es = n
      got[i] = ser(r, S.escols)
    end
    for i = st.esdone + 1, #m.es do want[#want + 1] = ser(m.es[i], S.escols) end
    st.esdone = #m.es
    if table.concat(got, " ") ~= table.concat(want, " ") then
      fail(ctx, "es: events\n  %s\n model\n  %s", table.concat(got, "\n  "), table.concat(want, "\n  "))
    end
    S.espending = {}
  end
  for _, cname in ipairs(CDCNAMES) do
    local rname, pre = CDCS[cname][1], CDCS[cname][2]
    local rows = S.cdcpending[cname]
    if not group_committed then
      if #rows > 0 then fail(ctx, "%s: a group that did not commit left %d log rows", cname, #rows) end
    else
      local keys = R[rname]:schema().key
      check_cdc(ctx, cname, rows, S.pending[rname], st.prev[rname] or {}, got[rname], S.cols[rname], keys, pre, seq)
    end
  end
  if group_committed then
    for _, name in ipairs(DURABLE) do
      S.dwant[name][#S.dwant[name] + 1] = { seq = seq, evs = S.pending[name] }
      S.dwant[name .. "+c"][#S.dwant[name .. "+c"] + 1] = { seq = seq, evs = S.cpending[name] }
    end
  end
  check_durable(ctx, st, false)
  for _, name in ipairs(TABLELIKE) do S.pending[name], S.cpending[name] = {}, {} end
  for _, name in ipairs(CDCNAMES) do S.cdcpending[name] = {} end
  if group_committed then st.stale = {} end
  for name in pairs(st.stale) do got[name] = st.prev[name] end
  st.prev = got
end

-- ---- random changes -------------------------------------------------------
-- long values share their first 600 bytes (keys and order values longer
-- than LMDB's key limit)
local GS = { "a", "b", "c", "a", "b", "c", LONG .. "a", LONG .. "b" }
local SS = { "p", "q", "r", "p", "q", "r", LONG .. "p", LONG .. "q", "L" }

local function rnd_a(rng, id)
  local r = { id = id, s = rng.pick(SS) }
  if rng.chance(80) then r.g = rng.pick(GS) end
  if rng.chance(80) then r.v = rng.int(0, 5) end
  if rng.chance(75) then r.b = rng.int(1, 4) end
  r.c = rng.int(6, 8)
  return r
end

-- A change as an NDJSON line for p:run (columns in declaration order).
local function jval(v)
  if v == nil or v == null then return "null" end
  if type(v) == "string" then return '"' .. v:gsub('[%c"\\]', function(c) return ("\\u%04x"):format(c:byte()) end) .. '"' end
  if math.type(v) == "float" then
    local t = ("%.17g"):format(v)
    if not t:find("[%.eEn]") then t = t .. ".0" end
    return t
  end
  return tostring(v)
end

local function jline(rel, op, row, cols)
  local out = {}
  for _, c in ipairs(cols) do
    if row[c] ~= nil then out[#out + 1] = jval(c) .. ":" .. jval(row[c]) end
  end
  return ('{"rel":%s,"op":%s,"row":{%s}}'):format(jval(rel), jval(op), table.concat(out, ","))
end

local function to_runnel(r, cols)
  local t = {}
  for _, c in ipairs(cols) do if r[c] ~= nil then t[c] = r[c] end end
  if r.c == 7 and r.omit_c then t.c = nil end
  if r["#omit"] then t[r["#omit"]] = nil end
  return t
end

-- Version 11: a value for the column a reopen added to A (az) or B (bz);
-- omitted now and then (the model takes its default, or null).
local function add_x(st, r, which)
  local z = st.variant[which]
  if not z then return end
  local v = st.rng2.chance(60) and st.rng2.int(0, 3) or nil
  if v == nil then
    r[z.name] = z.default
    if z.default ~= nil and st.rng2.chance(50) then v = z.default else r["#omit"] = z.name end
  end
  if v ~= nil then r[z.name] = v end
end

-- One change: returns a description, a function applying it to runnel, and
-- one applying it to the model (returning false when it must fail, and
-- whether it made an A row whose s is "boom").
local function random_change(st)
  local rng, m = st.rng, st.m
  st.json = nil
  local which = rng.int(1, 100)
  if which <= 45 then
    local op = rng.int(1, 100)
    local id = rng.int(1, 10)
    local present, absent = {}, {}
    for i = 1, 10 do if m.A[i] then present[#present + 1] = i else absent[#absent + 1] = i end end
    if op <= 25 and #absent > 0 and rng.chance(90) then id = rng.pick(absent) end
    if op > 25 and op <= 50 and #present > 0 and rng.chance(95) then id = rng.pick(present) end
    if op > 65 and op <= 97 and #present > 0 and rng.chance(90) then id = rng.pick(present) end
    if op <= 25 then
      local r = rnd_a(rng, id)
      if rng.chance(2) then r.s = "boom" end
      if r.c == 7 and rng.chance(50) then r.omit_c = true end
      add_x(st, r, "az")
      st.json = jline("A", "insert", to_runnel(r, st.acols), st.acols)
      return ("A:insert%s"):format(ser(r, st.acols)), function() st.R.A:insert(to_runnel(r, st.acols)) end,
        function()
          if m.A[id] then return false end
          m.A[id] = r
          if not m.Aid[id] then m.Aid[id] = m.Anext; m.Anext = m.Anext + 1 end
          return true, r.s == "boom"
        end
    elseif op <= 50 then
      local patch = { id = id }
      local cols = {}
      for _, c in ipairs{ "g", "v", "s", "b", "c" } do
        if rng.chance(40) then
          cols[#cols + 1] = c
          local r = rnd_a(rng, id)
          patch[c] = r[c] == nil and null or r[c]
        end
      end
      local z = st.variant.az
      if z and st.rng2.chance(30) then
        cols[#cols + 1] = z.name
        local v = st.rng2.chance(70) and st.rng2.int(0, 3) or nil
        patch[z.name] = v == nil and null or v
      end
      local desc = {}
      for _, c in ipairs(cols) do desc[#desc + 1] = c .. "=" .. (patch[c] == null and "null" or fmt(patch[c])) end
      st.json = jline("A", "update", patch, st.acols)
      return ("A:update{id=%d,%s}"):format(id, table.concat(desc, ",")), function() st.R.A:update(patch) end,
        function()
          local old = m.A[id]
          if not old then return false end
          local new = deepcopy(old)
          for _, c in ipairs(cols) do
            local v = patch[c]
            if v == null then
              if c == "s" then return false end
              v = nil
            end
            new[c] = v
          end
          m.A[id] = new
          return true, new.s == "boom" and not rows_equal(new, old, st.acols)
        end
    elseif op <= 65 then
      local r = rnd_a(rng, id)
      if rng.chance(2) then r.s = "boom" end
      if r.c == 7 and rng.chance(50) then r.omit_c = true end
      add_x(st, r, "az")
      st.json = jline("A", "upsert", to_runnel(r, st.acols), st.acols)
      return ("A:upsert%s"):format(ser(r, st.acols)), function() st.R.A:upsert(to_runnel(r, st.acols)) end,
        function()
          local old = m.A[id]
          m.A[id] = r
          if not m.Aid[id] then m.Aid[id] = m.Anext; m.Anext = m.Anext + 1 end
          return true, r.s == "boom" and not (old and rows_equal(old, r, st.acols))
        end
    elseif op <= 97 then
      st.json = jline("A", "delete", { id = id }, st.acols)
      return ("A:delete(%d)"):format(id), function() st.R.A:delete(id) end,
        function()
          if not m.A[id] then return false end
          m.A[id] = nil
          return true
        end
    else
      st.json = jline("A", "insert", { id = id, s = "p", v = "x" }, st.acols)
      return ("A:insert{id=%d,v='x'} (wrong type)"):format(id),
        function() st.R.A:insert{ id = id, s = "p", v = "x" } end, function() return false end
    end
  elseif which <= 60 then
    local id = rng.int(1, 4)
    local op = rng.int(1, 100)
    local r = { bid = id, name = rng.pick{ "n1", "n2", "n3", "n1", "n2", LONG .. "n", LONG .. "m" } }
    if rng.chance(80) then r.w = rng.int(0, 6) end
    add_x(st, r, "bz")
    if op > 55 and m.B[id] == nil and rng.chance(80) then
      for i = 1, 4 do if m.B[i] then id = i; r.bid = i end end
    end
    if op > 30 and op <= 55 and m.B[id] and rng.chance(80) then
      for i = 1, 4 do if not m.B[i] then id = i; r.bid = i end end
    end
    if op <= 30 then
      st.json = jline("B", "upsert", to_runnel(r, st.bcols), st.bcols)
      return ("B:upsert%s"):format(ser(r, st.bcols)), function() st.R.B:upsert(to_runnel(r, st.bcols)) end,
        function()
          m.B[id] = r
          if not m.Bid[id] then m.Bid[id] = m.Bnext; m.Bnext = m.Bnext + 1 end
          return true
        end
    elseif op <= 55 then
      st.json = jline("B", "insert", to_runnel(r, st.bcols), st.bcols)
      return ("B:insert%s"):format(ser(r, st.bcols)), function() st.R.B:insert(to_runnel(r, st.bcols)) end,
        function()
          if m.B[id] then return false end
          m.B[id] = r
          if not m.Bid[id] then m.Bid[id] = m.Bnext; m.Bnext = m.Bnext + 1 end
          return true
        end
    elseif op <= 80 then
      local w = rng.chance(80) and rng.int(0, 6) or nil
      st.json = jline("B", "update", { bid = id, w = w == nil and null or w }, st.bcols)
      return ("B:update{bid=%d,w=%s}"):format(id, fmt(w)), function() st.R.B:update{ bid = id, w = w == nil and null or w } end,
        function()
          if not m.B[id] then return false end
          local new = deepcopy(m.B[id])
          new.w = w
          m.B[id] = new
          return true
        end
    else
      st.json = jline("B", "delete", { bid = id }, st.bcols)
      return ("B:delete(%d)"):format(id), function() st.R.B:delete{ bid = id } end,
        function()
          if not m.B[id] then return false end
          m.B[id] = nil
          return true
        end
    end
  elseif which <= 80 then
    local function rk()
      local r = { x = rng.int(1, 3) }
      if rng.chance(70) then r.y = rng.pick{ "u", "v", "u", "v", LONG .. "u", LONG .. "v" } end
      add_x(st, r, "kz")
      return r
    end
    local op = rng.int(1, 100)
    local function find(r)
      local best
      for id, row in pairs(m.K) do if rows_equal(row, r, st.kcols) and (not best or id < best) then best = id end end
      return best
    end
    local function existing()
      local ids = {}
      for id in pairs(m.K) do ids[#ids + 1] = id end
      table.sort(ids)
      if #ids > 0 and rng.chance(85) then return deepcopy(m.K[rng.pick(ids)]) end
      return rk()
    end
    if op <= 45 then
      local r = rk()
      st.json = jline("K", "insert", to_runnel(r, st.kcols), st.kcols)
      return ("K:insert%s"):format(ser(r, st.kcols)), function() st.R.K:insert(to_runnel(r, st.kcols)) end,
        function() m.K[m.Knext] = r; m.Knext = m.Knext + 1; return true end
    elseif op <= 75 then
      local r = existing()
      st.json = jline("K", "delete", to_runnel(r, st.kcols), st.kcols)
      return ("K:delete%s"):format(ser(r, st.kcols)), function() st.R.K:delete(to_runnel(r, st.kcols)) end,
        function()
          local id = find(r)
          if not id then return false end
          m.K[id] = nil
          return true
        end
    else
      local old, new = existing(), rk()
      return ("K:update(%s, %s)"):format(ser(old, st.kcols), ser(new, st.kcols)),
        function() st.R.K:update(to_runnel(old, st.kcols), to_runnel(new, st.kcols)) end,
        function()
          local id = find(old)
          if not id then return false end
          m.K[id] = new
          return true
        end
    end
  else
    st.now = st.now + rng.int(0, 3)
    local ts = st.now
    if rng.chance(30) then ts = math.max(0, st.now - rng.int(1, 25)) end
    local ev = { k = rng.pick{ "x", "y" }, ts = ts, v = rng.int(0, 9), tf = ts / 2 + rng.int(0, 3) / 4 }
    if rng.chance(1) then
      st.json = jline("E", "insert", { k = "x", ts = "bad", v = 1 }, ECOLS)
      return "E:insert{ts='bad'} (wrong type)", function() st.R.E:insert{ k = "x", ts = "bad", v = 1 } end,
        function() return false end
    end
    st.json = jline("E", "insert", ev, ECOLS)
    return ("E:insert%s"):format(ser(ev, ECOLS)), function() st.R.E:insert(ev) end,
      function() model_event(m, ev); return true end
  end
end

local function open_state(st)
  local p = runnel.open{ path = st.dir, clock = function() return st.clock end, notes = false,
                         sync = st.openopts.sync, write_back = st.openopts.write_back,
                         map_size = st.openopts.map_size, carry = st.openopts.carry }
  st.p = p
  local old = st.variant
  st.variant = { top2n = st.rng.int(2, 4), ftopn = st.rng.int(1, 3), top1n = st.rng.int(2, 3), jfmod = st.rng.int(2, 3),
                 ix1s = st.rng.pick{ "asc", "desc" }, sep = st.rng.pick{ ":", "/" },
                 jamin = st.rng.pick{ true, false } }
  -- (jamin: an aggregate declared again with max for min was rebuilt
  -- unsaid until 0.21 read its told rows with the old declaration)
  if not old then st.variant = { top2n = 3, ftopn = 2, top1n = 2, jfmod = 3, ix1s = "asc", sep = ":", jamin = true } end
  local evolved = {}
  if st.v11 then
    -- a column of A (the joins' left) or B (their right) added, dropped,
    -- renamed with was (or without: dropped and another added)
    for _, w in ipairs{ { "az", "e" }, { "bz", "z" }, { "kz", "q" } } do
      local which, base = w[1], w[2]
      local oz = old and old[which]
      local nz = oz
      local r = st.rng2.int(1, 100)
      if old and r <= 30 then
        if not oz then
          nz = { name = st.rng2.pick{ base, base .. "2" }, default = st.rng2.pick{ false, 5 } or nil, pos = st.rng2.int(2, which == "az" and 7 or 4) }
          -- (K is keyless: its column goes anywhere, and has no default,
          -- so that a delete's omitted column is the null it holds)
          if which == "kz" then nz.default, nz.pos = nil, st.rng2.int(1, 3) end
        elseif r <= 10 then nz = nil
        else
          local other = oz.name == base and base .. "2" or base
          nz = { name = other, default = oz.default, pos = st.rng2.int(which == "kz" and 1 or 2, which == "az" and 7 or which == "kz" and 3 or 4) }
          if r <= 22 then nz.was = oz.name end
        end
      elseif oz then
        nz = { name = oz.name, default = oz.default, pos = oz.pos }
      end
      st.variant[which] = nz
      if (oz and oz.name) ~= (nz and nz.name) or (oz and oz.pos) ~= (nz and nz.pos) then
        evolved[which] = { old = oz, new = nz }
        st.reopenlog[#st.reopenlog + 1] = ("%s: %s -> %s"):format(which == "az" and "A" or which == "bz" and "B" or "K",
          oz and (oz.name .. "@" .. oz.pos .. (oz.default and "=" .. oz.default or "")) or "-",
          nz and (nz.name .. "@" .. nz.pos .. (nz.default and "=" .. nz.default or "") .. (nz.was and " was " .. nz.was or "")) or "-")
      end
    end
  end
  if st.v11 then
    -- the inner join's on and kind change now and then (rebuilt and told)
    st.variant.jion, st.variant.jikind = old and old.jion, old and old.jikind
    if old and st.rng2.chance(20) then
      st.variant.jion = st.rng2.pick{ "b", "v" }
      st.variant.jikind = st.rng2.pick{ "inner", "left" }
      if st.variant.jion ~= (old.jion or "b") or (st.variant.jikind or "inner") ~= (old.jikind or "inner") then
        st.stale = st.stale or {}
        st.stale.ji, st.stale.jtop = true, true
        st.reopenlog[#st.reopenlog + 1] = ("ji: on %s, %s"):format(st.variant.jion, st.variant.jikind)
      end
    end
  end
  if st.v11 then
    -- the plain map's columns change (a defaulted column added, moved,
    -- dropped), its function staying: told as a rebuild over its input
    st.variant.kmx = old and old.kmx
    if old and st.rng2.chance(20) then
      st.variant.kmx = st.rng2.pick{ false, { default = 4, pos = st.rng2.int(1, 3) }, { pos = st.rng2.int(1, 3) } } or nil
      local a, b = old.kmx, st.variant.kmx
      if (a and (a.default or "-") .. a.pos) ~= (b and (b.default or "-") .. b.pos) then
        st.stale = st.stale or {}
        st.stale.km = true
        -- (README: a map declared again with other columns and the same
        -- function tells what that changed: its copies keep their rows as
        -- told, a dropped column gone, a new one null until told)
        if not b then st.kmdropped = true end
        st.reopenlog[#st.reopenlog + 1] = ("km: extra %s"):format(b and (tostring(b.default) .. "@" .. b.pos) or "dropped")
      end
    end
    -- the keyed map's columns change, its function does not (a column
    -- added, with a default or not, or dropped)
    st.variant.jmx = old and old.jmx
    if old and st.rng2.chance(15) then
      st.variant.jmx = st.rng2.pick{ false, { default = "x" }, { default = nil } } or nil
      if (old.jmx and (old.jmx.default or "-")) ~= (st.variant.jmx and (st.variant.jmx.default or "-")) then
        st.stale = st.stale or {}
        st.stale.jm, st.stale.jix = true, true
        -- (a keyed map whose columns changed and function did not tells
        -- what that changed, as the plain one does). Its own function is
        -- kept at this reopen.
        st.variant.sep = old.sep
        if not st.variant.jmx then st.jmdropped = true end
        st.reopenlog[#st.reopenlog + 1] = ("jm: note column %s"):format(st.variant.jmx and tostring(st.variant.jmx.default) or "dropped")
      end
    end
  end
  st.R = declare(p, st.variant)
  st.acols, st.bcols, st.kcols = cols_of(st.R.A), cols_of(st.R.B), cols_of(st.R.K)
  st.m.bcols = st.bcols
  -- the model's rows, and the mirrors' copies, take the schema change: the
  -- source's copies as its note says (a new column at its default), the
  -- derived ones as their rebuild tells (old rows in the new columns by
  -- name, renames followed, a new column null) at the next group
  local CARRY = { az = { src = "A", rows = { "A", "top1", "top2", "ix1", "top3", "fA", "ftop", "j", "jf", "ji", "jtop" },
                         stale = { "top1", "top2", "ix1", "top3", "ftop", "j", "jf", "jm", "ja", "jaf", "jix", "ji", "jtop", "d1", "d3", "d4" } },
                  kz = { src = "K", rows = { "K", "ix2", "ktop", "kj", "d2" },
                         stale = { "ix2", "ktop", "kj", "d2", "ka", "atop", "km" } },
                  bz = { src = "B", rows = { "B", "j", "jf", "ji", "jtop", "kj", "wj" },
                         stale = { "j", "jf", "jm", "ja", "jaf", "jix", "ji", "jtop", "kj", "wj", "d3" } } }
  for which, ev in pairs(evolved) do
    local oz, nz = ev.old, ev.new
    local c = CARRY[which]
    local function change(row, src)
      if oz and nz and nz.was == oz.name then
        row[nz.name], row[oz.name] = row[oz.name], nil
      else
        if oz and oz.name ~= (nz and nz.name) then row[oz.name] = nil end
        if nz and nz.name ~= (oz and oz.name) then row[nz.name] = src and nz.default or nil end
      end
    end
    for _, row in pairs(which == "az" and st.m.A or which == "bz" and st.m.B or st.m.K) do change(row, true) end
    for _, name in ipairs(c.rows) do
      -- (a filter over the table holds no rows: its copies take the
      -- table's note as the table's do)
      for _, row in pairs(st.prev[name] or {}) do change(row, name == c.src or name == "fA") end
    end
    for _, name in ipairs(c.stale) do st.stale = st.stale or {}; st.stale[name] = true end
  end
  -- a note that a relation's sinks were not told what its rebuild changed:
  -- the mirrors start again from its rows (README, Rebuilt)
  st.resync = {}
  if st.jmdropped then for _, row in pairs(st.prev.jm or {}) do row.note = nil end; st.jmdropped = nil end
  if st.kmdropped then for _, row in pairs(st.prev.km or {}) do row.extra = nil end; st.kmdropped = nil end
  for _, line in ipairs(p:changes()) do
    if os.getenv("M11DEBUG") then io.stderr:write("CHANGES ", line, "\n") end
    local name = line:match("^([^:]+): its sinks were not told")
    if name then
      st.resync[name] = true
      st.stats["not told: " .. name] = (st.stats["not told: " .. name] or 0) + 1
      st.reopenlog[#st.reopenlog + 1] = "note: " .. line
    end
  end
  st.S.cols = {}
  for _, name in ipairs(TABLELIKE) do st.S.cols[name] = cols_of(st.R[name]) end
  -- a changed declaration is rebuilt at open: its rows are checked, and
  -- the mirrors start again from them
  -- (README, Rebuilt: its sinks are told what the rebuild changed at the
  -- start of the next group, so the mirrors stay as they were until then)
  st.stale = st.stale or {}
  if old and old.top2n ~= st.variant.top2n then st.stale.top2 = true end
  if old and old.ftopn ~= st.variant.ftopn then st.stale.ftop = true end
  if old and old.top1n ~= st.variant.top1n then st.stale.top1, st.stale.d4 = true, true end
  if old and old.sep ~= st.variant.sep then st.stale.jm, st.stale.jix = true, true end
  if old and old.jamin ~= st.variant.jamin then st.stale.ja, st.stale.jaf = true, true end
  if old and old.ix1s ~= st.variant.ix1s then st.stale.ix1 = true end
  if old and old.jfmod ~= st.variant.jfmod then
    for _, n in ipairs{ "jf", "jm", "ja", "jaf", "jix" } do st.stale[n] = true end
  end
  local function make_extra(name, kind, n)
    local x = { name = name, kind = kind, n = n }
    if kind == 1 then x.rel = st.R.A:top{ n = x.n, by = "b", order = { {"c", "asc"}, {"s", "desc"} }, name = name }
    elseif kind == 2 then x.rel = st.R.K:top{ n = x.n, order = { {"y", "desc"}, "x" }, name = name }
    elseif kind == 3 then x.rel = st.R.K:distinct(name)
    else x.rel = st.R.jm:index{ "label", "desc", name = name } end
    x.cols = cols_of(x.rel)
    return x
  end
  -- version 11: the extras of earlier opens are held undeclared; some are
  -- dropped (and some of those declared again, maybe as another kind),
  -- some declared again as they were or with another n (caught up)
  local again = {}
  if st.v11 then
    st.held = st.held or {}
    for _, x in ipairs(st.extras or {}) do st.held[x.name] = x end
    local want, und = {}, p:undeclared()
    for name in pairs(st.held) do want[#want + 1] = name end
    table.sort(want)
    if table.concat(und, ",") ~= table.concat(want, ",") then
      fail("reopen", "p:undeclared() %s, the model holds %s", table.concat(und, ","), table.concat(want, ","))
    end
    local dn = st.rng2.pick{ "top1", "A", "jm", "d2", "w1", "cA" }
    if pcall(p.drop, p, dn) then fail("reopen", "p:drop(%q) of a declared relation was taken", dn) end
    for _, name in ipairs(want) do
      local r = st.rng2.int(1, 100)
      local x = st.held[name]
      if r <= 25 then
        local ok, e = pcall(p.drop, p, name)
        if not ok then fail("reopen", "p:drop(%q): %s", name, tostring(e)) end
        st.held[name] = nil
        st.reopenlog[#st.reopenlog + 1] = "drop " .. name
        if st.rng2.chance(50) then
          again[#again + 1] = make_extra(name, st.rng2.int(1, 4), st.rng2.int(1, 3))
          st.reopenlog[#st.reopenlog + 1] = ("declared again: %s (kind %d, n %d)"):format(name, again[#again].kind, again[#again].n)
        end
      elseif r <= 45 then
        local n = st.rng2.chance(50) and x.n or st.rng2.int(1, 3)
        st.held[name] = nil
        again[#again + 1] = make_extra(name, x.kind, n)
        st.reopenlog[#st.reopenlog + 1] = ("undeclared %s declared again (kind %d, n %d -> %d)"):format(name, x.kind, x.n, n)
      end
    end
  end
  -- relations declared for the first time on a state that holds rows
  st.extras = {}
  local ne = st.rng.int(0, 2)
  for _ = 1, ne do
    st.nextra = (st.nextra or 0) + 1
    local name = "x" .. st.nextra
    local kind = st.rng.int(1, 4)
    st.extras[#st.extras + 1] = make_extra(name, kind, st.rng.int(1, 3))
  end
  for _, x in ipairs(again) do st.extras[#st.extras + 1] = x end
  attach_sinks(st.R, st.S)
end

-- ---- version 11: p:run of NDJSON, attach reads, second opens, drops -----
local BADLINES = {
  '{"rel":"A","op":"insert","row":{"id":1',
  '{"rel":"Nope","op":"insert","row":{"x":1}}',
  '{"rel":"B","op":"merge","row":{"bid":1}}',
  '{"rel":"A","op":"upsert","row":{"id":3,"s":"p","zz":1}}',
  '{"rel":"K","op":"insert","row":[1]}',
  '{"rel":"E","op":"insert","row":{"k":"x","ts":1.5,"v":1,"tf":1.0}}',
  '{"rel":"B","op":"insert","row":{"bid":null,"name":"n"}}',
  'not json',
  '{"rel":"A","op":"insert","row":{"id":2,"s":"p","v":99999999999999999999}}',
  '{"rel":"top1","op":"insert","row":{}}',
  '[1,2]',
  '{"rel":"A","op":"update","row":{"id":4,"s":null}}',
  '{"rel":"A","row":{"id":4}}',
}

-- Applies the group's changes as NDJSON lines through p:run (one group:
-- batch >= the lines), with blank and bad lines among them, on_error stop
-- or skip; the model takes the lines in order (skip: a line it refuses is
-- left out, the rest applies). Returns whether the group committed.
local function run_ndjson(st, ctx, changes, log)
  local rng2 = st.rng2
  local lines, kinds = {}, {}
  for i, c in ipairs(changes) do
    if rng2.chance(8) then lines[#lines + 1] = rng2.pick{ "", "   " }; kinds[#kinds + 1] = "blank" end
    if rng2.chance(7) then lines[#lines + 1] = rng2.pick(BADLINES); kinds[#kinds + 1] = "bad" end
    local l = c[4]
    -- an int column takes a whole float
    if rng2.chance(20) then l = l:gsub('":(%-?%d+)([,}])', '":%1.0%2') end
    lines[#lines + 1] = l
    kinds[#kinds + 1] = i
  end
  local nonblank = 0
  for _, k in ipairs(kinds) do if k ~= "blank" then nonblank = nonblank + 1 end end
  local skip = rng2.chance(40)
  local batch = nonblank + rng2.int(0, 3)
  local f = assert(io.open(st.ndpath, "w"))
  f:write(table.concat(lines, "\n"), rng2.chance(50) and "\n" or "")
  f:close()
  log[#log + 1] = ("p:run (on_error %s, batch %d) of %d lines:"):format(skip and "skip" or "stop", batch, #lines)
  local want_err, boom, applied, rejected = nil, false, 0, 0
  for li, k in ipairs(kinds) do
    local l = lines[li]
    log[#log + 1] = ("  %d: %s"):format(li, #l > 120 and l:sub(1, 60) .. "…" .. l:sub(-50) or l)
    if k == "bad" then
      if skip then rejected = rejected + 1 else want_err = li; break end
    elseif k ~= "blank" then
      local mok, mboom = changes[k][3]()
      log[#log] = log[#log] .. " (" .. changes[k][1]:sub(1, 40) .. (mok and "" or ", refused") .. ")"
      if mok then
        applied = applied + 1
        if mboom then boom = true end
      elseif skip then rejected = rejected + 1
      else want_err = li; break end
    end
  end
  os.remove(st.ndrej)
  local ok, res = pcall(st.p.run, st.p, runnel.ndjson_source(st.ndpath),
    { batch = batch, on_error = skip and "skip" or "stop", rejects = skip and st.ndrej or nil, progress = false })
  if st.p:in_group() then fail(ctx, "p:run left a group open") end
  if want_err then
    if ok then fail(ctx, "p:run took the lines; the model refuses line %d", want_err) end
    local where = st.ndpath .. ":" .. want_err .. ":"
    if not tostring(res):find(where, 1, true) then fail(ctx, "p:run's error does not name %s: %s", where, tostring(res)) end
    return false
  end
  if boom then
    if ok then fail(ctx, "p:run committed a group whose A sink raises") end
    return false
  end
  if not ok then fail(ctx, "p:run raised: %s", tostring(res)) end
  if res.lines ~= #lines or res.applied ~= applied or res.rejected ~= rejected or res.groups ~= 1 then
    fail(ctx, "p:run stats lines %s applied %s rejected %s groups %s; model %d %d %d 1", tostring(res.lines),
      tostring(res.applied), tostring(res.rejected), tostring(res.groups), #lines, applied, rejected)
  end
  if skip then
    local n, rf = 0, io.open(st.ndrej)
    if rejected > 0 and not rf then fail(ctx, "p:run wrote no rejects file for %d rejected lines", rejected) end
    if rf then
      for l in rf:lines() do
        n = n + 1
        if not l:find(st.ndpath .. ":%d+: ") and not l:find(st.ndpath, 1, true) then fail(ctx, "reject line without file:line: %s", l:sub(1, 200)) end
      end
      rf:close()
    end
    if n ~= rejected then fail(ctx, "rejects file has %d lines, %d rejected", n, rejected) end
  end
  return true
end

-- Every so often between groups: relations read through runnel.attach
-- (the pipeline's environment; carried groups flushed first) agree with
-- the pipeline's rows.
local ATTACHED = { "A", "B", "K", "top1", "top2", "ix1", "d1", "d3", "ja", "j", "ji", "ka", "w1", "jtop", "atop" }
local function check_attach(st, ctx, got)
  for _, name in ipairs(ATTACHED) do
    if st.rng2.chance(40) then
      local cols = st.S.cols[name]
      local ok, att = pcall(runnel.attach, st.dir, name)
      if not ok then fail(ctx, "attach %s: %s", name, tostring(att)) end
      local a, b = {}, {}
      for row in att:rows() do a[#a + 1] = ser(copy_row(row, cols), cols) end
      for _, r in pairs(got[name]) do b[#b + 1] = ser(r, cols) end
      table.sort(a) table.sort(b)
      if table.concat(a, " ") ~= table.concat(b, " ") then
        fail(ctx, "attach %s: rows\n  %s\n pipeline\n  %s", name, table.concat(a, "\n  "), table.concat(b, "\n  "))
      end
      local order_a, order_p = {}, {} -- and in the same order (ids listed)
      for _, id in att:rows() do order_a[#order_a + 1] = id end
      for _, id in st.R[name]:rows() do order_p[#order_p + 1] = id end
      if table.concat(order_a, " ") ~= table.concat(order_p, " ") then
        fail(ctx, "attach %s: rows in the order %s, the pipeline's %s", name, table.concat(order_a, " "),
             table.concat(order_p, " "))
      end
      local keys = st.R[name]:schema().key
      if keys and name ~= "ix1" and next(got[name]) and st.rng2.chance(50) then
        local ids = {}
        for id in pairs(got[name]) do ids[#ids + 1] = id end
        table.sort(ids)
        local r = got[name][st.rng2.pick(ids)]
        local k = {}
        for _, c in ipairs(keys) do k[c] = r[c] == nil and null or r[c] end
        local g = copy_row(att:get(k), cols)
        if not g or not rows_equal(g, r, cols) then fail(ctx, "attach %s: get(%s) %s, pipeline %s", name, keyf_of(keys)(r), ser(g, cols), ser(r, cols)) end
      end
      att:close()
    end
  end
end

function M.run(opts)
  local seed, groups = opts.seed, opts.groups
  local st = { rng = rng_new(seed), m = model_new(), now = 20, clock = 1000, prev = {},
               S = { committed = {}, rolled = {}, dgot = {}, dwant = {}, dpos = {} }, stats = {}, evnext = {}, esdone = 0, k2id = {}, id2k = {}, dmax = {}, dprev = {} }
  st.dir = opts.dir
  st.v11 = (opts.version or 10) >= 11
  st.reopenlog = {}
  st.rng2 = rng_new(seed + 4242)
  st.ndpath = opts.dir .. ".in.ndjson"
  st.ndrej = opts.dir .. ".rejects"
  st.check_attach = check_attach
  for _, name in ipairs(DURABLE) do st.S.dwant[name], st.S.dwant[name .. "+c"] = {}, {} end
  local orng = rng_new(seed + 7777)
  st.openopts = { sync = orng.chance(50), write_back = orng.chance(30),
                  map_size = orng.chance(40) and 64 * 1024 or nil, carry = orng.chance(50) and { groups = orng.int(1, 6) } or nil }
  if opts.sync ~= nil then st.openopts.sync = opts.sync end
  open_state(st)
  local rng = st.rng
  local log = {}
  local ok, err = pcall(function()
    check_all(st, "start", 0, false)
    for gi = 1, groups do
      local ctx = ("group %d"):format(gi)
      st.heavy = gi % 3 == 0
      log = {}
      st.clock = st.clock + rng.int(0, 5)
      if opts.reopen_every and gi % opts.reopen_every == 0 then
        st.p:close()
        check_durable(ctx, st, true)
        st.reopenlog = {}
        open_state(st)
        if st.v11 and st.rng2.chance(40) then
          -- a second pipeline on the state, in this process and in another
          local ok2, e2 = pcall(runnel.open, { path = st.dir })
          if ok2 then pcall(e2.close, e2); fail(ctx, "a second runnel.open of the open state was taken") end
          if not tostring(e2):find("open", 1, true) then fail(ctx, "second open: unclear error %s", tostring(e2)) end
          if st.rng2.chance(25) then
            local f = io.popen("lua5.4 -e 'local r = require \"runnel\"; local ok, e = pcall(r.open, { path = \"" .. st.dir .. "\" }); print(ok, e)' 2>&1")
            local out = f:read("a")
            f:close()
            if not out:find("^false\t") or not out:find("process", 1, true) then fail(ctx, "open in another process: %s", out) end
          end
          st.reopenlog[#st.reopenlog + 1] = "second open refused"
        end
        local xs = {}
        for _, x in ipairs(st.extras) do xs[#xs + 1] = x.name .. "(kind " .. x.kind .. ", n " .. x.n .. ")" end
        log[#log + 1] = ("close + reopen (top1 n=%d, top2 n=%d, ftop n=%d, jf mod %d, ix1 s %s, jm sep %s, ja %s; new: %s)"):format(st.variant.top1n, st.variant.top2n, st.variant.ftopn, st.variant.jfmod, st.variant.ix1s, st.variant.sep, st.variant.jamin and "min" or "max", table.concat(xs, " ")) .. (#st.reopenlog > 0 and "; " .. table.concat(st.reopenlog, "; ") or "")
        st.stats.reopen = (st.stats.reopen or 0) + 1
        st.cur = log
        check_all(st, ctx, st.p:seq(), false)
      end
      local mode = rng.int(1, 100)
      local n = rng.int(1, 6)
      local snap = model_snapshot(st.m)
      local nowsnap = st.now
      local expect_ok, boom = true, false
      local seq0 = st.p:seq()
      local changes = {}
      local runmode = st.v11 and st.rng2.chance(15)
      for i = 1, n do
        local desc, run, model = random_change(st)
        changes[i] = { desc, run, model, st.json }
        if not st.json then runmode = false end
      end
      st.cur = log
      local in_group
      local function apply_all(raise_after)
        for _, c in ipairs(changes) do
          log[#log + 1] = c[1]
          local mok, mboom = c[3]()
          local rok, rerr = pcall(c[2])
          if mok and not rok then fail(ctx, "%s raised, the model takes it: %s", c[1], tostring(rerr)) end
          if not mok and rok then fail(ctx, "%s was taken, the model refuses it", c[1]) end
          if not rok then
            expect_ok = false
            local kind = "refused " .. c[1]:match("^[%w]+:%w+")
            st.stats[kind] = (st.stats[kind] or 0) + 1
            return false
          end
          if mboom then boom = true end
          if in_group and rng.chance(12) then
            log[#log + 1] = "(reads inside the group)"
            st.midgroup = true
            check_all(st, ctx .. " (inside the group, after " .. c[1] .. ")", nil, false, true)
            st.midgroup = false
          end
        end
        if raise_after then error("fn raises") end
        return true
      end
      local committed = false
      in_group = mode <= 16 or mode > 22
      if runmode then
        committed = run_ndjson(st, ctx, changes, log)
        st.stats["p:run"] = (st.stats["p:run"] or 0) + 1
      elseif mode <= 8 then
        log[#log + 1] = "begin … rollback"
        st.p:begin()
        if apply_all() then st.p:rollback() end
        if st.p:in_group() then fail(ctx, "a group is still open after rollback or a failed change") end
      elseif mode <= 16 then
        local raise = rng.chance(50)
        log[#log + 1] = raise and "batch (fn raises)" or "batch"
        local bok, berr = pcall(st.p.batch, st.p, function()
          if not apply_all(raise) then error("change failed") end
        end)
        if bok then committed = true
        elseif expect_ok and not raise and not boom then fail(ctx, "batch raised: %s", tostring(berr)) end
        if bok and (raise or boom) then fail(ctx, "batch committed a group that should fail") end
      elseif mode <= 22 then
        -- each change a group of its own
        changes = { changes[1] }
        log[#log + 1] = "single change"
        local c = changes[1]
        log[#log + 1] = c[1]
        local mok, mboom = c[3]()
        local rok, rerr = pcall(c[2])
        if mboom then
          if rok then fail(ctx, "%s was taken though its A sink raises", c[1]) end
          mok = false
        end
        if mok and not rok then fail(ctx, "%s raised, the model takes it: %s", c[1], tostring(rerr)) end
        if not mok and rok then fail(ctx, "%s was taken, the model refuses it", c[1]) end
        committed = rok
        boom = false
      else
        log[#log + 1] = "begin … commit"
        st.p:begin()
        if apply_all() then
          local cok, cerr = pcall(st.p.commit, st.p)
          if cok and boom then fail(ctx, "commit took a group whose A sink raises") end
          if not cok and not boom then fail(ctx, "commit raised: %s", tostring(cerr)) end
          committed = cok
        end
        if st.p:in_group() then fail(ctx, "a group is still open after a failed change or commit") end
      end
      st.stats[committed and "committed" or "not committed"] = (st.stats[committed and "committed" or "not committed"] or 0) + 1
      if boom then st.stats.boom = (st.stats.boom or 0) + 1 end
      if not expect_ok then st.stats.refused = (st.stats.refused or 0) + 1 end
      if not committed then
        model_restore(st.m, snap)
        st.now = nowsnap
        if st.p:seq() ~= seq0 then fail(ctx, "seq moved from %d to %d without a commit", seq0, st.p:seq()) end
      elseif st.p:seq() ~= seq0 + 1 then
        fail(ctx, "seq %d after a commit, was %d", st.p:seq(), seq0)
      end
      if opts.trace then io.stderr:write(("%d%s: %s\n"):format(gi, committed and "" or " (not committed)", table.concat(log, "; "))) end
      check_all(st, ctx, st.p:seq(), committed)
    end
  end)
  pcall(function() st.p:close() end)
  os.remove(st.ndpath)
  os.remove(st.ndrej)
  st.stats["durable groups"] = #st.S.dgot["A"] + #st.S.dgot["top1+c"]
  st.stats.sync = tostring(st.openopts.sync)
  for _, w in ipairs{ "w1", "w3", "w4" } do st.stats["late " .. w] = st.m.wins[w].late end
  if ok then return nil, st.stats end
  local msg = type(err) == "table" and err.diff or tostring(err)
  return ("seed %d (sync=%s, write_back=%s, map_size=%s, carry=%s) %s\n  changes: %s"):format(seed, tostring(st.openopts.sync), tostring(st.openopts.write_back),
    tostring(st.openopts.map_size), st.openopts.carry and st.openopts.carry.groups or "-", msg, table.concat(st.cur or log, "; "))
end

return M
