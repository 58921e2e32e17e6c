-- derived_edges_spec.lua — aggregates, tops, an index, a distinct, a filter
-- and CDC streams of them under random groups that commit, roll back, fail in
-- a sink or in a change, with carried transactions, write_back, writemap, a
-- map that must grow and reopens: after every group each relation equals a
-- recomputation in plain Lua, each CDC stream replayed equals its relation,
-- an attached reader sees only committed groups, and every configuration
-- gives the same events as the plain path.
local runnel = require "runnel"
local H = require "helper"

local NULL = runnel.null

-- A value as text that tells ints from floats and keeps every digit.
local function val(v)
  if v == nil or v == NULL then return "-" end
  if math.type(v) == "float" then
    if v ~= v then return "nan" end
    if v == 0 and 1 / v < 0 then return "f-0" end
    return "f" .. ("%.17g"):format(v)
  end
  if math.type(v) == "integer" then return "i" .. v end
  return tostring(v)
end

local function line(row, cols)
  local parts = {}
  for i, c in ipairs(cols) do parts[i] = c .. "=" .. val(row[c]) end
  return table.concat(parts, " ")
end

local function sorted_lines(rows, cols)
  local out = {}
  for _, r in ipairs(rows) do out[#out + 1] = line(r, cols) end
  table.sort(out)
  return out
end

local function rows_of(...)
  local out = {}
  for r in ... do out[#out + 1] = r end
  return out
end

local GKEY = function(g) return g == nil and "\0null" or g end

local AGG_COLS = { "g", "n", "k", "s", "sx", "mn", "mx", "av", "mnx" }
local ALL_COLS = { "n", "s" }
local TOP_COLS = { "id", "g", "v", "x", "rank" }
local BIG_COLS = { "g", "n", "hi" }
local MP_COLS = { "b", "n", "sx" }

-- ---- the model: every derived relation worked out from t's rows ----

local function model_agg(rows)
  local groups = {}
  for _, r in ipairs(rows) do
    local key = GKEY(r.g)
    local e = groups[key] or { g = r.g, n = 0, k = 0, nv = 0 }
    groups[key] = e
    e.n = e.n + 1
    if r.x ~= nil then
      e.k = e.k + 1
      e.sx = (e.sx or 0.0) + r.x
      e.mx = (e.mx == nil or r.x > e.mx) and r.x or e.mx
      e.mnx = (e.mnx == nil or r.x < e.mnx) and r.x or e.mnx
    end
    if r.v ~= nil then
      e.nv = e.nv + 1
      e.s = (e.s or 0) + r.v
      e.mn = (e.mn == nil or r.v < e.mn) and r.v or e.mn
    end
  end
  local out = {}
  for _, e in pairs(groups) do
    if e.nv > 0 then e.av = e.s / e.nv end
    out[#out + 1] = e
  end
  return out
end

local function model_all(rows)
  if #rows == 0 then return {} end
  local e = { n = #rows }
  for _, r in ipairs(rows) do if r.v ~= nil then e.s = (e.s or 0) + r.v end end
  return { e }
end

-- Rows in order: by the values (nulls after every value), then by row id.
local function order_by(rows, col, desc, ids)
  table.sort(rows, function(a, b)
    local x, y = a[col], b[col]
    if x ~= y then
      if x == nil then return false end
      if y == nil then return true end
      if desc then return x > y end
      return x < y
    end
    return ids[a.id] < ids[b.id]
  end)
  return rows
end

local function model_top(rows, ids, n, by_g, col, desc)
  local groups = {}
  for _, r in ipairs(rows) do
    local key = by_g and GKEY(r.g) or ""
    groups[key] = groups[key] or {}
    table.insert(groups[key], r)
  end
  local out = {}
  for _, list in pairs(groups) do
    order_by(list, col, desc, ids)
    for i = 1, math.min(n, #list) do
      local r = list[i]
      out[#out + 1] = { id = r.id, g = r.g, v = r.v, x = r.x, rank = i }
    end
  end
  return out
end

local function model_big(rows)
  local groups = {}
  for _, r in ipairs(rows) do
    if (r.v or 0) > 0 then
      local key = GKEY(r.g)
      local e = groups[key] or { g = r.g, n = 0 }
      groups[key] = e
      e.n = e.n + 1
      e.hi = math.max(e.hi or r.v, r.v)
    end
  end
  local out = {}
  for _, e in pairs(groups) do out[#out + 1] = e end
  return out
end

local function model_mp(rows)
  local groups, out = {}, {}
  for _, r in ipairs(rows) do
    local b = (r.v or 0) % 3
    local e = groups[b] or { b = b, n = 0 }
    groups[b] = e
    e.n = e.n + 1
    if r.x ~= nil then e.sx = (e.sx or 0.0) + r.x end
  end
  for _, e in pairs(groups) do out[#out + 1] = e end
  return out
end

local function model_distinct(rows)
  local seen, out = {}, {}
  for _, r in ipairs(rows) do
    if not seen[GKEY(r.g)] then seen[GKEY(r.g)] = true; out[#out + 1] = { g = r.g } end
  end
  return out
end

-- ---- one run of the random groups under one configuration ----

local GROUPS = 160

-- Declares the pipeline's relations on p and hooks the recorders of run.
local function declare(p, run)
  local t = p:table("t", { {"id","int"}, {"g","string", null = true}, {"v","int", null = true},
                           {"x","float", null = true}, key = "id" })
  local blob = p:table("blob", { {"k","int"}, {"pad","string"}, key = "k" })
  local r = { t = t, blob = blob }
  r.agg = t:aggregate{ by = "g", n = runnel.count(), k = runnel.count("x"), s = runnel.sum("v"), sx = runnel.sum("x"),
                       mn = runnel.min("v"), mx = runnel.max("x"), av = runnel.avg("v"), mnx = runnel.min("x"),
                       name = "agg" }
  r.all = t:aggregate{ n = runnel.count(), s = runnel.sum("v"), name = "all" }
  r.tp = t:top{ n = 2, by = "g", order = { {"v", "desc"} }, name = "tp" }
  r.tp1 = t:top{ n = 1, order = { "x", "asc" }, name = "tp1" }
  r.ix = t:index{ "x", "desc", name = "ix" }
  r.ds = t:select({ "g" }, "gs"):distinct("ds")
  r.big = t:filter(function(row) return (row.v or 0) > 0 end, "big"):aggregate{ by = "g", n = runnel.count(),
                                                                                 hi = runnel.max("v"), name = "bigagg" }
  r.mp = t:map(function(row) return { id = row.id, b = (row.v or 0) % 3, x = row.x } end,
               { {"id","int"}, {"b","int"}, {"x","float", null = true}, key = "id" }, "mp")
           :aggregate{ by = "b", n = runnel.count(), sx = runnel.sum("x"), name = "mpagg" }
  local function recorder(name, rel, cols)
    rel:sink{
      insert = function(row, info) run.pending[#run.pending + 1] = ("%s I %d %d %s"):format(name, info.seq, info.id, line(row, cols)) end,
      update = function(row, old, info)
        if line(row, cols) == line(old, cols) then run.noops[#run.noops + 1] = name .. " " .. line(row, cols) end
        run.pending[#run.pending + 1] = ("%s U %d %d %s <- %s"):format(name, info.seq, info.id, line(row, cols), line(old, cols))
      end,
      delete = function(old, info) run.pending[#run.pending + 1] = ("%s D %d %d %s"):format(name, info.seq, info.id, line(old, cols)) end,
      rollback = function() run.told = run.told + 1 end,
    }
  end
  recorder("agg", r.agg, AGG_COLS)
  recorder("all", r.all, ALL_COLS)
  recorder("tp", r.tp, TOP_COLS)
  recorder("tp1", r.tp1, TOP_COLS)
  recorder("ds", r.ds, { "g" })
  recorder("big", r.big, BIG_COLS)
  recorder("mp", r.mp, MP_COLS)
  -- CDC: the log of agg, debezium of tp and flink of bigagg, buffered per group
  r.agg:cdc{ preimage = "full", postimage = true, name = "agg_cdc" }:sink(function(_, row)
    run.cdc_pending[#run.cdc_pending + 1] = { "log", row }
  end)
  r.tp:cdc{ format = "debezium", name = "tp_cdc" }:sink(function(_, row)
    run.cdc_pending[#run.cdc_pending + 1] = { "dbz", row }
  end)
  r.big:cdc{ format = "flink", name = "big_cdc" }:sink(function(_, row)
    run.cdc_pending[#run.cdc_pending + 1] = { "flink", row }
  end)
  -- the sink that fails a group when asked, and reads the state meanwhile
  r.agg:sink(function()
    if run.att then run.peeks[#run.peeks + 1] = table.concat(sorted_lines(rows_of(run.att:rows()), AGG_COLS), "\n") end
    run.agg_called = true
    if run.query_now then -- another process reads the state while this group is open
      run.query_now = false
      local out = H.sh(("%s query '%s' agg --format ndjson"):format(H.runnel_bin, run.path))
      run.queried = {}
      for l in out:gmatch("[^\n]+") do run.queried[#run.queried + 1] = l end
    end
    if run.boom then error("sink says no") end
  end)
  return r
end

-- Applies the group's CDC events to the replays (they hold committed groups).
local function replay_cdc(run, events)
  for _, ev in ipairs(events) do
    local kind, row = ev[1], ev[2]
    if kind == "log" then
      local op, id = row["cdc$operation"], row["cdc$id"]
      if op == 2 then
        assert.is_nil(run.log_replay[id], "log insert of a row it holds")
        local r = {}
        for _, c in ipairs(AGG_COLS) do r[c] = row[c] end
        run.log_replay[id] = r
      elseif op == 1 then
        local r = assert(run.log_replay[id], "log update of a row it does not hold")
        for _, c in ipairs(AGG_COLS) do
          if row[c] ~= nil then r[c] = row[c] end
          if row["cdc$deleted_" .. c] then r[c] = nil end
        end
      elseif op == 3 then
        assert.is_not_nil(run.log_replay[id], "log delete of a row it does not hold")
        run.log_replay[id] = nil
      elseif op == 9 then
        run.posts[#run.posts + 1] = { id = id, row = row }
      end
    elseif kind == "dbz" then
      local id, before, after = row.source.id, row.before, row.after
      if row.op == "c" then assert.is_nil(run.dbz_replay[id]) else
        assert.equal(line(run.dbz_replay[id] or {}, TOP_COLS), line(before, TOP_COLS))
      end
      run.dbz_replay[id] = after
    else
      local key, kind2 = GKEY(row.g), row.rowkind
      if kind2 == "+I" then assert.is_nil(run.flink_replay[key]) end
      if kind2 == "-U" or kind2 == "-D" then
        assert.equal(line(run.flink_replay[key] or {}, BIG_COLS), line(row, BIG_COLS))
        run.flink_replay[key] = nil
      end
      if kind2 == "+I" or kind2 == "+U" then run.flink_replay[key] = row end
    end
  end
end

local function check(run, r, model_rows)
  local ids = {}
  for _, row in ipairs(model_rows) do ids[row.id] = r.t:id_of(row.id) end
  assert.same(sorted_lines(model_rows, { "id", "g", "v", "x" }), sorted_lines(rows_of(r.t:rows()), { "id", "g", "v", "x" }))
  local want_agg = sorted_lines(model_agg(model_rows), AGG_COLS)
  assert.same(want_agg, sorted_lines(rows_of(r.agg:rows()), AGG_COLS))
  assert.same(sorted_lines(model_all(model_rows), ALL_COLS), sorted_lines(rows_of(r.all:rows()), ALL_COLS))
  assert.same(sorted_lines(model_top(model_rows, ids, 2, true, "v", true), TOP_COLS), sorted_lines(rows_of(r.tp:rows()), TOP_COLS))
  assert.same(sorted_lines(model_top(model_rows, ids, 1, false, "x", false), TOP_COLS), sorted_lines(rows_of(r.tp1:rows()), TOP_COLS))
  assert.same(sorted_lines(model_distinct(model_rows), { "g" }), sorted_lines(rows_of(r.ds:rows()), { "g" }))
  assert.same(sorted_lines(model_big(model_rows), BIG_COLS), sorted_lines(rows_of(r.big:rows()), BIG_COLS))
  assert.same(sorted_lines(model_mp(model_rows), MP_COLS), sorted_lines(rows_of(r.mp:rows()), MP_COLS))
  for _, e in ipairs(model_mp(model_rows)) do assert.equal(line(e, MP_COLS), line(r.mp:get(e.b), MP_COLS)) end
  -- the index: its rows in order, ranks and counts between bounds
  local ordered = order_by({ table.unpack(model_rows) }, "x", true, ids)
  local want_ix, got_ix = {}, {}
  for i, row in ipairs(ordered) do want_ix[i] = row.id end
  for row in r.ix:range{} do got_ix[#got_ix + 1] = row.id end
  assert.same(want_ix, got_ix)
  local by_id = {}
  for row in r.ix:rows() do by_id[#by_id + 1] = row.id end -- rows() goes by row id
  table.sort(by_id)
  table.sort(got_ix)
  assert.same(got_ix, by_id)
  local window = {}
  for row in r.ix:range{ offset = 1, limit = 2 } do window[#window + 1] = row.id end
  assert.same({ want_ix[2], want_ix[3] }, window)
  for _, probe in ipairs{ 1.5, 0.0, -1.0, 3, -1, 0 } do -- ints on a float column too
    local before, within = 0, 0
    for _, row in ipairs(model_rows) do
      if row.x ~= nil and row.x > probe then before = before + 1 end
      if row.x ~= nil and row.x <= 1.5 and row.x >= probe then within = within + 1 end
    end
    assert.equal(before + 1, r.ix:rank(probe))
    assert.equal(within, r.ix:count{ from = 1.5, to = probe })
  end
  -- the CDC replays equal their relations, by row id
  local by_id = {}
  for row, id in r.agg:rows() do by_id[id] = line(row, AGG_COLS) end
  local replayed = {}
  for id, row in pairs(run.log_replay) do replayed[id] = line(row, AGG_COLS) end
  assert.same(by_id, replayed)
  for _, post in ipairs(run.posts) do assert.equal(by_id[post.id], line(post.row, AGG_COLS)) end
  by_id, replayed = {}, {}
  for row, id in r.tp:rows() do by_id[id] = line(row, TOP_COLS) end
  for id, row in pairs(run.dbz_replay) do replayed[id] = line(row, TOP_COLS) end
  assert.same(by_id, replayed)
  by_id, replayed = {}, {}
  for row in r.big:rows() do by_id[GKEY(row.g)] = line(row, BIG_COLS) end
  for key, row in pairs(run.flink_replay) do replayed[key] = line(row, BIG_COLS) end
  assert.same(by_id, replayed)
  return want_agg
end

-- One random change to the group's working copy of t (valid unless bad).
local function random_change(t, work, rng, step)
  local id = rng(1, 24)
  local gs = { "a", "b", "c" }
  local function g() local i = rng(0, 3); return i == 0 and NULL or gs[i] end
  local function v() local i = rng(0, 9); return i == 0 and NULL or i - 4 end
  local xs = { -2.5, -1.0, 0.0, 0.25, 1.5, 1.5, 3.0 }
  local function x() local i = rng(0, #xs); return i == 0 and NULL or xs[i] end
  local function plain(w) return w ~= NULL and w or nil end
  local op = rng(1, 10)
  if not work[id] then
    local row = { id = id, g = g(), v = v(), x = x() }
    t:insert(row)
    work[id] = { id = id, g = plain(row.g), v = plain(row.v), x = plain(row.x) }
  elseif op <= 3 then
    t:delete{ id = id }
    work[id] = nil
  elseif op <= 5 then
    local nv = v()
    t:update{ id = id, v = nv }
    work[id].v = plain(nv)
  elseif op <= 7 then
    local nx = x()
    t:update{ id = id, x = nx }
    work[id].x = plain(nx)
  elseif op <= 8 then
    local ng = g()
    t:update{ id = id, g = ng }
    work[id].g = plain(ng)
  else
    local row = { id = id, g = g(), v = v(), x = x() }
    t:upsert(row)
    work[id] = { id = id, g = plain(row.g), v = plain(row.v), x = plain(row.x) }
  end
  return step
end

local function copy_model(m)
  local c = {}
  for id, row in pairs(m) do c[id] = { id = row.id, g = row.g, v = row.v, x = row.x } end
  return c
end

local function model_list(m)
  local out = {}
  for _, row in pairs(m) do out[#out + 1] = row end
  return out
end

local function run_config(opts, seed)
  local dir = H.tmpdir()
  opts.path = dir .. "/state"
  opts.notes = false
  local run = { path = opts.path, pending = {}, cdc_pending = {}, events = {}, outcomes = {}, told = 0, peeks = {}, noops = {},
                log_replay = {}, dbz_replay = {}, flink_replay = {}, posts = {} }
  local p = runnel.open(opts)
  local r = declare(p, run)
  local model, history = {}, { [table.concat(sorted_lines({}, AGG_COLS), "\n")] = true }
  local last_agg = table.concat(sorted_lines({}, AGG_COLS), "\n")
  local state = 20261201 + seed
  local function rng(lo, hi) -- a small LCG: the same draws in every configuration
    state = (state * 1103515245 + 12345) % 2147483648
    return lo + state % (hi - lo + 1)
  end
  run.att = runnel.attach(opts.path, "agg")
  for step = 1, GROUPS do
    if step % 55 == 0 then -- close and reopen, then go on
      run.att:close()
      p:close()
      p = runnel.open(opts)
      r = declare(p, run)
      run.att = runnel.attach(opts.path, "agg")
    end
    local work = copy_model(model)
    local kind = rng(1, 10) -- 1: rollback, 2: sink raises, 3: a bad change, else commit
    run.pending, run.cdc_pending, run.posts, run.peeks = {}, {}, {}, {}
    run.boom = kind == 2
    run.query_now, run.queried = step % 16 == 0, nil
    p:begin()
    r.blob:upsert{ k = step % 40, pad = ("x"):rep(12000) .. step }
    for _ = 1, rng(1, 8) do random_change(r.t, work, rng, step) end
    local ok
    if kind == 1 then
      -- inside the open group: its own writes show, an attached reader sees the last commit
      assert.same(sorted_lines(model_agg(model_list(work)), AGG_COLS), sorted_lines(rows_of(r.agg:rows()), AGG_COLS))
      local seen = table.concat(sorted_lines(rows_of(run.att:rows()), AGG_COLS), "\n")
      if opts.sync == false then assert.is_true(history[seen] ~= nil, "an attached read saw an uncommitted state")
      else assert.equal(last_agg, seen) end
      p:rollback()
      ok = false
    elseif kind == 3 then
      local some = next(work)
      local err
      if some then ok, err = pcall(r.t.insert, r.t, { id = some, g = "a" })
      else ok, err = pcall(r.t.delete, r.t, { id = 99 }) end
      assert.is_false(ok)
      assert.matches("t", tostring(err))
      assert.is_false(p:in_group())
    else
      run.agg_called = false
      ok = pcall(p.commit, p)
      assert.equal(not (kind == 2 and run.agg_called), ok)
    end
    run.boom = false
    assert.is_false(p:in_group())
    run.outcomes[#run.outcomes + 1] = ok and "C" or "R"
    if ok then
      model = work
      for _, e in ipairs(run.pending) do run.events[#run.events + 1] = e end
      replay_cdc(run, run.cdc_pending)
    end
    -- attached reads made inside the group saw committed groups only
    for _, peek in ipairs(run.peeks) do
      if opts.sync == false then assert.is_true(history[peek] ~= nil, "an attached read saw an uncommitted state")
      else assert.equal(last_agg, peek) end
    end
    if run.queried then
      local rows = 0
      for _ in last_agg:gmatch("[^\n]+") do rows = rows + 1 end
      if opts.sync ~= false then assert.equal(rows, #run.queried, "runnel query saw an open group") end
      run.query_checks = (run.query_checks or 0) + 1
    end
    if not ok then run.posts = {} end
    last_agg = table.concat(check(run, r, model_list(model)), "\n")
    history[last_agg] = true
    assert.equal(last_agg, table.concat(sorted_lines(rows_of(run.att:rows()), AGG_COLS), "\n"))
  end
  assert.same({}, run.noops) -- an UPDATE leaving its row as it was
  local stats = p:stats()
  run.map_size = stats.map_size
  run.att:close()
  p:close()
  -- another process reads the closed state: the aggregate as the last group left it
  local out, err, code = H.sh(("%s query '%s' agg --format ndjson"):format(H.runnel_bin, opts.path))
  assert.equal(0, code, err)
  local n = 0
  for _ in out:gmatch("[^\n]+") do n = n + 1 end
  assert.equal(#model_agg(model_list(model)), n)
  return run
end

describe("derived relations under random groups", function()
  after_each(function() H.cleanup() end)

  it("equal their recomputation after every group, with the same events in every configuration", function()
    local plain = run_config({}, 1)
    assert.is_true(#plain.events > 200)
    local outcomes = table.concat(plain.outcomes)
    assert.matches("R", outcomes)
    assert.is_true(plain.told > 0, "no sink was told of a rollback")
    assert.is_true((plain.query_checks or 0) > 2, "runnel query hardly ran")
    for _, opts in ipairs{
      { sync = false, write_back = true, map_size = 1024 * 1024 },
      { sync = false, writemap = true, carry = { groups = 3 } },
      { sync = false, write_back = true, writemap = true, carry = { groups = 5 }, map_size = 1024 * 1024 },
    } do
      local run = run_config(opts, 1)
      assert.equal(outcomes, table.concat(run.outcomes))
      assert.same(plain.events, run.events)
      if opts.map_size then assert.is_true(run.map_size > opts.map_size, "the map never grew") end
    end
  end)
end)

describe("windows with grace under rolled-back and carried groups", function()
  after_each(function() H.cleanup() end)

  -- The events of a group that does not commit move no watermark: an event
  -- after it is late, or not, as if the group never was.
  local function windows(opts)
    local dir = H.tmpdir()
    opts.path, opts.notes = dir .. "/state", false
    local SIZE, STEP, GRACE = 10, 5, 4
    local p, ev, w
    local function declare()
      ev = p:stream("ev", { {"g","int"}, {"ts","int"}, {"v","int"} })
      w = ev:aggregate{ by = "g", window = runnel.hopping(SIZE, STEP, "ts"), grace = GRACE, name = "w",
                        n = runnel.count(), lo = runnel.min("v"), hi = runnel.max("v"), s = runnel.sum("v") }
      w:sink(function(_, row) if row and row.s and row.s > 60 and row.n > 3 then error("too much") end end)
    end
    p = runnel.open(opts)
    declare()
    local model = { wins = {}, late = 0 }
    local function copy(m)
      local c = { wins = {}, late = m.late, max_ts = m.max_ts }
      for k, e in pairs(m.wins) do c.wins[k] = { g = e.g, window_start = e.window_start, window_end = e.window_end,
                                                 n = e.n, s = e.s, lo = e.lo, hi = e.hi } end
      return c
    end
    local function accept(m, g, ts, v)
      local dropped = false
      for start = (ts // STEP) * STEP - SIZE + STEP, ts, STEP do
        if m.max_ts and m.max_ts >= start + SIZE + GRACE then dropped = true
        else
          local key = g .. "@" .. start
          local e = m.wins[key] or { g = g, window_start = start, window_end = start + SIZE, n = 0 }
          m.wins[key] = e
          e.n, e.s = e.n + 1, (e.s or 0) + v
          e.lo, e.hi = math.min(e.lo or v, v), math.max(e.hi or v, v)
        end
      end
      if dropped then m.late = m.late + 1 end
      if not m.max_ts or ts > m.max_ts then m.max_ts = ts end
    end
    local state, now, outcomes = 77, 0, {}
    local function rng(lo, hi)
      state = (state * 1103515245 + 12345) % 2147483648
      return lo + state % (hi - lo + 1)
    end
    for step = 1, 120 do
      if step % 40 == 0 then p:close(); p = runnel.open(opts); declare() end
      local work = copy(model)
      local kind = rng(1, 6)
      p:begin()
      for _ = 1, rng(1, 6) do
        now = now + rng(0, 3)
        local ts = now - (rng(1, 10) <= 3 and rng(0, 20) or 0)
        if kind == 1 then ts = ts + 40 end -- a rolled-back group far ahead
        local g, v = rng(1, 2), rng(-5, 20)
        ev:insert{ g = g, ts = ts, v = v }
        accept(work, g, ts, v)
      end
      local ok
      if kind == 1 then p:rollback(); ok = false else ok = pcall(p.commit, p) end
      outcomes[#outcomes + 1] = ok and "C" or "R"
      if ok then model = work end
      local got = {}
      for r in w:rows() do got[r.g .. "@" .. r.window_start] = r end
      assert.same(model.wins, got)
      assert.equal(model.late, w:late())
    end
    p:close()
    return table.concat(outcomes), model.late
  end

  it("follow the committed events only, in every configuration alike", function()
    local outcomes, late = windows{}
    assert.matches("R", outcomes)
    assert.is_true(late > 0)
    assert.equal(outcomes, (windows{ sync = false, write_back = true }))
    assert.equal(outcomes, (windows{ sync = false, writemap = true, carry = { groups = 4 } }))
    assert.equal(outcomes, (windows{ sync = false, write_back = true, carry = { groups = 7 }, map_size = 1024 * 1024 }))
  end)
end)

-- The row of an aggregate whose by column (col, default g) holds v: by a
-- nullable column an aggregate is keyless, so it is looked for.
local function group(a, v, col)
  local found
  for r in a:rows() do
    if r[col or "g"] == v then assert.is_nil(found, "two groups of one value"); found = r end
  end
  return found
end

describe("aggregate floats and ints at the edges", function()
  local p, t
  before_each(function()
    p = runnel.open()
    t = p:table("t", { {"id","int"}, {"g","string", null = true}, {"v","int", null = true},
                       {"x","float", null = true}, key = "id" })
  end)
  after_each(function() p:close() end)

  it("sums floats exactly whatever the order, through huge values and infinities", function()
    local a = t:aggregate{ s = runnel.sum("x"), av = runnel.avg("x"), n = runnel.count("x"), name = "a" }
    local function s() return a:rows()() end
    t:insert{ id = 1, x = 1e308 }
    t:insert{ id = 2, x = 1e308 }        -- 2e308 is past a double: inf
    assert.equal(math.huge, s().s)
    t:insert{ id = 3, x = -1e308 }
    assert.equal(1e308, s().s)          -- exact: a running double sum would stay inf
    t:delete{ id = 1 }
    t:delete{ id = 2 }
    t:insert{ id = 4, x = 1e16 }
    t:insert{ id = 5, x = 1.0 }
    t:delete{ id = 3 }
    t:delete{ id = 4 }
    assert.equal(1.0, s().s)
    t:insert{ id = 6, x = math.huge }
    t:insert{ id = 7, x = -math.huge }
    assert.is_true(s().s ~= s().s)      -- inf - inf: NaN while both are there
    t:delete{ id = 6 }
    assert.equal(-math.huge, s().s)
    t:delete{ id = 7 }
    assert.same({ s = 1.0, av = 1.0, n = 1 }, s())
    t:insert{ id = 8, x = 0 / 0 }        -- sum takes a NaN and lets it go again
    assert.is_true(s().s ~= s().s)
    t:delete{ id = 8 }
    assert.same({ s = 1.0, av = 1.0, n = 1 }, s())
    t:delete{ id = 5 }
    assert.is_nil(s())
  end)

  it("refuses a NaN in min or max, naming the relation, and rolls the group back", function()
    local a = t:aggregate{ by = "g", lo = runnel.min("x"), name = "lows" }
    t:insert{ id = 1, g = "a", x = 2.0 }
    p:begin()
    t:insert{ id = 2, g = "a", x = 1.0 }
    local err = H.error_of(t.insert, t, { id = 3, g = "a", x = 0 / 0 })
    assert.matches("lows", err)
    assert.matches("NaN", err)
    assert.is_false(p:in_group())
    assert.is_nil(t:get(2))
    assert.same({ { g = "a", lo = 2.0 } }, rows_of(a:rows()))
  end)

  it("keeps int sums exact to the int64 edge and refuses to leave it, the group rolled back", function()
    local a = t:aggregate{ by = "g", s = runnel.sum("v"), av = runnel.avg("v"), name = "sums" }
    local max, min = math.maxinteger, math.mininteger
    p:batch(function()
      t:insert{ id = 1, g = "a", v = max }
      t:insert{ id = 2, g = "a", v = -1 }
      t:insert{ id = 3, g = "a", v = 1 }   -- max - 1 + 1: in range at the end
    end)
    assert.equal(max, group(a, "a").s)
    local err = H.error_of(t.insert, t, { id = 4, g = "a", v = 1 })
    assert.matches("sums", err)
    assert.equal(max, group(a, "a").s)
    assert.is_nil(t:get(4))
  end)

  -- An int sum that fits is computed whatever the order of its rows: the
  -- rows a declaration finds are taken in key order, not in the order that
  -- made them fit on the way.
  it("computes an int sum that fits over rows that existed before, in any key order", function()
    local max = math.maxinteger
    t:insert{ id = 1, g = "a", v = max }
    t:insert{ id = 3, g = "a", v = -10 }
    t:insert{ id = 2, g = "a", v = 5 }    -- max + 5 on the way in key order
    local a = t:aggregate{ by = "g", s = runnel.sum("v"), name = "late_sum" }
    assert.equal(max - 5, group(a, "a").s)
    t:update{ id = 2, v = 10 }
    assert.equal(max, group(a, "a").s)
    assert.matches("late_sum", H.error_of(t.update, t, { id = 3, v = 0 })) -- max + 10: leaves int64
    assert.equal(max, group(a, "a").s)
  end)

  it("refuses to declare an int sum over rows whose sum leaves int64, naming it", function()
    t:insert{ id = 1, g = "a", v = math.maxinteger }
    t:insert{ id = 2, g = "b", v = 1 }
    t:insert{ id = 3, g = "a", v = 1 }
    local err = H.error_of(t.aggregate, t, { by = "g", s = runnel.sum("v"), name = "too_big" })
    assert.matches('too_big: sum "s" of column "v" overflows 64 bits', err)
    t:delete{ id = 3 }
    local a = t:aggregate{ by = "g", s = runnel.sum("v"), name = "too_big" }
    assert.equal(math.maxinteger, group(a, "a").s)
    assert.equal(1, group(a, "b").s)
  end)

  it("averages ints whose sum leaves int64", function()
    local a = t:aggregate{ by = "g", av = runnel.avg("v"), name = "avgs" }
    t:insert{ id = 1, g = "b", v = math.mininteger }
    t:insert{ id = 2, g = "b", v = math.mininteger + 2 }
    t:insert{ id = 3, g = "c", v = math.maxinteger }
    t:insert{ id = 4, g = "c", v = math.maxinteger }
    assert.equal("float", math.type(group(a, "b").av))
    assert.equal(-2.0 ^ 63, group(a, "b").av)
    assert.equal(2.0 ^ 63, group(a, "c").av)
  end)

  it("takes the next extreme when the current one goes, empties a group and fills it again", function()
    local a = t:aggregate{ by = "g", lo = runnel.min("v"), hi = runnel.max("v"), n = runnel.count(), name = "ext" }
    local max, min = math.maxinteger, math.mininteger
    t:insert{ id = 1, g = "a", v = max }
    t:insert{ id = 2, g = "a", v = min }
    t:insert{ id = 3, g = "a", v = 0 }
    t:insert{ id = 4, g = "a", v = min }
    assert.same({ g = "a", lo = min, hi = max, n = 4 }, group(a, "a"))
    p:batch(function() t:delete{ id = 1 }; t:delete{ id = 2 } end)
    assert.same({ g = "a", lo = min, hi = 0, n = 2 }, group(a, "a"))
    t:update{ id = 4, v = runnel.null }
    assert.same({ g = "a", lo = 0, hi = 0, n = 2 }, group(a, "a"))
    p:batch(function() t:delete{ id = 3 }; t:delete{ id = 4 } end)
    assert.is_nil(group(a, "a"))
    t:insert{ id = 9, g = "a", v = 5 }
    assert.same({ g = "a", lo = 5, hi = 5, n = 1 }, group(a, "a"))
    t:update{ id = 9, g = runnel.null }
    assert.is_nil(group(a, "a"))
    assert.same({ { lo = 5, hi = 5, n = 1 } }, rows_of(a:rows()))
  end)

  -- min and max keep values as keys, where -0.0 is 0.0: the row an event
  -- gives is the row the aggregate then holds, and the next event's old.
  it("gives min and max of -0.0 as the aggregate holds them, event after event", function()
    local a = t:aggregate{ by = "g", lo = runnel.min("x"), hi = runnel.max("x"), n = runnel.count(), name = "zero" }
    local log = {}
    a:sink(function(verb, row, old) log[#log + 1] = { verb, row and val(row.lo), old and val(old.lo), row and val(row.hi) } end)
    t:insert{ id = 1, g = "a", x = -0.0 }
    local held = group(a, "a")
    assert.same({ "INSERT", val(held.lo), nil, val(held.hi) }, log[1])
    t:insert{ id = 2, g = "a", v = 1 }
    assert.same({ "UPDATE", val(group(a, "a").lo), val(held.lo), val(group(a, "a").hi) }, log[2])
    t:insert{ id = 3, g = "a", x = 0.0 }
    t:delete{ id = 1 }
    t:insert{ id = 4, g = "a", x = -0.0 }
    t:delete{ id = 3 }
    for i = 2, #log do
      assert.equal(log[i - 1][2], log[i][3], "event " .. i .. "'s old is not the row before it")
    end
    assert.equal(log[#log][2], val(group(a, "a").lo))
  end)

  it("puts -0.0 and 0.0 in one group and one rank", function()
    local a = t:aggregate{ by = "x", n = runnel.count(), name = "byx" }
    local top = t:top{ n = 2, order = { "x" }, name = "zeros" }
    t:insert{ id = 1, x = 0.0 }
    t:insert{ id = 2, x = -0.0 }
    assert.equal(1, a:count())
    assert.equal(2, group(a, 0.0, "x").n)
    local ranks = {}
    for r in top:rows() do ranks[r.rank] = r.id end
    assert.same({ 1, 2 }, ranks) -- equal values: by row id
  end)
end)

describe("tops at their edges", function()
  it("give exact events as rows cross the cut, with n = 1 and n larger than the table", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"v","int", null = true}, key = "id" })
    local one = t:top{ n = 1, order = { {"v", "desc"} }, name = "one", rank = "pos" }
    local all = t:top{ n = 1000, order = { "v" }, name = "all" }
    local log = {}
    one:sink(function(verb, row, old) log[#log + 1] = verb .. " " .. (row or old).id .. "@" .. (row or old).pos end)
    local function step(fn, ...)
      H.clear(log)
      fn(...)
      local out = { table.unpack(log) }
      table.sort(out)
      return table.concat(out, ", ")
    end
    assert.equal("INSERT 1@1", step(t.insert, t, { id = 1, v = 5 }))
    assert.equal("", step(t.insert, t, { id = 2, v = 5 }))                  -- a tie: id 1 stays first
    assert.equal("", step(t.insert, t, { id = 3, v = runnel.null }))        -- null after every value
    assert.equal("DELETE 1@1, INSERT 3@1", step(t.update, t, { id = 3, v = 9 }))
    assert.equal("", step(t.delete, t, { id = 2 }))                         -- out of the top: no event
    assert.equal("DELETE 3@1, INSERT 1@1", step(t.update, t, { id = 3, v = 1 }))
    assert.equal("", step(t.update, t, { id = 3, v = 2 }))                  -- moves below the cut
    assert.equal("DELETE 1@1, DELETE 3@1, INSERT 1@1, INSERT 3@1",
                 step(p.batch, p, function() t:update{ id = 1, v = 0 }; t:update{ id = 1, v = 5 } end))
    assert.equal("", step(function() pcall(p.batch, p, function() t:delete{ id = 1 }; error("no") end) end))
    assert.equal(1, one:rows()().id)
    local ranks = {}
    for r in all:rows() do ranks[r.rank] = r.id .. ":" .. tostring(r.v) end
    assert.same({ "3:2", "1:5" }, ranks)
    local err = H.error_of(t.top, t, { n = 0, order = { "v" } })
    assert.matches("n", err)
    p:close()
  end)
end)

describe("values too long for a key", function()
  after_each(function() H.cleanup() end)

  -- A by value past LMDB's key size groups like any other (its group key is
  -- stored hashed, longkey.h: it failed its change before), through the
  -- write buffer and writemap too; a rolled-back group leaves no trace,
  -- and the groups stay after a reopen.
  for _, opts in ipairs{ {}, { sync = false, write_back = true }, { sync = false, writemap = true } } do
    it("group like any other and keep the groups before them (" .. (opts.write_back and "write_back" or opts.writemap and "writemap" or "plain") .. ")", function()
      local dir = H.tmpdir()
      opts.path, opts.notes = dir .. "/state", false
      local p = runnel.open(opts)
      local function declare(q)
        local t = q:table("t", { {"id","int"}, {"g","string"}, key = "id" })
        return t, t:aggregate{ by = "g", n = runnel.count(), name = "per_g" }
      end
      local t, a = declare(p)
      local x, y = ("x"):rep(600), ("x"):rep(599) .. "y"
      t:insert{ id = 1, g = "a" }
      t:insert{ id = 2, g = "a" }
      t:insert{ id = 3, g = x }
      assert.same({ g = x, n = 1 }, a:get(x))
      p:begin()
      t:insert{ id = 4, g = "b" }
      t:update{ id = 1, g = y }
      p:rollback()
      assert.is_nil(t:get(4))
      assert.is_nil(a:get(y))
      t:update{ id = 2, g = y }
      t:insert{ id = 5, g = "b" }
      assert.same({ g = "a", n = 1 }, a:get("a"))
      assert.same({ g = "b", n = 1 }, a:get("b"))
      assert.same({ g = y, n = 1 }, a:get(y))
      p:close()
      p = runnel.open(opts)
      t, a = declare(p)
      assert.same({ g = "a", n = 1 }, a:get("a"))
      assert.same({ g = x, n = 1 }, a:get(x))
      assert.same({ g = y, n = 1 }, a:get(y))
      assert.equal(4, t:count())
      p:close()
    end)
  end
end)

describe("windows over a float time", function()
  -- An event belongs to floor(ts / size) * size's tumbling window, and to
  -- size / step hopping windows when size is a multiple of step: counted
  -- once per window, never dropped nor doubled by a rounded bound.
  it("puts each event in one tumbling window and size/step hopping ones, whatever the rounding", function()
    local p = runnel.open()
    local ev = p:stream("ev", { {"ts","float"} })
    local tw = ev:aggregate{ window = runnel.tumbling(0.1, "ts"), n = runnel.count(), name = "tw" }
    local hw = ev:aggregate{ window = runnel.hopping(0.3, 0.1, "ts"), n = runnel.count(), name = "hw" }
    local events = { 0.6, 1.7, 4.1, 0.3, 2.0, -0.7, 12.3, 0.05 }
    for i = 1, 200 do events[#events + 1] = i * 0.017 end
    local want = {}
    for _, ts in ipairs(events) do
      ev:insert{ ts = ts }
      local start = math.floor(ts / 0.1) * 0.1
      want[start] = (want[start] or 0) + 1
    end
    local got, total = {}, 0
    for r in tw:rows() do got[r.window_start] = r.n end
    assert.same(want, got)
    for r in hw:rows() do total = total + r.n end
    assert.equal(3 * #events, total)
    p:close()
  end)
end)
