-- The write-back layer (core/wb.c) against the plain LMDB path, operator by
-- operator: one random sequence of groups goes into two states, A opened
-- with write_back = true, sync = false and a small map (so that it regrows
-- inside carried transactions), B without the layer (sync = false on even
-- seeds, sync = true on odd ones). After every group both must agree on
-- every relation's rows and ids, on what every sink was told (verb, id,
-- row, old, commits and rollbacks, in order), on top1's CDC images, on
-- p:stats() counts, on reads by key, an index's range, rank and count, and
-- on reads made inside a sink callback and inside the group while the
-- layer holds its writes. Groups hold inserts, updates, upserts, key
-- changes and deletes of a keyed table with keys past LMDB's 511 bytes, a
-- keyless table and a stream with windows; some end in a bad change, a
-- sink that raises, or p:rollback(). Between groups: reads through
-- runnel.attach of both states (after p:flush(), or with groups carried,
-- which such a read commits first), a close and a reopen, the table
-- declared with a column added or dropped, derived relations dropped and
-- declared again, and a child process that carries groups and exits
-- without closing (both states must keep the same flushed groups). Rows
-- of a few KB in a third table, joined to the first, make the map grow.
-- A longer look: SEEDS27=from,to GROUPS27=n.
local runnel = require "runnel"
local H = require "helper"

-- The declarations, as text: the crash child declares the same.
local DECL = [==[
local runnel, p, st = ...
local LONG = string.rep("q", 600)
local cols = { {"k","string"}, {"g","string"}, {"s","string", null = true}, {"v","int"}, key = "k" }
if st.extra then table.insert(cols, { "x", "int", null = true }) end
local R = {}
R.t = p:table("t", cols)
R.kl = p:table("kl", { {"g","string"}, {"v","int"} })
R.big = p:table("big", { {"k","string"}, {"g","string"}, {"pad","string"}, key = "k" })
R.biga = R.big:aggregate{ by = "g", n = runnel.count(), hi = runnel.max("pad"), name = "biga" }
R.bigj = R.big:join(R.t, { on = "g", name = "bigj" })
R.gt = p:table("gt", { {"g","string"}, {"label","string"}, key = "g" })
R.e = p:stream("e", { {"k","string"}, {"ts","int"}, {"v","int"} })
R.top1 = R.t:top{ n = 2, by = "g", order = { {"s","desc"}, {"v","asc"} }, name = "top1" }
R.top2 = R.t:top{ n = 3, order = { {"v","asc"}, {"s","asc"} }, name = "top2" }
R.d = R.t:select({ "g", "s" }, "t.gs"):distinct("d")
R.a = R.t:aggregate{ by = "g", n = runnel.count(), total = runnel.sum("v"), hi = runnel.max("v"),
                     lo = runnel.min("s"), name = "a" }
R.ix = R.t:index{ "s", "desc", "v", name = "ix" }
R.ixv = R.t:index{ "v", name = "ixv" }
R.j = R.t:join(R.gt, { on = "g", kind = "left", name = "j" })
R.jtop = R.j:top{ n = 2, by = "label", order = { {"v","desc"}, {"k","asc"} }, name = "jtop" }
R.gtf = R.gt:filter(function(r) return r.label:sub(1, 1) == "l" end, "gtf")
R.ij = R.t:join(R.gtf, { on = "g", name = "ij" })
R.ija = R.ij:aggregate{ by = "label", n = runnel.count(), total = runnel.sum("v"), name = "ija" }
R.da = R.d:aggregate{ by = "g", n = runnel.count(), name = "da" }
R.cdc = R.top1:cdc{ preimage = "full", postimage = true }
R.w = R.e:aggregate{ by = "k", window = runnel.tumbling(10, "ts"), n = runnel.count(), total = runnel.sum("v"), name = "w" }
R.hw = R.e:aggregate{ by = "k", window = runnel.hopping(10, 4, "ts"), grace = 15, n = runnel.count(), name = "hw" }
R.kla = R.kl:aggregate{ by = "g", n = runnel.count(), total = runnel.sum("v"), name = "kla" }
R.kld = R.kl:distinct("kld")
local th = st.th or 0
R.fpos = R.t:filter(function(r) return r.v > th end, "fpos")
R.fd = R.fpos:select({ "g" }, "fpos.g"):distinct("fd")
R.ftop = R.fpos:top{ n = 2, order = { {"v","desc"}, {"k","asc"} }, name = "ftop" }
R.m1 = R.d:map(function(r) return { g = r.g, len = r.s and #r.s or -1 } end, { {"g","string"}, {"len","int"} }, "m1")
R.mtop = R.m1:top{ n = 1, by = "g", order = { {"len","desc"} }, name = "mtop" }
if not st.dropped then
  R.km = R.t:map(function(r) return { k = r.k, g2 = r.g:sub(-2) } end, { {"k","string"}, {"g2","string"}, key = "k" }, "km")
  R.ka = R.km:aggregate{ by = "g2", n = runnel.count(), hi = runnel.max("k"), name = "ka" }
  R.dt = R.t:distinct("dt")
end
return R
]==]

local LONG = string.rep("q", 600)
local KEYS, GROUPS, ORDERS, EKEYS = {}, {}, {}, {}
for i = 1, 10 do KEYS[i] = (i % 2 == 0 and LONG or "") .. "k" .. i end
for i = 1, 3 do GROUPS[i] = (i ~= 2 and LONG or "") .. "g" .. i end
for i = 1, 5 do ORDERS[i] = (i % 2 == 1 and LONG or "") .. string.char(96 + i) end
for i = 1, 3 do EKEYS[i] = (i ~= 3 and LONG or "") .. "e" .. i end

local function rng_of(seed)
  local x = seed
  return function(a, b)
    x = (x * 1103515245 + 12345) % 2147483648
    return a + (x // 65536) % (b - a + 1)
  end
end

local function text(v)
  if type(v) ~= "table" then
    if v == runnel.null then return "null" end
    if math.type(v) == "float" then return ("%.17g"):format(v) .. "f" end
    return (tostring(v):gsub(LONG, "L"))
  end
  local ks = {}
  for k in pairs(v) do ks[#ks + 1] = k end
  table.sort(ks, function(a, b) return tostring(a) < tostring(b) end)
  local parts = {}
  for _, k in ipairs(ks) do parts[#parts + 1] = text(k) .. "=" .. text(v[k]) end
  return "{" .. table.concat(parts, ",") .. "}"
end

-- Lua source of a value (the crash child's changes).
local function source(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if v == runnel.null then return "runnel.null" end
  if type(v) ~= "table" then return tostring(v) end
  local parts = {}
  for k, x in pairs(v) do parts[#parts + 1] = "[" .. source(k) .. "]=" .. source(x) end
  return "{" .. table.concat(parts, ",") .. "}"
end

local WATCHED = { "t", "kl", "big", "biga", "bigj", "gt", "top1", "top2", "d", "a", "ix", "ixv", "j", "jtop", "gtf", "ij", "ija", "da", "w", "hw",
                  "kla", "kld", "fpos", "fd", "ftop", "m1", "mtop", "km", "ka", "dt" }
local STORED = { t = true, kl = true, big = true, biga = true, bigj = true, gt = true, top1 = true, top2 = true, d = true, a = true, ix = true, ixv = true,
                 j = true, jtop = true, ij = true, ija = true, da = true, w = true, hw = true, kla = true, kld = true,
                 fd = true, ftop = true, mtop = true, ka = true, dt = true }

local function declare(p, st)
  return assert(load(DECL, "decl"))(runnel, p, st)
end

-- What a side's sinks were told, as lines.
local function watch(side, st)
  local R, log = side.R, side.log
  for _, name in ipairs(WATCHED) do
    local rel = R[name]
    if rel then
      rel:sink{
        insert = function(row, info) log[#log + 1] = name .. " INSERT " .. info.id .. " " .. text(row) end,
        update = function(row, old, info) log[#log + 1] = name .. " UPDATE " .. info.id .. " " .. text(row) .. " " .. text(old) end,
        delete = function(old, info) log[#log + 1] = name .. " DELETE " .. info.id .. " " .. text(old) end,
        commit = function() log[#log + 1] = name .. " commit" end,
        rollback = function() log[#log + 1] = name .. " rollback" end }
    end
  end
  R.cdc:sink(function(verb, row) log[#log + 1] = "cdc " .. verb .. " " .. text(row) end)
  -- reads from inside a callback, while the layer holds the group's writes
  R.top1:sink(function(verb, row, _, info)
    local k = row.k
    local a = R.a:get(row.g)
    log[#log + 1] = ("in sink %s %d: t %s a %s ix %d rank %d ixv %s"):format(verb, info.id, text(R.t:get{ k = k }),
      text(a), R.ix:count(), R.ix:rank{ row.s or runnel.null, row.v }, text(R.ixv:count{ from = -1, to = 1 }))
    if st.boom and verb == "INSERT" then error("boom in a sink") end
  end)
  -- rows() and p:stats() from a callback write the layer's entries into
  -- LMDB first, where the map may fill (the group then grows it and runs again)
  R.biga:sink(function(verb, row, _, info)
    local n, bytes = 0, 0
    for r in R.big:rows() do n = n + 1; bytes = bytes + #r.pad end
    local groups = {}
    for r, id in R.a:rows() do groups[#groups + 1] = id .. "=" .. r.n end
    local state = side.p:stats().state
    log[#log + 1] = ("in biga's sink %s %d %s: big %d rows %d bytes, a %s, state big %d bigj %d t %d"):format(verb,
      info.id, text(row.g), n, bytes, table.concat(groups, ","), state.big, state.bigj, state.t)
  end)
  -- a keyed store of a join, written at commit (a store sink writes into LMDB)
  R.j:sink(runnel.store("jstore"))
end

local function open_side(side, st)
  side.notes = {}
  side.p = runnel.open{ path = side.dir, sync = side.sync, write_back = side.wb, map_size = side.map_size,
                        carry = { groups = 100000, changes = 1000000, seconds = 100000 },
                        notes = function(line) side.notes[#side.notes + 1] = line end }
  side.R = declare(side.p, st)
  watch(side, st)
end

local function reads(side)
  local R, out = side.R, {}
  for _, name in ipairs(WATCHED) do
    local rel = R[name]
    if rel then
      local rows = {}
      for row, id in rel:rows() do rows[#rows + 1] = id .. ":" .. text(row) end
      if not STORED[name] or name == "j" or name == "ij" or name == "fpos" then table.sort(rows) end
      out[#out + 1] = name .. " " .. rel:count() .. " " .. table.concat(rows, " ")
    end
  end
  for _, k in ipairs(KEYS) do
    out[#out + 1] = ("t:get %s id %s top1 %s top2 %s"):format(text(R.t:get{ k = k }), text(R.t:id_of(k)),
      text(R.top1:get(k)), text(R.top2:id_of{ k = k }))
  end
  for _, g in ipairs(GROUPS) do
    out[#out + 1] = ("a %s %s da %s gt %s"):format(text(R.a:get(g)), text(R.a:id_of{ g = g }), text(R.da:get(g)),
      text(R.gt:get(g)))
  end
  for _, lim in ipairs{ { limit = 3 }, { offset = 2, limit = 4 }, { from = { ORDERS[3] } }, { to = { ORDERS[2], 0 } } } do
    local l = {}
    for row in R.ix:range(lim) do l[#l + 1] = text(row) end
    out[#out + 1] = "ix range " .. text(lim) .. " " .. table.concat(l, " ")
  end
  for _, o in ipairs(ORDERS) do
    out[#out + 1] = ("ix rank %s %d count %d"):format(text(o), R.ix:rank{ o, 0 }, R.ix:count{ from = { o } })
  end
  for v = -3, 3 do out[#out + 1] = ("ixv rank %d %d count %d"):format(v, R.ixv:rank(v), R.ixv:count{ from = v, to = 3 }) end
  local st = side.p:stats()
  out[#out + 1] = ("stats seq %d groups %d changes %d rollbacks %d state %s late %s final %s"):format(
    st.seq, st.groups, st.changes, st.rollbacks, text(st.state), text(st.late), text(st.final))
  return out
end

-- Reads of the committed state through runnel.attach (after a flush).
local ATTACHED = { "t", "kl", "big", "biga", "bigj", "top1", "d", "a", "ix", "j", "ij", "ija", "jtop", "w", "hw", "kla", "da", "jstore" }
local function attached(side)
  local out = {}
  for _, name in ipairs(ATTACHED) do
    local att = runnel.attach(side.dir, name)
    local rows = {}
    for row, id in att:rows() do rows[#rows + 1] = tostring(id) .. ":" .. text(row) end
    table.sort(rows)
    out[#out + 1] = name .. " " .. att:count() .. " " .. table.concat(rows, " ")
    if name == "ix" then
      local l = {}
      for row in att:range{ offset = 1, limit = 3 } do l[#l + 1] = text(row) end
      out[#out + 1] = "range " .. table.concat(l, " ") .. " rank " .. att:rank{ ORDERS[2], 1 } .. " count " ..
        att:count{ from = { ORDERS[4] } }
    end
    att:close()
  end
  return out
end

local function same(what, a, b, where)
  local n = math.max(#a, #b)
  for i = 1, n do
    if a[i] ~= b[i] then
      error(("%s: %s differ at line %d of %d/%d\n write-back: %s\n plain:      %s"):format(where, what, i, #a, #b,
        tostring(a[i]), tostring(b[i])), 0)
    end
  end
end

local function random_row(st, rnd, k)
  local row = { k = k, g = GROUPS[rnd(1, #GROUPS)], v = rnd(-3, 3) }
  if rnd(1, 4) > 1 then row.s = ORDERS[rnd(1, #ORDERS)] end
  if st.extra and rnd(1, 2) == 1 then row.x = rnd(1, 9) end
  return row
end

-- One random change; bad ones fail (a wrong type, a missing row, a null
-- where none may be). Both sides get the same, good or bad.
local function random_change(st, rnd, bad)
  local k = KEYS[rnd(1, #KEYS)]
  if bad then
    local kind = rnd(1, 5)
    if kind == 1 then return { op = "insert", bad = true, row = { k = k, g = "g", v = "bad" } } end
    if kind == 2 then return { op = "update", bad = true, row = { k = k, v = 1.5 } } end
    if kind == 3 then return { op = "update", bad = true, row = { k = k, g = runnel.null } } end
    if kind == 4 then return { op = "kl_insert", bad = true, row = { g = "x" } } end
    return { op = "event", bad = true, row = { k = "x", ts = "late" } }
  end
  local roll = rnd(1, 16)
  if roll >= 15 then -- rows of a few KB: the small map grows inside carried transactions
    local bk = (rnd(1, 2) == 1 and LONG or "") .. "b" .. rnd(1, 60)
    if roll == 16 and rnd(1, 2) == 1 then return { op = "big_delete", row = { k = bk } } end
    return { op = "big_upsert", row = { k = bk, g = KEYS[rnd(1, #KEYS)], pad = string.rep(string.char(96 + rnd(1, 26)), rnd(1, 4000)) } }
  elseif roll == 1 then
    local g = GROUPS[rnd(1, #GROUPS)]
    local label = (rnd(1, 2) == 1 and "l" or "m") .. (rnd(1, 2) == 1 and LONG or "") .. rnd(1, 2)
    local r = rnd(1, 3)
    return { op = r == 1 and "gt_delete" or r == 2 and "gt_upsert" or "gt_insert", row = { g = g, label = label } }
  elseif roll == 2 then return { op = "event", row = { k = EKEYS[rnd(1, #EKEYS)], ts = rnd(0, 60), v = rnd(1, 5) } }
  elseif roll == 3 then return { op = "kl_insert", row = { g = GROUPS[rnd(1, #GROUPS)], v = rnd(1, 3) } }
  elseif roll == 4 then return { op = "kl_delete", row = { g = GROUPS[rnd(1, #GROUPS)], v = rnd(1, 3) } }
  elseif roll <= 6 then return { op = "insert", row = random_row(st, rnd, k) }
  elseif roll == 7 then return { op = "upsert", row = random_row(st, rnd, k) }
  elseif roll <= 9 then return { op = "delete", row = { k = k } }
  elseif roll <= 11 then return { op = "update", row = { k = k, g = GROUPS[rnd(1, #GROUPS)] } }
  end
  return { op = "update", row = { k = k, v = rnd(-3, 3), s = rnd(1, 3) == 1 and runnel.null or ORDERS[rnd(1, #ORDERS)] } }
end

-- Applies c to a side (PUSH, shared with the crash child): a good change
-- that the state would refuse (an insert of a key it holds, an update or
-- delete of one it does not) is skipped, found by a read inside the group.
local PUSH = [==[
local R, c = ...
local function holds(rel, key) return rel:get(key) ~= nil end
if c.op == "gt_insert" then if not holds(R.gt, c.row.g) then R.gt:insert(c.row) end
elseif c.op == "gt_upsert" then R.gt:upsert(c.row)
elseif c.op == "gt_delete" then if holds(R.gt, c.row.g) then R.gt:delete{ g = c.row.g } end
elseif c.op == "event" then R.e:insert(c.row)
elseif c.op == "kl_insert" then R.kl:insert(c.row)
elseif c.op == "big_upsert" then R.big:upsert(c.row)
elseif c.op == "big_delete" then if holds(R.big, c.row.k) then R.big:delete(c.row) end
elseif c.op == "kl_delete" then
  for row in R.kl:rows() do
    if row.g == c.row.g and row.v == c.row.v then R.kl:delete(c.row) break end
  end
elseif c.op == "insert" then if c.bad or not holds(R.t, c.row.k) then R.t:insert(c.row) end
elseif c.op == "upsert" then R.t:upsert(c.row)
elseif c.bad or holds(R.t, c.row.k) then R.t[c.op](R.t, c.row) end
]==]
local push_chunk = assert(load(PUSH, "push"))
local function push(R, c)
  return pcall(push_chunk, R, c)
end

-- A refused change of a good group (a missing row, a key taken) is caught
-- and the group goes on; the bad one ends it.
local function run_group(side, changes, bad, undo, inside)
  local R, p = side.R, side.p
  local told = {}
  local ok, err = pcall(function()
    p:begin()
    for i, c in ipairs(changes) do
      local fine, e = push(R, c)
      told[#told + 1] = fine and "ok" or "refused " .. tostring(e):gsub("^[^:]*:%d+: ", ""):gsub(LONG, "L")
      if not fine then error(e, 0) end
      if inside and i == #changes // 2 then
        for _, line in ipairs(reads(side)) do told[#told + 1] = line end
        -- what LMDB committed last: the same on both while both carry
        if inside == "attach" then for _, line in ipairs(attached(side)) do told[#told + 1] = line end end
      end
    end
    if undo then p:rollback() else p:commit() end
  end)
  if p:in_group() then p:rollback() end
  told[#told + 1] = ok and "ok" or "failed " .. tostring(err):gsub("^[^:]*:%d+: ", ""):gsub(LONG, "L")
  return told
end

-- A child process opens the side's state, carries groups (flushing the
-- first `flushed` of them) and exits without closing.
local function crash(side, st, groups, flushed)
  local lines = {}
  for i, changes in ipairs(groups) do
    local body = {}
    for _, c in ipairs(changes) do body[#body + 1] = ("push(R, %s)"):format(source(c)) end
    lines[#lines + 1] = "p:begin() " .. table.concat(body, " ") .. " p:commit()"
    if i == flushed then lines[#lines + 1] = "p:flush()" end
  end
  H.run_script(side.dir .. ".child.lua", ([[
local runnel = require "runnel"
local DECL = %q
local st = %s
local p = runnel.open{ path = %q, sync = false, write_back = %s, map_size = %d, notes = false,
                       carry = { groups = 100000, changes = 1000000, seconds = 100000 } }
local R = assert(load(DECL))(runnel, p, st)
R.j:sink(runnel.store("jstore"))
local push = assert(load(%q))
%s
os.exit(0, false)
]]):format(DECL, source{ extra = st.extra or nil, th = st.th, dropped = st.dropped or nil }, side.dir,
           tostring(side.wb), side.map_size, PUSH, table.concat(lines, "\n")))
end

local function run(seed, ngroups)
  local rnd = rng_of(seed)
  local st = {}
  local A = { name = "write-back", dir = H.tmpdir(), wb = true, sync = false, map_size = 1 << 16, log = {} }
  local B = { name = "plain", dir = H.tmpdir(), wb = false, sync = seed % 2 == 1, map_size = 1 << 16, log = {} }
  local sides = { A, B }
  local at = ("seed %d at the start"):format(seed)
  local function both(fn)
    for _, s in ipairs(sides) do
      local ok, err = pcall(fn, s)
      if not ok then error(("%s: %s: %s"):format(at, s.name, tostring(err)), 0) end
    end
  end
  both(function(s) open_side(s, st) end)
  for gi = 1, ngroups do
    local where = ("seed %d group %d"):format(seed, gi)
    local roll = rnd(1, 24)
    at = where .. " (roll " .. roll .. ")"
    if roll == 1 then
      both(function(s) s.p:close() end); both(function(s) open_side(s, st) end)
      where = where .. " (reopened)"
    elseif roll == 2 then
      both(function(s) s.p:close() end)
      st.extra = not st.extra
      both(function(s) open_side(s, st) end)
      where = where .. (st.extra and " (x added)" or " (x dropped)")
    elseif roll == 3 then
      both(function(s) s.p:close() end)
      st.dropped = not st.dropped
      both(function(s)
        open_side(s, st)
        if st.dropped then for _, name in ipairs{ "ka", "km", "dt" } do s.p:drop(name) end end
      end)
      where = where .. (st.dropped and " (km, ka, dt dropped)" or " (km, ka, dt declared again)")
    elseif roll == 4 then
      both(function(s) s.p:close() end)
      st.th = rnd(-1, 1)
      both(function(s) open_side(s, st) end)
      where = where .. " (fpos: v > " .. st.th .. ")"
    elseif roll == 5 then -- an attach in this process commits the carried groups first
      local flush = rnd(1, 2) == 1
      if flush then both(function(s) s.p:flush() end) end
      same("attached reads", attached(A), attached(B), where .. (flush and " (flushed)" or " (carried)"))
    elseif roll == 6 and not B.sync then -- a crash: carried groups after the last flush are lost on both
      both(function(s) s.p:close() end)
      local groups = {}
      for i = 1, rnd(1, 4) do
        groups[i] = {}
        for j = 1, rnd(1, 4) do groups[i][j] = random_change(st, rnd) end
      end
      local flushed = rnd(0, #groups)
      both(function(s) crash(s, st, groups, flushed) end)
      both(function(s) open_side(s, st) end)
      where = where .. (" (a child carried %d groups, flushed %d, and died)"):format(#groups, flushed)
    end
    local changes = {}
    for i = 1, rnd(1, 7) do changes[i] = random_change(st, rnd) end
    local kind = rnd(1, 8)
    local bad
    if kind == 1 then
      bad = random_change(st, rnd, true)
      table.insert(changes, rnd(1, #changes + 1), bad)
    end
    st.boom = kind == 2
    local undo = kind == 3
    local inside = rnd(1, 4) == 1 and (B.sync and true or rnd(1, 2) == 1 or "attach")
    local ta = run_group(A, changes, bad, undo, inside)
    local tb = run_group(B, changes, bad, undo, inside)
    st.boom = false
    same("results", ta, tb, where)
    same("sinks' logs", A.log, B.log, where)
    H.clear(A.log); H.clear(B.log)
    same("reads", reads(A), reads(B), where)
    same("notes", A.notes, B.notes, where)
    H.clear(A.notes); H.clear(B.notes)
  end
  both(function(s) s.p:flush() end)
  same("attached reads", attached(A), attached(B), ("seed %d at the end"):format(seed))
  if os.getenv("SEEDS27") then print(seed, A.p:stats().map_size, B.p:stats().map_size) end
  both(function(s) s.p:close() end)
end

describe("the write-back layer against the plain path, over every operator", function()
  teardown(H.cleanup)
  local seeds, groups = { 1, 2, 3, 4 }, 30
  if os.getenv("SEEDS27") then -- a longer look: SEEDS27=from,to GROUPS27=n
    local a, b = os.getenv("SEEDS27"):match("(%d+),(%d+)")
    seeds = {}
    for s = tonumber(a), tonumber(b) do seeds[#seeds + 1] = s end
    groups = tonumber(os.getenv("GROUPS27") or "200")
  end
  for _, seed in ipairs(seeds) do
    it("agrees after every group (seed " .. seed .. ")", function()
      run(seed, groups)
    end)
  end
end)
