-- writepath_edges_spec.lua — 0.13's write path (core/table.c packs a keyed
-- row or merges a patch straight into the stored entry, tombstones keep a
-- deleted key's id, the replay log keeps only what a replay reads, the row
-- cache) against a plain Lua model, under random groups that commit or
-- roll back (p:rollback, an error in p:batch, a sink that raises at
-- commit, a refused change). Rows grow and shrink across msgpack's size
-- classes (strings of 0/31/32/255/256/65535+ bytes, ints at every width,
-- nested values) and keys straddle the row cache's and the long-key
-- limits. After every group: the rows, their ids, the count, in-group
-- reads, a plain sink, a consolidating sink, a CDC log (preimage "full",
-- postimage) and a join through the row cache must equal the model's; at
-- the end the state reopened, read by another process (runnel query) and
-- checked by runnel verify. Run with and without carried transactions and
-- the write-back layer, the event logs of the runs must be the same.
local runnel = require "runnel"
local H = require "helper"
local null = runnel.null

-- ---- canonical forms: equal strings for equal stored values ----

local canon
local function canon_table(v)
  local n = 0
  for _ in pairs(v) do n = n + 1 end
  local parts = {}
  if n == #v then
    for i = 1, n do parts[i] = canon(v[i]) end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  for k, x in pairs(v) do parts[#parts + 1] = tostring(k) .. "=" .. canon(x) end
  table.sort(parts)
  return "{" .. table.concat(parts, ",") .. "}"
end

canon = function(v)
  if v == nil then return "~" end
  local ty = type(v)
  if ty == "number" then
    if math.type(v) == "integer" then return "i" .. v end
    return "f" .. string.format("%.17g", v)
  end
  if ty == "string" then return ("s%d:%s"):format(#v, v) end
  if ty == "table" then return canon_table(v) end
  return tostring(v)
end

local function row_canon(cols, r)
  if not r then return "none" end
  local parts = {}
  for i, c in ipairs(cols) do parts[i] = c .. "=" .. canon(r[c]) end
  return table.concat(parts, " ")
end

-- ---- value generators: (value given, value stored) ----

local STR_LENS = { 0, 1, 5, 31, 32, 33, 60, 90, 100, 105, 110, 115, 120, 127, 128, 255, 256, 1000 }
local BIG_LENS = { 65535, 65536, 70000 }
local INTS = { 0, 1, 127, 128, 255, 256, 65535, 65536, 2147483647, 2147483648, 4294967295, 4294967296,
               -1, -32, -33, -128, -129, -32768, -32769, -2147483648, -2147483649,
               math.maxinteger, math.mininteger }

local function gen_string(rng, step, allow_big)
  local lens = (allow_big and rng(1, 40) == 1) and BIG_LENS or STR_LENS
  local len = lens[rng(1, #lens)]
  local tag = tostring(step)
  if len <= #tag then return ("x"):rep(len) end
  return tag .. ("abcdefgh"):sub(1, (step % 8) + 1):rep(len):sub(1, len - #tag)
end

local function gen_value(col, rng, step)
  if col ~= "d" and col ~= "e" and rng(1, 6) == 1 then return null, nil end
  if col == "s" then
    local s = gen_string(rng, step, true)
    if rng(1, 10) == 1 then s = s .. "é" end -- not ASCII: normalized through its UTF-8 check
    return s, s
  elseif col == "n" or col == "d" or col == "e" then
    local i = INTS[rng(1, #INTS)]
    if rng(1, 8) == 1 and i > -1e15 and i < 1e15 then return i + 0.0, i end -- an int given as a float
    return i, i
  elseif col == "f" then
    local fs = { 0.5, -2.25, 1e300, -1e-300, math.huge, -math.huge, 3 }
    local f = fs[rng(1, #fs)]
    return f, f + 0.0
  elseif col == "b" then
    local b = rng(1, 2) == 1
    return b, b
  elseif col == "by" then
    local len = ({ 0, 1, 31, 32, 255, 256, 300 })[rng(1, 7)]
    local s = ("\0\255" .. string.char(step % 256)):rep(len):sub(1, len)
    return s, s
  else -- "a", any: scalars and nested lists (maps of one key: their order is fixed)
    local k = rng(1, 5)
    local v = k == 1 and step or k == 2 and gen_string(rng, step, false) or k == 3 and { 1, { 2, step }, "z" }
              or k == 4 and { x = { step, "y" } } or 2.5
    return v, v
  end
end

-- ---- the keys: short (row cache), around the cache's 48-byte key limit,
-- and around the 480-byte inline limit past which a key is hashed ----

local KEYS = { "", "a", "a\0b", "b", "c", ("k"):rep(31), ("l"):rep(32), ("m"):rep(45), ("n"):rep(46), ("o"):rep(47),
               ("p"):rep(478), ("q"):rep(479), ("r"):rep(480), ("s"):rep(481), ("t"):rep(700) }

-- ---- the model ----

local function new_model(cols)
  return { cols = cols, rows = {}, ids = {}, next_id = 1, count = 0 }
end

local function snapshot(m)
  local rows, ids = {}, {}
  for k, v in pairs(m.rows) do rows[k] = v end
  for k, v in pairs(m.ids) do ids[k] = v end
  return { rows = rows, ids = ids, next_id = m.next_id, count = m.count }
end

local function restore(m, s)
  m.rows, m.ids, m.next_id, m.count = s.rows, s.ids, s.next_id, s.count
end

-- A full row from given values (insert, upsert): missing nullable columns
-- are null, d and e take their defaults.
local function full_row(m, k, given)
  local r = { k = k }
  for _, c in ipairs(m.cols) do
    if c ~= "k" then
      local v = given[c]
      if v == nil then r[c] = (c == "d" and 5) or (c == "e" and 9) or nil else r[c] = v end
    end
  end
  return r
end

local function patched(m, old, given, given_cols)
  local r = {}
  for _, c in ipairs(m.cols) do r[c] = old[c] end
  for _, c in ipairs(given_cols) do r[c] = given[c] end
  return r
end

-- The event of a change from old to new (nil when a no-op), applied to m.
local function model_apply(m, k, new)
  local old = m.rows[k]
  if row_canon(m.cols, old) == row_canon(m.cols, new) then return nil end
  if not m.ids[k] then m.ids[k] = m.next_id; m.next_id = m.next_id + 1 end
  m.rows[k] = new
  m.count = m.count + (old and 0 or 1) - (new and 0 or 1)
  local verb = not old and "INSERT" or not new and "DELETE" or "UPDATE"
  return { verb = verb, id = m.ids[k], k = k, row = new, old = old }
end

-- ---- recording: events pending until commit, dropped on rollback ----

local function recorder(rel, opts)
  local rec = { pending = {}, committed = {}, rollbacks = 0 }
  local sink = { consolidate = opts and opts.consolidate,
    insert = function(row, info) rec.pending[#rec.pending + 1] = { "INSERT", info.id, row } end,
    update = function(row, old, info) rec.pending[#rec.pending + 1] = { "UPDATE", info.id, row, old } end,
    delete = function(old, info) rec.pending[#rec.pending + 1] = { "DELETE", info.id, nil, old } end,
    commit = function(seq)
      rec.committed[#rec.committed + 1] = { seq = seq, events = rec.pending }
      rec.pending = {}
    end,
    rollback = function() rec.rollbacks = rec.rollbacks + 1; rec.pending = {} end }
  rel:sink(sink)
  return rec
end

local function event_canon(cols, verb, id, row, old)
  return ("%s %d | %s | %s"):format(verb, id, row_canon(cols, row), row_canon(cols, old))
end

local function group_events(cols, evs)
  local out = {}
  for i, e in ipairs(evs) do out[i] = event_canon(cols, e[1], e[2], e[3], e[4]) end
  return out
end

-- The CDC log rows the model expects for a committed group's events.
local function expected_cdc(m, start_rows, events)
  local cols = m.cols
  local order, first = {}, {}
  for _, e in ipairs(events) do
    if not first[e.k] then first[e.k] = true; order[#order + 1] = e end
  end
  local out = {}
  local function add(op, id, row, deleted)
    out[#out + 1] = ("%d %d %s %s"):format(op, id, row_canon(cols, row), table.concat(deleted or {}, ","))
  end
  for _, e in ipairs(order) do add(0, e.id, start_rows[e.k] or { k = e.k }) end
  for _, e in ipairs(events) do
    if e.verb == "INSERT" then add(2, e.id, e.row)
    elseif e.verb == "DELETE" then add(3, e.id, { k = e.k })
    else
      local delta, deleted = { k = e.k }, {}
      for _, c in ipairs(cols) do
        if canon(e.row[c]) ~= canon(e.old[c]) then
          delta[c] = e.row[c]
          if e.row[c] == nil then deleted[#deleted + 1] = c end
        end
      end
      add(1, e.id, delta, deleted)
    end
  end
  for _, e in ipairs(order) do
    if m.rows[e.k] then add(9, e.id, m.rows[e.k]) end
  end
  return out
end

local function cdc_recorder(rel, cols)
  local rec = { pending = {}, committed = {} }
  local function got(row)
    local deleted = {}
    for _, c in ipairs(cols) do if row["cdc$deleted_" .. c] then deleted[#deleted + 1] = c end end
    local plain = {}
    for _, c in ipairs(cols) do plain[c] = row[c] end
    rec.pending[#rec.pending + 1] = ("%d %d %s %s"):format(row["cdc$operation"], row["cdc$id"],
                                                           row_canon(cols, plain), table.concat(deleted, ","))
  end
  rel:sink{ insert = got,
            commit = function() rec.committed[#rec.committed + 1] = rec.pending; rec.pending = {} end,
            rollback = function() rec.pending = {} end }
  return rec
end

-- ---- one run ----

local BASE_COLS = { "k", "s", "n", "f", "b", "by", "a", "d" }

local function declare(p, with_e)
  local spec = { {"k","string"}, {"s","string", null = true}, {"n","int", null = true}, {"f","float", null = true},
                 {"b","bool", null = true}, {"by","bytes", null = true}, {"a","any", null = true},
                 {"d","int", default = 5}, key = "k" }
  if with_e then table.insert(spec, {"e","int", default = 9}) end
  local t = p:table("t", spec)
  local u = p:table("u", { {"id","int"}, {"ref","string"}, key = "id" })
  local j = u:join(t, { on = "ref", name = "j" })
  return t, u, j
end

local function check_join(m, u_model, j)
  local want, got = {}, {}
  for id, ref in pairs(u_model) do
    local r = m.rows[ref]
    if r then want[#want + 1] = id .. " " .. row_canon(m.cols, r) end
  end
  for row in j:rows() do
    local r = {}
    for _, c in ipairs(m.cols) do r[c] = row[c] end
    r.k = row.ref
    got[#got + 1] = row.id .. " " .. row_canon(m.cols, r)
  end
  table.sort(want)
  table.sort(got)
  assert.same(want, got)
end

local function check_state(m, t)
  local want, got = {}, {}
  for k, r in pairs(m.rows) do want[#want + 1] = m.ids[k] .. " " .. row_canon(m.cols, r) end
  for row, rid in t:rows() do got[#got + 1] = rid .. " " .. row_canon(m.cols, row) end
  table.sort(want)
  table.sort(got)
  assert.same(want, got)
  assert.equal(m.count, t:count())
  for k, id in pairs(m.ids) do
    if m.rows[k] then assert.equal(id, t:id_of(k)) end
  end
end

-- Runs `groups` random groups; every outcome and event is checked against
-- the model. Returns the run's transcript (events of committed groups).
local function run_groups(ctx, groups, seed)
  local p, t, u, m = ctx.p, ctx.t, ctx.u, ctx.m
  local rng_state = seed
  local function rng(lo, hi) -- a small LCG: the same sequence on every run
    rng_state = (rng_state * 6364136223846793005 + 1442695040888963407) & 0x7fffffffffffffff
    return lo + (rng_state >> 17) % (hi - lo + 1)
  end
  local transcript = ctx.transcript
  for g = 1, groups do
    local start = snapshot(m)
    local u_start = {}
    for k, v in pairs(ctx.u_model) do u_start[k] = v end
    local events = {}
    local mode = rng(1, 10) -- 1..6 commit, 7 rollback, 8 error in batch, 9 sink raises, 10 refused change
    local refused_msg
    local function change(step)
      local key = KEYS[rng(1, #KEYS)]
      local live = m.rows[key] ~= nil
      local r = rng(1, 10)
      if r == 1 then -- the join's left side
        local id = rng(1, 6)
        if ctx.u_model[id] and rng(1, 3) == 1 then u:delete{ id = id }; ctx.u_model[id] = nil
        else u:upsert{ id = id, ref = key }; ctx.u_model[id] = key end
        return
      end
      if not live and r <= 8 or live and r == 2 then -- insert or upsert of a full row
        local given, stored = { k = key }, {}
        for _, c in ipairs(m.cols) do
          if c ~= "k" and rng(1, 4) > 1 then given[c], stored[c] = gen_value(c, rng, step) end
        end
        if live then t:upsert(given) else t:insert(given) end
        events[#events + 1] = model_apply(m, key, full_row(m, key, stored))
      elseif live and r <= 8 then -- a patch of some columns
        local given, stored, names = { k = key }, {}, {}
        local all = rng(1, 8) == 1 -- every column given: nothing of the stored row is read
        for _, c in ipairs(m.cols) do
          if c ~= "k" and (all or rng(1, 3) == 1) then
            given[c], stored[c] = gen_value(c, rng, step)
            names[#names + 1] = c
          end
        end
        t:update(given)
        events[#events + 1] = model_apply(m, key, patched(m, m.rows[key], stored, names))
      elseif live then
        t:delete{ k = key }
        events[#events + 1] = model_apply(m, key, nil)
      else
        t:insert{ k = key, s = "again" } -- r 9, 10 on an absent key: insert
        events[#events + 1] = model_apply(m, key, full_row(m, key, { s = "again" }))
      end
      local got = t:get(key) -- the group's own writes, read inside it
      assert.equal(row_canon(m.cols, m.rows[key]), row_canon(m.cols, got))
    end
    local function body()
      for step = 1, rng(1, 8) do change(g * 100 + step) end
      if mode == 10 then -- refused: a duplicate insert, or an update or delete of an absent key
        local live, absent
        for _, k in ipairs(KEYS) do
          if m.rows[k] then live = live or k else absent = absent or k end
        end
        if live and (not absent or rng(1, 2) == 1) then
          refused_msg = ("t: insert: a row with key (k = %q) already exists"):format(live)
          t:insert{ k = live, s = "dup" }
        elseif rng(1, 2) == 1 then
          refused_msg = ("t: update: no row with key (k = %q)"):format(absent)
          t:update{ k = absent, n = 1 }
        else
          refused_msg = ("t: delete: no row with key (k = %q)"):format(absent)
          t:delete{ k = absent }
        end
      end
    end
    local committed
    if mode == 8 then
      local ok, err = pcall(p.batch, p, function() body(); error("batch says no") end)
      assert.is_false(ok)
      assert.matches("batch says no", tostring(err))
      committed = false
    else
      p:begin()
      local ok, err = pcall(body)
      if mode == 10 then
        assert.is_false(ok)
        local msg = tostring(err)
        msg = msg:gsub("^[^:]*:%d+: ", "")
        if #refused_msg < 200 then assert.equal(refused_msg, msg)
        else -- a long key is cut short, and says so
          assert.equal(refused_msg:sub(1, 60), msg:sub(1, 60))
          assert.matches('%.%.%."%)', msg)
        end
        committed = false
      else
        assert(ok, err)
        if mode == 7 then
          p:rollback()
          committed = false
        else
          ctx.fail_sink = mode == 9
          local cok, cerr = pcall(p.commit, p)
          ctx.fail_sink = false
          local any = #events > 0
          -- the raising sink hears t's changes only: a group without any commits
          committed = cok
          if mode == 9 then
            assert.equal(not any, cok, tostring(cerr))
            if not cok then assert.matches("sink says no", tostring(cerr)) end
          else
            assert(cok, cerr)
          end
        end
      end
    end
    if committed then
      if #events > 0 or true then
        transcript[#transcript + 1] = { start = start.rows, events = events }
      end
    else
      restore(m, start)
      ctx.u_model = u_start
    end
    -- a read outside a group commits the carried LMDB transaction: read
    -- now and then, so that failing groups meet carried ones
    if g == groups or rng(1, 6) == 1 then
      check_state(m, t)
      check_join(m, ctx.u_model, ctx.j)
    end
  end
end

-- Compares what the sinks recorded with the transcript of committed groups.
local function check_sinks(ctx)
  local m = ctx.m
  local plain, cons, cdc = ctx.plain, ctx.cons, ctx.cdc
  local want_plain, got_plain, want_cons, got_cons, want_cdc, got_cdc = {}, {}, {}, {}, {}, {}
  -- groups with no t change may reach no sink: compare the non-empty ones
  for _, grp in ipairs(ctx.transcript) do
    if #grp.events > 0 then
      local evs, net = {}, {}
      for _, e in ipairs(grp.events) do
        evs[#evs + 1] = event_canon(m.cols, e.verb, e.id, e.row, e.old)
        net[e.k] = { id = e.id, row = e.row }
      end
      want_plain[#want_plain + 1] = table.concat(evs, "\n")
      local nets = {}
      for k, n in pairs(net) do
        local before = grp.start[k]
        if row_canon(m.cols, before) ~= row_canon(m.cols, n.row) then
          local verb = not before and "INSERT" or not n.row and "DELETE" or "UPDATE"
          nets[#nets + 1] = event_canon(m.cols, verb, n.id, n.row, before)
        end
      end
      table.sort(nets)
      if #nets > 0 then want_cons[#want_cons + 1] = table.concat(nets, "\n") end
      want_cdc[#want_cdc + 1] = table.concat(grp.cdc, "\n")
    end
  end
  for _, g in ipairs(plain.committed) do
    if #g.events > 0 then got_plain[#got_plain + 1] = table.concat(group_events(m.cols, g.events), "\n") end
  end
  for _, g in ipairs(cons.committed) do
    if #g.events > 0 then
      local evs = group_events(m.cols, g.events)
      table.sort(evs)
      got_cons[#got_cons + 1] = table.concat(evs, "\n")
    end
  end
  for _, g in ipairs(cdc.committed) do
    if #g > 0 then got_cdc[#got_cdc + 1] = table.concat(g, "\n") end
  end
  assert.same(want_plain, got_plain)
  assert.same(want_cons, got_cons)
  assert.same(want_cdc, got_cdc)
  return got_plain
end

local function start(p, with_e)
  local ctx = { p = p, transcript = {}, u_model = {} }
  ctx.t, ctx.u, ctx.j = declare(p, with_e)
  local cols = { table.unpack(BASE_COLS) }
  if with_e then cols[#cols + 1] = "e" end
  ctx.plain = recorder(ctx.t)
  ctx.cons = recorder(ctx.t, { consolidate = true })
  ctx.cdc = cdc_recorder(ctx.t:cdc{ preimage = "full", postimage = true }, cols)
  ctx.t:sink(function() if ctx.fail_sink then error("sink says no") end end)
  return ctx, cols
end

-- The CDC rows each committed group should give, worked out once the
-- group's end state is known (its postimages): kept in the transcript.
local function with_cdc(ctx)
  -- replay the transcript on a scratch model to know each group's end rows
  local m = new_model(ctx.m.cols)
  for _, grp in ipairs(ctx.transcript) do
    m.rows = {}
    for k, r in pairs(grp.start) do m.rows[k] = r end
    for _, e in ipairs(grp.events) do m.rows[e.k] = e.row end
    grp.cdc = expected_cdc(m, grp.start, grp.events)
  end
end

local function query_lines(dir, cols)
  local out, err, code = H.sh(("%s query %s t --format ndjson"):format(H.runnel_bin, dir))
  assert.equal(0, code, err)
  local n = 0
  for line in out:gmatch("[^\n]+") do
    n = n + 1
    for _, c in ipairs{ "d" } do assert.matches('"' .. c .. '":', line) end
  end
  return n
end

describe("the 0.13 write path at its edges", function()
  after_each(H.cleanup)

  local transcripts = {}
  for _, cfg in ipairs{ { name = "sync", sync = true },
                        { name = "carried", sync = false, carry = { groups = 4 } },
                        { name = "carried, write-back", sync = false, carry = { groups = 4 }, write_back = true },
                        -- the map fills: groups are replayed into a grown one (GROUP-5)
                        { name = "carried, map filling", sync = false, carry = { groups = 4 }, map_size = 256 * 1024 },
                        { name = "writemap", sync = true, writemap = true } } do
    it("keeps rows, ids, reads, sinks, CDC and a join equal to a model (" .. cfg.name .. ")", function()
      local dir = H.tmpdir()
      local function open()
        return runnel.open{ path = dir .. "/state", notes = false, sync = cfg.sync, carry = cfg.carry, write_back = cfg.write_back,
                            map_size = cfg.map_size, writemap = cfg.writemap }
      end
      local p = open()
      local ctx, cols = start(p, false)
      ctx.m = new_model(cols)
      run_groups(ctx, 120, 12345)
      with_cdc(ctx)
      local got1 = check_sinks(ctx)
      p:close()

      -- reopen with a column added (a default): the stored rows read with
      -- it, and patches of every size go on from there
      p = open()
      local m = ctx.m
      local ctx2, cols2 = start(p, true)
      ctx2.m = new_model(cols2)
      for k, r in pairs(m.rows) do
        local r2 = {}
        for c, v in pairs(r) do r2[c] = v end
        r2.e = 9
        ctx2.m.rows[k] = r2
      end
      ctx2.m.ids, ctx2.m.next_id, ctx2.m.count = m.ids, m.next_id, m.count
      ctx2.u_model = ctx.u_model
      check_state(ctx2.m, ctx2.t)
      check_join(ctx2.m, ctx2.u_model, ctx2.j)
      run_groups(ctx2, 60, 777)
      with_cdc(ctx2)
      local got2 = check_sinks(ctx2)
      if cfg.map_size then assert.is_true(p:stats().map_size > cfg.map_size) end
      p:close()

      -- another process reads the committed state; verify finds it whole
      assert.equal(ctx2.m.count, query_lines(dir .. "/state", cols2))
      local out, err, code = H.sh(("%s verify %s/state"):format(H.runnel_bin, dir))
      assert.equal(0, code, out .. err)
      p = open()
      local t = declare(p, true)
      check_state(ctx2.m, t)
      p:close()

      -- what the sinks received, the same on every path
      local all = { table.concat(got1, "\n"), table.concat(got2, "\n") }
      transcripts[#transcripts + 1] = all
      if #transcripts > 1 then assert.same(transcripts[1], all) end
    end)
  end
end)

-- A keyless table holds equal rows apart by id: delete(row) and
-- update(old, new) take the equal row with the smallest id (ROWID-3), and
-- a rolled-back group or a failing one among carried groups gives back
-- exactly what it took.
describe("a keyless table's write path at its edges", function()
  after_each(H.cleanup)

  for _, cfg in ipairs{ { name = "sync", sync = true },
                        { name = "carried", sync = false, carry = { groups = 5 } },
                        { name = "carried, write-back", sync = false, carry = { groups = 5 }, write_back = true } } do
    it("matches a model of rows by id under duplicates and rollbacks (" .. cfg.name .. ")", function()
      local dir = H.tmpdir()
      local p = runnel.open{ path = dir, notes = false, sync = cfg.sync, carry = cfg.carry, write_back = cfg.write_back }
      local t = p:table("t", { {"v","string"}, {"n","int", null = true} })
      local rec = recorder(t)
      local fail = false
      t:sink(function() if fail then error("sink says no") end end)
      local rows, next_id = {}, 1 -- rows[id] = { v, n }
      local want_events = {}
      local seed = 4242
      local function rng(lo, hi)
        seed = (seed * 6364136223846793005 + 1442695040888963407) & 0x7fffffffffffffff
        return lo + (seed >> 17) % (hi - lo + 1)
      end
      local VALS = { "", "a", ("b"):rep(32), ("c"):rep(120), ("d"):rep(300) }
      local function gen()
        local n = rng(1, 4) == 1 and nil or INTS[rng(1, 6)]
        return { v = VALS[rng(1, #VALS)], n = n }
      end
      local cols = { "v", "n" }
      local function same(a, b) return row_canon(cols, a) == row_canon(cols, b) end
      local function smallest(r)
        local best
        for id, x in pairs(rows) do if same(x, r) and (not best or id < best) then best = id end end
        return best
      end
      local function given(r) return { v = r.v, n = r.n == nil and null or r.n } end
      for g = 1, 150 do
        local saved_rows, saved_next = {}, next_id
        for id, r in pairs(rows) do saved_rows[id] = r end
        local events = {}
        local mode = rng(1, 8) -- 1..5 commit, 6 rollback, 7 sink raises, 8 refused change
        local ok, err = pcall(function()
          p:begin()
          for _ = 1, rng(1, 6) do
            local op = rng(1, 3)
            local pick
            if op > 1 then -- an existing row's values, or sometimes a fresh one
              local ids = {}
              for id in pairs(rows) do ids[#ids + 1] = id end
              table.sort(ids)
              if #ids > 0 then pick = rows[ids[rng(1, #ids)]] end
            end
            if op == 1 or not pick then
              local r = gen()
              t:insert(given(r))
              rows[next_id] = r
              events[#events + 1] = event_canon(cols, "INSERT", next_id, r, nil)
              next_id = next_id + 1
            elseif op == 2 then
              local id = smallest(pick)
              t:delete(given(pick))
              rows[id] = nil
              events[#events + 1] = event_canon(cols, "DELETE", id, nil, pick)
            else
              local id, r = smallest(pick), gen()
              t:update(given(pick), given(r))
              if not same(pick, r) then
                rows[id] = r
                events[#events + 1] = event_canon(cols, "UPDATE", id, r, pick)
              end
            end
          end
          if mode == 8 then t:delete{ v = "never stored" } end
          if mode == 6 then p:rollback() return end
          fail = mode == 7
          p:commit()
        end)
        fail = false
        local committed = ok and mode <= 5 or (mode == 7 and ok)
        if mode == 8 then
          assert.is_false(ok)
          assert.equal("t: delete: no stored row equals the given row", (tostring(err):gsub("^[^:]*:%d+: ", "")))
        elseif mode == 7 then
          assert.equal(#events == 0, ok)
        else
          assert(ok, err)
        end
        if committed then
          if #events > 0 then want_events[#want_events + 1] = table.concat(events, "\n") end
        else
          rows, next_id = saved_rows, saved_next
        end
        if g == 150 or rng(1, 6) == 1 then
          local want, got = {}, {}
          for id, r in pairs(rows) do want[#want + 1] = id .. " " .. row_canon(cols, r) end
          for row, id in t:rows() do got[#got + 1] = id .. " " .. row_canon(cols, row) end
          table.sort(want)
          table.sort(got)
          assert.same(want, got)
          assert.equal(#want, t:count())
        end
      end
      local got_events = {}
      for _, grp in ipairs(rec.committed) do
        if #grp.events > 0 then got_events[#got_events + 1] = table.concat(group_events(cols, grp.events), "\n") end
      end
      assert.same(want_events, got_events)
      p:close()
      local out, err, code = H.sh(("%s verify %s"):format(H.runnel_bin, dir))
      assert.equal(0, code, out .. err)
      p = runnel.open{ path = dir, notes = false }
      t = p:table("t", { {"v","string"}, {"n","int", null = true} })
      local n = 0
      for row, id in t:rows() do n = n + 1; assert.is_true(same(rows[id], row)) end
      local want_n = 0
      for _ in pairs(rows) do want_n = want_n + 1 end
      assert.equal(want_n, n)
      assert.equal(n, t:count())
      p:close()
    end)
  end
end)

describe("a key written many times in one group", function()
  after_each(H.cleanup)

  -- rows of 100 to 160 bytes: in and out of the row cache's 128-byte rows;
  -- the join reads t's row by key through the cache after every write
  it("reads its last write in the group and its committed row after a rollback", function()
    for _, wb in ipairs{ false, true } do
      local p = runnel.open{ sync = false, write_back = wb, notes = false }
      local t = p:table("t", { {"k","int"}, {"s","string"}, {"n","int", null = true}, key = "k" })
      local u = p:table("u", { {"id","int"}, {"ref","int"}, key = "id" })
      local j = u:join(t, { on = "ref" })
      local events = {}
      j:sink{ consolidate = true, -- one net change per row per group
              insert = function(row) events[#events + 1] = "INSERT " .. #row.s end,
              update = function(row) events[#events + 1] = "UPDATE " .. #row.s end,
              delete = function() events[#events + 1] = "DELETE" end }
      t:insert{ k = 1, s = ("a"):rep(110) }
      u:insert{ id = 1, ref = 1 }
      H.clear(events)
      for round = 1, 3 do
        p:begin()
        for i = 1, 300 do
          local len = 90 + (i * 7) % 70
          if i % 2 == 0 then t:update{ k = 1, s = ("b"):rep(len) } else t:upsert{ k = 1, s = ("c"):rep(len), n = i } end
          if i % 50 == 0 then t:delete{ k = 1 }; assert.is_nil(j:get(1)); t:insert{ k = 1, s = "back" } end
          assert.equal(t:get(1).s, j:get(1).s)
        end
        if round < 3 then p:rollback() else
          t:update{ k = 1, s = ("d"):rep(127 - 8) }
          p:commit()
        end
        if round < 3 then
          assert.same({ k = 1, s = ("a"):rep(110) }, t:get(1))
          assert.same({ id = 1, ref = 1, k = 1, s = ("a"):rep(110) }, j:get(1))
          assert.same({}, events)
          t:update{ k = 1, n = round } -- a patch of the committed row, not of a cached rolled-back one
          assert.same({ k = 1, s = ("a"):rep(110), n = round }, t:get(1))
          assert.same({ "UPDATE 110" }, events)
          t:update{ k = 1, n = runnel.null }
          H.clear(events)
        end
      end
      assert.same({ k = 1, s = ("d"):rep(119) }, t:get(1))
      assert.same({ "UPDATE 119" }, events) -- the group's net change to the join: one
      assert.equal(1, t:id_of(1))
      p:close()
    end
  end)
end)

describe("another process reading the state", function()
  after_each(H.cleanup)

  local function query(dir)
    local out, err, code = H.sh(("%s query %s t --format ndjson"):format(H.runnel_bin, dir))
    assert.equal(0, code, err)
    return out
  end

  it("never sees an open or a rolled-back group, only committed ones", function()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", { {"k","int"}, {"s","string", null = true}, {"n","int", null = true}, key = "k" })
    local fail = false
    t:sink(function() if fail then error("sink says no") end end)
    for k = 1, 5 do t:insert{ k = k, s = ("s"):rep(k * 20), n = k } end
    local committed = query(dir)
    local att = runnel.attach(dir, "t")
    -- an open group growing, shrinking, deleting and re-inserting rows
    p:begin()
    t:update{ k = 1, s = ("x"):rep(70000) }
    t:update{ k = 2, s = "" }
    t:delete{ k = 3 }
    t:insert{ k = 3, n = -129 }
    t:insert{ k = 6, s = "new" }
    assert.equal(committed, query(dir))
    assert.equal(5, att:count())
    assert.same({ k = 3, s = ("s"):rep(60), n = 3 }, att:get(3))
    fail = true
    assert.matches("sink says no", H.error_of(p.commit, p))
    fail = false
    assert.equal(committed, query(dir))
    assert.same({ k = 1, s = ("s"):rep(20), n = 1 }, t:get(1))
    assert.is_nil(t:get(6))
    assert.equal(5, t:count())
    -- a rolled-back group uses up no id: 6 gets the next one
    t:insert{ k = 6, s = "now" }
    assert.equal(6, t:id_of(6))
    assert.matches('"s":"now"', query(dir))
    assert.same({ k = 6, s = "now" }, att:get(6))
    p:close()
    local out, err, code = H.sh(("%s verify %s"):format(H.runnel_bin, dir))
    assert.equal(0, code, out .. err)
  end)
end)

describe("an error naming a key", function()
  it("shows a string key's every byte: NULs, quotes and control bytes escaped", function()
    local p = runnel.open()
    local t = p:table("t", { {"k","string"}, {"n","int", null = true}, key = "k" })
    t:insert{ k = "a" }
    t:insert{ k = "a\0b" }
    assert.equal('t: update: no row with key (k = "a\\0c")', H.error_of(t.update, t, { k = "a\0c", n = 1 }))
    assert.equal('t: insert: a row with key (k = "a\\0b") already exists', H.error_of(t.insert, t, { k = "a\0b" }))
    assert.equal('t: delete: no row with key (k = "say \\"hi\\"\\n\\t\\\\ \\x01 é")',
                 H.error_of(t.delete, t, { k = 'say "hi"\n\t\\ \1 é' }))
    local c = p:table("c", { {"a","string"}, {"b","int"}, key = { "a", "b" } })
    assert.equal('c: delete: no row with key (a = "\\0", b = -3)', H.error_of(c.delete, c, { a = "\0", b = -3 }))
    local f = p:table("f", { {"x","float"}, {"by","bytes"}, key = { "x", "by" } })
    assert.equal('f: delete: no row with key (x = 1e+300, by = "")', H.error_of(f.delete, f, { x = 1e300, by = "" }))
    assert.equal('f: delete: no row with key (x = 0.1, by = "\\0\\xff")', H.error_of(f.delete, f, { x = 0.1, by = "\0\255" }))
    p:close()
  end)
end)

describe("a table wider than a fixarray", function()
  -- 20 columns: rows start with an array16 header, which the patch's
  -- span walk and the packer's header must get right
  it("patches, upserts and deletes rows as a model does, rollbacks included", function()
    local p = runnel.open{ sync = false, notes = false }
    local spec, cols = { {"k","int"}, key = "k" }, { "k" }
    for i = 1, 19 do
      local name = "c" .. i
      spec[#spec + 1] = { name, i % 2 == 0 and "string" or "int", null = true }
      cols[#cols + 1] = name
    end
    local t = p:table("w", spec)
    local rec = recorder(t)
    local rows, want = {}, {}
    local seed = 99
    local function rng(lo, hi)
      seed = (seed * 6364136223846793005 + 1442695040888963407) & 0x7fffffffffffffff
      return lo + (seed >> 17) % (hi - lo + 1)
    end
    local function value(i, step)
      if rng(1, 5) == 1 then return null, nil end
      if i % 2 == 0 then local s = gen_string(rng, step, false); return s, s end
      local n = INTS[rng(1, #INTS)]
      return n, n
    end
    for g = 1, 80 do
      local saved = {}
      for k, r in pairs(rows) do saved[k] = r end
      local events = {}
      p:begin()
      for step = 1, rng(1, 5) do
        local k = rng(1, 6)
        local old = rows[k]
        local given, new = { k = k }, { k = k }
        local id = t:id_of(k)
        if old and rng(1, 4) == 1 then
          t:delete{ k = k }
          new = nil
        elseif old then
          for c, v in pairs(old) do new[c] = v end
          for i = 1, 19 do
            if rng(1, 4) == 1 then given["c" .. i], new["c" .. i] = value(i, g * 10 + step) end
          end
          t:update(given)
        else
          for i = 1, 19 do given["c" .. i], new["c" .. i] = value(i, g * 10 + step) end
          t:insert(given)
        end
        if row_canon(cols, old) ~= row_canon(cols, new) then
          events[#events + 1] = event_canon(cols, not old and "INSERT" or not new and "DELETE" or "UPDATE",
                                            id or t:id_of(k), new, old)
        end
        rows[k] = new
        assert.equal(row_canon(cols, new), row_canon(cols, t:get(k)))
      end
      if rng(1, 4) == 1 then
        p:rollback()
        rows = saved
      else
        p:commit()
        if #events > 0 then want[#want + 1] = table.concat(events, "\n") end
      end
    end
    local got = {}
    for _, grp in ipairs(rec.committed) do
      if #grp.events > 0 then got[#got + 1] = table.concat(group_events(cols, grp.events), "\n") end
    end
    assert.same(want, got)
    local n = 0
    for row in t:rows() do n = n + 1; assert.equal(row_canon(cols, rows[row.k]), row_canon(cols, row)) end
    local want_n = 0
    for _ in pairs(rows) do want_n = want_n + 1 end
    assert.equal(want_n, n)
    p:close()
  end)
end)
