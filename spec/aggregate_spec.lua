-- Aggregates and windows (DESIGN §6, §12; aggregate.h invariants AGG-1..3).
local runnel = require "runnel"
local H = require "helper"

local function watch(rel, fmt)
  local log = {}
  rel:sink(function(verb, row, old, info) log[#log + 1] = verb .. " " .. info.id .. " " .. fmt(row or old) end)
  return log
end

describe("aggregate on a table", function()
  local p, s
  before_each(function()
    p = runnel.open()
    s = p:table("scores", { {"id","int"}, {"team","string"}, {"pts","int", null = true}, {"f","float", null = true}, key = "id" })
  end)
  after_each(function() p:close() end)

  it("has the by columns, then the aggregates by name, keyed by the by columns", function()
    local a = s:aggregate{ by = "team", n = runnel.count(), total = runnel.sum("pts"), avg_f = runnel.avg("f") }
    local cols = {}
    for i, c in ipairs(a:schema().columns) do cols[i] = c.name .. ":" .. c.type end
    assert.same({ "team:string", "avg_f:float", "n:int", "total:int" }, cols)
    assert.same({ "team" }, a:schema().key)
    assert.equal("float", s:aggregate{ t = runnel.sum("f") }:schema().columns[1].type)
  end)

  it("follows inserts, updates inside a group, moves between groups and deletes, with exact verbs", function()
    local a = s:aggregate{ by = "team", n = runnel.count(), total = runnel.sum("pts") }
    local log = watch(a, function(r) return ("%s n=%d total=%s"):format(r.team, r.n, tostring(r.total)) end)
    s:insert{ id = 1, team = "a", pts = 5 }
    s:insert{ id = 2, team = "a", pts = 7 }
    s:update{ id = 2, pts = 8 }                -- stays in a: one UPDATE
    s:update{ id = 1, team = "b" }             -- moves: a first, then b
    s:delete{ id = 2 }                         -- a empties: DELETE
    s:insert{ id = 3, team = "a", pts = 1 }    -- a comes back with its old id
    assert.same({
      "INSERT 1 a n=1 total=5", "UPDATE 1 a n=2 total=12", "UPDATE 1 a n=2 total=13",
      "UPDATE 1 a n=1 total=8", "INSERT 2 b n=1 total=5",
      "DELETE 1 a n=1 total=8", "INSERT 1 a n=1 total=1",
    }, log)
  end)

  it("falls back to the next min and max exactly when the extreme goes", function()
    local a = s:aggregate{ by = "team", lo = runnel.min("pts"), hi = runnel.max("pts") }
    local log = watch(a, function(r) return ("%s %s..%s"):format(r.team, tostring(r.lo), tostring(r.hi)) end)
    for id, pts in ipairs{ 5, 9, 1, 9 } do s:insert{ id = id, team = "a", pts = pts } end
    s:delete{ id = 3 }  -- min 1 goes: 5
    s:delete{ id = 2 }  -- one 9 goes: max stays 9
    s:delete{ id = 4 }  -- the other 9 goes: 5
    assert.same({ "INSERT 1 a 5..5", "UPDATE 1 a 5..9", "UPDATE 1 a 1..9", "UPDATE 1 a 5..9",
                  "UPDATE 1 a 5..5" }, log)
  end)

  it("skips nulls in sum, min, max and avg but counts the row", function()
    local a = s:aggregate{ n = runnel.count(), k = runnel.count("pts"), t = runnel.sum("pts"), m = runnel.min("pts"), v = runnel.avg("pts") }
    s:insert{ id = 1, team = "a" }
    assert.same({ n = 1, k = 0 }, a:rows()())
    s:insert{ id = 2, team = "a", pts = 4 }
    s:insert{ id = 3, team = "a", pts = 2 }
    assert.same({ n = 3, k = 2, t = 6, m = 2, v = 3.0 }, a:rows()())
  end)

  it("computes over rows that existed before it was declared", function()
    s:insert{ id = 1, team = "a", pts = 2 }
    s:insert{ id = 2, team = "b", pts = 3 }
    local a = s:aggregate{ by = "team", n = runnel.count() }
    assert.equal(2, a:count())
    assert.same({ team = "b", n = 1 }, a:get("b"))
  end)

  it("runs user aggregates with init, add, remove and result", function()
    local a = s:aggregate{ by = "team", ids = runnel.agg{
      init = function() return {} end,
      add = function(st, r) st[#st + 1] = r.id; table.sort(st); return st end,
      remove = function(st, r) for i, v in ipairs(st) do if v == r.id then table.remove(st, i) break end end; return st end,
      result = function(st) return table.concat(st, ",") end } }
    s:insert{ id = 2, team = "a" }
    s:insert{ id = 1, team = "a" }
    s:delete{ id = 2 }
    assert.equal("1", a:get("a").ids)
    local b = s:aggregate{ n = runnel.agg{ add = function(st) return (st or 0) + 1 end }, name = "addonly" }
    assert.matches('aggregate "n" has no remove function', H.error_of(s.delete, s, { id = 1 }))
    assert.is_not_nil(b)
  end)

  it("refuses aggregates that do not fit their columns", function()
    assert.equal('scores.aggregate: s: column "team" is string; sum and avg take int or float',
                 H.error_of(s.aggregate, s, { s = runnel.sum("team") }))
    assert.equal('scores.aggregate: by: scores has no column "nope"', H.error_of(s.aggregate, s, { by = "nope", n = runnel.count() }))
    assert.equal("scores.aggregate: name at least one aggregate, e.g. n = runnel.count()", H.error_of(s.aggregate, s, { by = "team" }))
  end)

  it("gives CDC images of a group across a group of changes", function()
    local a = s:aggregate{ by = "team", n = runnel.count() }
    local log = {}
    a:cdc{ preimage = true, postimage = true }:sink(function(_, r)
      log[#log + 1] = r["cdc$operation"] .. ":" .. tostring(r.n)
    end)
    p:batch(function()
      s:insert{ id = 1, team = "a" }
      s:insert{ id = 2, team = "a" }
    end)
    assert.same({ "0:nil", "2:1", "1:2", "9:2" }, log)
  end)
end)

describe("windows over a stream", function()
  local p, ev
  before_each(function()
    p = runnel.open()
    ev = p:stream("ev", { {"player","int"}, {"ts","int"}, {"pts","int"} })
  end)
  after_each(function() p:close() end)

  it("puts events in tumbling windows: [k*size, (k+1)*size)", function()
    local w = ev:aggregate{ by = "player", window = runnel.tumbling(10, "ts"), n = runnel.count() }
    local log = watch(w, function(r) return ("p%d [%d,%d) n=%d"):format(r.player, r.window_start, r.window_end, r.n) end)
    ev:insert{ player = 1, ts = 0, pts = 1 }
    ev:insert{ player = 1, ts = 9, pts = 1 }
    ev:insert{ player = 1, ts = 10, pts = 1 } -- at window_end: the next window
    ev:insert{ player = 1, ts = -1, pts = 1 }
    assert.same({ "INSERT 1 p1 [0,10) n=1", "UPDATE 1 p1 [0,10) n=2", "INSERT 2 p1 [10,20) n=1",
                  "INSERT 3 p1 [-10,0) n=1" }, log)
    assert.same({ "player", "window_start", "window_end", "n" }, (function()
      local n = {}
      for i, c in ipairs(w:schema().columns) do n[i] = c.name end
      return n
    end)())
  end)

  it("puts an event in every hopping window that holds it", function()
    local w = ev:aggregate{ window = runnel.hopping(10, 5, "ts"), n = runnel.sum("pts") }
    local log = watch(w, function(r) return ("[%d,%d) %d"):format(r.window_start, r.window_end, r.n) end)
    ev:insert{ player = 1, ts = 7, pts = 2 }
    assert.same({ "INSERT 1 [0,10) 2", "INSERT 2 [5,15) 2" }, log)
  end)

  it("drops and counts events for windows past their end plus grace", function()
    local w = ev:aggregate{ window = runnel.tumbling(10, "ts"), grace = 5, n = runnel.count() }
    local log = H.record(w)
    ev:insert{ player = 1, ts = 3, pts = 0 }
    ev:insert{ player = 1, ts = 16, pts = 0 }
    ev:insert{ player = 1, ts = 9, pts = 0 }  -- [0,10) closes at 15; max seen is 16: late
    ev:insert{ player = 1, ts = 14, pts = 0 } -- [10,20) is still open
    assert.same({ "INSERT 1", "INSERT 2", "UPDATE 2" }, H.verbs(log))
    assert.equal(1, w:late())
    assert.equal(1, p:stats().late[w:name()])
  end)

  it("makes a window final past its end plus grace: its row stays as it was, its state goes", function()
    local function declare(name, grace)
      return ev:aggregate{ by = "player", window = runnel.tumbling(10, "ts"), grace = grace, name = name,
                           n = runnel.count(), lo = runnel.min("pts"), hi = runnel.max("pts"), total = runnel.sum("pts") }
    end
    local kept, open = declare("kept", nil), declare("final", 5)
    local verbs = H.record(open)
    for ts = 0, 99 do
      p:begin()
      for player = 1, 3 do ev:insert{ player = player, ts = ts, pts = (ts * 7 + player) % 13 } end
      p:commit()
    end
    local function rows(rel)
      local out = {}
      for r in rel:rows() do out[#out + 1] = r end
      return out
    end
    assert.same(rows(kept), rows(open)) -- the same table, final windows included
    assert.equal(30, open:count())
    local st = p:stats()
    -- max seen is 99: [0,10) … [80,90), whose end plus grace is at most 95, are final; [90,100) is open
    assert.equal(9 * 3, st.final.final)
    assert.equal(0, st.final.kept)
    -- the open windows keep value counts; the final ones only their row
    assert.is_true(st.state.final < st.state.kept / 3, ("%d vs %d"):format(st.state.final, st.state.kept))
    -- a final window is never touched again: no verb, counted late, the row as it was
    local before = open:get{ player = 1, window_start = 0 }
    local n = #verbs
    ev:insert{ player = 1, ts = 5, pts = 100 }
    assert.equal(n, #verbs)
    assert.equal(1, open:late())
    assert.same(before, open:get{ player = 1, window_start = 0 })
  end)

  it("rolls back windows made final by a group that fails", function()
    local w = ev:aggregate{ window = runnel.tumbling(10, "ts"), grace = 0, n = runnel.count(), hi = runnel.max("pts") }
    ev:insert{ player = 1, ts = 3, pts = 4 }
    local ok = pcall(p.batch, p, function()
      ev:insert{ player = 1, ts = 50, pts = 1 } -- would make [0,10) final
      error("changed my mind")
    end)
    assert.is_false(ok)
    assert.equal(0, p:stats().final[w:name()])
    ev:insert{ player = 1, ts = 5, pts = 9 } -- [0,10) is still open
    assert.same({ window_start = 0, window_end = 10, n = 2, hi = 9 }, w:get{ window_start = 0 })
    assert.equal(0, w:late())
    ev:insert{ player = 1, ts = 50, pts = 1 }
    assert.equal(1, p:stats().final[w:name()])
    assert.same({ window_start = 0, window_end = 10, n = 2, hi = 9 }, w:get{ window_start = 0 })
  end)

  it("keeps final windows and their lateness across a reopen", function()
    local dir = H.tmpdir()
    local function session(fn)
      local q = runnel.open(dir .. "/state")
      local e = q:stream("ev", { {"player","int"}, {"ts","int"}, {"pts","int"} })
      local w = e:aggregate{ window = runnel.hopping(10, 5, "ts"), grace = 0, name = "w",
                             n = runnel.count(), hi = runnel.max("pts") }
      fn(q, e, w)
      q:close()
    end
    session(function(_, e)
      for ts = 0, 30, 3 do e:insert{ player = 1, ts = ts, pts = ts } end
    end)
    session(function(q, e, w)
      local function row(start) return w:get{ window_start = start } end
      assert.same({ window_start = 0, window_end = 10, n = 4, hi = 9 }, row(0))
      e:insert{ player = 1, ts = 12, pts = 99 } -- [5,15) and [10,20) are final: late
      e:insert{ player = 1, ts = 26, pts = 50 } -- [20,30) is final, [25,35) open
      assert.same({ window_start = 10, window_end = 20, n = 3, hi = 18 }, row(10))
      assert.same({ window_start = 25, window_end = 35, n = 3, hi = 50 }, row(25))
      assert.equal(2, w:late())
      assert.equal(6, q:stats().final.w) -- [-5,5) … [20,30): final since the first session's max of 30
    end)
    H.cleanup()
  end)
end)

describe("windows with grace under random lateness", function()
  it("equal windows recomputed from the events each window accepted, after every group", function()
    local p = runnel.open{ sync = false }
    local ev = p:stream("ev", { {"g","int"}, {"ts","int"}, {"v","int"} })
    local SIZE, STEP, GRACE = 10, 5, 7
    local w = ev:aggregate{ by = "g", window = runnel.hopping(SIZE, STEP, "ts"), grace = GRACE,
                            n = runnel.count(), lo = runnel.min("v"), hi = runnel.max("v"), s = runnel.sum("v") }
    local model, max_ts, late = {}, nil, 0
    local function accept(g, ts, v)
      local dropped = false
      for start = (ts // STEP) * STEP - SIZE + STEP, ts, STEP do
        if start + SIZE > ts then
          if max_ts and max_ts >= start + SIZE + GRACE then dropped = true
          else
            local key = g .. "@" .. start
            local e = model[key] or { g = g, window_start = start, window_end = start + SIZE, n = 0 }
            model[key] = e
            e.n, e.s = e.n + 1, (e.s or 0) + v
            e.lo, e.hi = math.min(e.lo or v, v), math.max(e.hi or v, v)
          end
        end
      end
      if dropped then late = late + 1 end
      if not max_ts or ts > max_ts then max_ts = ts end
    end
    math.randomseed(11)
    local now = 0
    for _ = 1, 150 do
      p:begin()
      for _ = 1, math.random(1, 15) do
        now = now + math.random(0, 3)
        local ts = now - (math.random() < 0.3 and math.random(0, 25) or 0) -- some events come late
        local g, v = math.random(1, 3), math.random(-20, 20)
        ev:insert{ g = g, ts = ts, v = v }
        accept(g, ts, v)
      end
      p:commit()
      local got = {}
      for r in w:rows() do got[r.g .. "@" .. r.window_start] = r end
      assert.same(model, got)
      assert.equal(late, w:late())
    end
    assert.is_true(late > 0 and p:stats().final[w:name()] > 0, "the run made no late events or no final windows")
    p:close()
  end)
end)

describe("windowed tables join (the seed's use cases)", function()
  it("joins a windowed per-player score to players through a mapper", function()
    local p = runnel.open()
    local players = p:table("players", { {"id","int"}, {"name","string"}, key = "id" })
    local ev = p:stream("ev", { {"player","int"}, {"ts","int"}, {"pts","int"} })
    local per = ev:aggregate{ by = "player", window = runnel.tumbling(60, "ts"), score = runnel.sum("pts"), name = "per_min" }
    local j = per:join(players, { mapper = function(r) return r.player end, kind = "left" })
    local log = watch(j, function(r) return ("%s@%d=%d"):format(tostring(r.name), r.window_start, r.score) end)
    players:insert{ id = 1, name = "ann" }
    ev:insert{ player = 1, ts = 5, pts = 3 }
    ev:insert{ player = 1, ts = 70, pts = 4 }
    players:update{ id = 1, name = "anna" }
    assert.same({ "INSERT 1 ann@0=3", "INSERT 2 ann@60=4", "UPDATE 1 anna@0=3", "UPDATE 2 anna@60=4" }, log)
    p:close()
  end)

  it("joins a windowed table with itself shifted by one window", function()
    local p = runnel.open()
    local ev = p:stream("ev", { {"player","int"}, {"ts","int"}, {"pts","int"} })
    local per = ev:aggregate{ by = "player", window = runnel.tumbling(10, "ts"), score = runnel.sum("pts"), name = "per" }
    local trend = per:join(per, {
      mapper = function(r) return { player = r.player, window_start = r.window_start - 10 } end,
      selector = function(this) return { this.player, this.window_start } end,
      joiner = function(now, before)
        return { player = now.player, at = now.window_start, delta = now.score - (before and before.score or 0) }
      end,
      columns = { {"player","int"}, {"at","int"}, {"delta","int"} },
      kind = "left" })
    local log = watch(trend, function(r) return ("%d@%d:%d"):format(r.player, r.at, r.delta) end)
    ev:insert{ player = 1, ts = 1, pts = 5 }
    ev:insert{ player = 1, ts = 12, pts = 8 }
    ev:insert{ player = 1, ts = 3, pts = 1 } -- the first window grows: both windows' deltas change
    assert.same({ "INSERT 1 1@0:5", "INSERT 2 1@10:3", "UPDATE 1 1@0:6", "UPDATE 2 1@10:2" }, log)
    p:close()
  end)
end)

describe("aggregates under random changes", function()
  it("equal aggregates recomputed from scratch after every group, and their verbs replay to them", function()
    local p = runnel.open{ sync = false }
    local t = p:table("t", { {"id","int"}, {"g","int"}, {"v","int", null = true}, key = "id" })
    local a = t:aggregate{ by = "g", n = runnel.count(), k = runnel.count("v"), s = runnel.sum("v"),
                           lo = runnel.min("v"), hi = runnel.max("v") }
    local replay = {}
    a:sink(function(verb, row, old, info)
      if verb == "INSERT" then assert.is_nil(replay[info.id]); replay[info.id] = row
      elseif verb == "UPDATE" then assert.same(old, replay[info.id]); replay[info.id] = row
      else assert.same(old, replay[info.id]); replay[info.id] = nil end
    end)
    local function expected()
      local out = {}
      for r in t:rows() do
        local e = out[r.g] or { g = r.g, n = 0, k = 0 }
        out[r.g] = e
        e.n = e.n + 1
        if r.v then
          e.k = e.k + 1
          e.s = (e.s or 0) + r.v
          e.lo = math.min(e.lo or r.v, r.v)
          e.hi = math.max(e.hi or r.v, r.v)
        end
      end
      return out
    end
    math.randomseed(7)
    local function value() if math.random() < 0.2 then return runnel.null end return math.random(-5, 5) end
    for _ = 1, 200 do
      p:begin()
      for _ = 1, math.random(1, 20) do
        local id = math.random(1, 30)
        local r = math.random()
        if not t:get(id) then t:insert{ id = id, g = math.random(1, 4), v = value() }
        elseif r < 0.4 then t:update{ id = id, v = value() }
        elseif r < 0.7 then t:update{ id = id, g = math.random(1, 4) }
        else t:delete{ id = id } end
      end
      p:commit()
      local by_g = {}
      for _, row in pairs(replay) do by_g[row.g] = row end
      assert.same(expected(), by_g)
    end
    p:close()
  end)
end)
