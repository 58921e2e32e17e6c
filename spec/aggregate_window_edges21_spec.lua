-- Edges of windows with grace found in round 21, each fix with its test.
local runnel = require "runnel"
local H = require "helper"

describe("a windowed aggregate declared again with a larger grace, or none", function()
  after_each(H.cleanup)
  -- Regression: a window made final under the old grace keeps only its row;
  -- an event for it under the new declaration failed its whole group ("a
  -- change reached a final window"), so every group holding such an event
  -- was refused for good. It is dropped as late, and counted.
  local function declare(p, grace)
    local s = p:stream("clicks", { {"player","int"}, {"ts","int"}, {"v","int"} })
    local w = s:aggregate{ by = "player", window = runnel.tumbling(10, "ts"), grace = grace, name = "pm",
                           n = runnel.count(), hi = runnel.max("v"), total = runnel.sum("v") }
    return s, w
  end
  local function rows(w)
    local out = {}
    for r in w:rows() do out[#out + 1] = { r.player, r.window_start, r.n, r.hi, r.total } end
    return out
  end

  for _, grace in ipairs{ 100, false } do
    it("drops an event for a final window as late (grace " .. tostring(grace) .. ")", function()
      local dir = H.tmpdir()
      local p = runnel.open(dir)
      local s, w = declare(p, 2)
      s:insert{ player = 1, ts = 1, v = 1 }
      s:insert{ player = 1, ts = 25, v = 2 }       -- window 0 is final: 25 >= 10 + 2
      assert.equal(1, p:stats().final.pm)
      p:close()
      p = runnel.open(dir)
      s, w = declare(p, grace or nil)
      local told = H.record(w)
      p:batch(function()
        s:insert{ player = 1, ts = 3, v = 7 }       -- window 0, final: dropped
        s:insert{ player = 1, ts = 27, v = 3 }      -- window 20: kept
      end)
      assert.equal(3, p:seq())
      assert.same({ { 1, 0, 1, 1, 1 }, { 1, 20, 2, 3, 5 } }, rows(w))
      assert.equal(1, #told)
      assert.equal(1, w:late())
      assert.equal(1, p:stats().late.pm)
      p:close()
    end)
  end
end)

describe("grace given to a windowed aggregate declared before without it", function()
  -- Regression: the windows made before grace was given were never listed
  -- as open, so none of them was ever made final: their state stayed for
  -- good and p:stats().final left them out, while events for them were
  -- dropped as late. They are listed when grace is given.
  after_each(H.cleanup)
  local function declare(p, grace)
    local s = p:stream("clicks", { {"player","int"}, {"ts","int"}, {"v","int"} })
    local w = s:aggregate{ by = "player", window = runnel.tumbling(10, "ts"), grace = grace, name = "pm",
                           n = runnel.count(), hi = runnel.max("v") }
    return s, w
  end
  local function rows(w)
    local out = {}
    for r in w:rows() do out[#out + 1] = { r.window_start, r.n, r.hi } end
    return out
  end

  it("makes them final once the largest event time passes them", function()
    local dir = H.tmpdir()
    local p = runnel.open(dir)
    local s, w = declare(p, nil)
    for i = 1, 3 do s:insert{ player = 1, ts = i * 10, v = i } end
    p:close()
    local fresh = runnel.open()                        -- the same events with grace from the start
    local fs = declare(fresh, 0)
    for i = 1, 3 do fs:insert{ player = 1, ts = i * 10, v = i } end
    fs:insert{ player = 1, ts = 45, v = 4 }
    p = runnel.open(dir)
    s, w = declare(p, 0)
    s:insert{ player = 1, ts = 45, v = 4 }             -- windows 10, 20 and 30 end by 40
    assert.equal(3, p:stats().final.pm)
    assert.equal(fresh:stats().state.pm, p:stats().state.pm) -- their value counts are gone
    fresh:close()
    assert.same({ { 10, 1, 1 }, { 20, 1, 2 }, { 30, 1, 3 }, { 40, 1, 4 } }, rows(w))
    p:close()
    p = runnel.open(dir)                               -- grace taken away, then given again
    s, w = declare(p, nil)
    s:insert{ player = 1, ts = 55, v = 5 }
    p:close()
    p = runnel.open(dir)
    s, w = declare(p, 0)
    s:insert{ player = 1, ts = 70, v = 7 }             -- windows 40 and 50 end by 60
    assert.equal(5, p:stats().final.pm)
    s:insert{ player = 1, ts = 52, v = 9 }             -- late
    assert.equal(1, w:late())
    assert.same({ { 10, 1, 1 }, { 20, 1, 2 }, { 30, 1, 3 }, { 40, 1, 4 }, { 50, 1, 5 }, { 70, 1, 7 } }, rows(w))
    p:close()
  end)
end)

describe("windows with a grace that changes between sessions, against a recomputation", function()
  -- Random events (out of order, on window bounds, late) in random groups,
  -- some rolled back, over sessions that each declare another grace (or
  -- none). The model: a window is final once made so (never again open);
  -- with grace, an event makes final every window that its time passes by
  -- end + grace; an event for a final window, or one final by the grace
  -- in force, is dropped there and counted late once.
  after_each(H.cleanup)
  local SIZE, STEP = 10, 5
  local GRACES = { false, 0, 3, 12, 0.5 }

  local function declare(p, grace)
    local s = p:stream("ev", { {"k","int"}, {"ts","int"}, {"v","int"} })
    local w = s:aggregate{ by = "k", window = runnel.hopping(SIZE, STEP, "ts"), grace = grace or nil, name = "w",
                           n = runnel.count(), hi = runnel.max("v") }
    return s, w
  end

  local function copy(m)
    local c = { max_ts = m.max_ts, late = m.late, nfinal = m.nfinal, win = {} }
    for key, e in pairs(m.win) do c.win[key] = { k = e.k, start = e.start, n = e.n, hi = e.hi, final = e.final } end
    return c
  end

  local function final_by(grace, start, max_ts)
    return grace and max_ts ~= nil and max_ts >= start + SIZE + math.ceil(grace)
  end

  local function apply(m, grace, ev)
    local dropped = false
    local starts = {}
    for start = (ev.ts // STEP) * STEP - SIZE + STEP, ev.ts, STEP do starts[#starts + 1] = start end
    for _, start in ipairs(starts) do
      local key = ev.k .. "@" .. start
      local e = m.win[key]
      if (e and e.final) or final_by(grace, start, m.max_ts) then
        dropped = true
      else
        e = e or { k = ev.k, start = start, n = 0 }
        m.win[key] = e
        e.n = e.n + 1
        if e.hi == nil or ev.v > e.hi then e.hi = ev.v end
      end
    end
    if dropped then m.late = m.late + 1 end
    if grace and (m.max_ts == nil or ev.ts > m.max_ts) then
      m.max_ts = ev.ts
      for _, e in pairs(m.win) do
        if not e.final and final_by(grace, e.start, m.max_ts) then e.final = true; m.nfinal = m.nfinal + 1 end
      end
    end
  end

  local function check(m, p, w, where)
    local got = {}
    for r in w:rows() do got[r.k .. "@" .. r.window_start] = { r.n, r.hi } end
    local want = {}
    for key, e in pairs(m.win) do want[key] = { e.n, e.hi } end
    assert.same(want, got, where)
    assert.equal(m.late, w:late(), where)
    assert.equal(m.nfinal, p:stats().final.w or 0, where)
  end

  for _, seed in ipairs{ 21, 2121, 777 } do
    it("agrees with it (seed " .. seed .. ")", function()
      math.randomseed(seed)
      local dir = H.tmpdir()
      local m = { late = 0, nfinal = 0, win = {} }
      for session = 1, 6 do
        local grace = GRACES[math.random(#GRACES)]
        local p = runnel.open(dir)
        local s, w = declare(p, grace)
        local where = ("seed %d session %d grace %s"):format(seed, session, tostring(grace))
        check(m, p, w, where)
        for _ = 1, 15 do
          local work = copy(m)
          local rollback = math.random() < 0.2
          p:begin()
          for _ = 1, math.random(1, 6) do
            local ev = { k = math.random(1, 3), ts = session * 8 + math.random(-25, 25), v = math.random(1, 100) }
            if math.random() < 0.2 then ev.ts = (ev.ts // SIZE) * SIZE end -- on a window bound
            s:insert(ev)
            apply(work, grace, ev)
          end
          if rollback then p:rollback() else p:commit(); m = work end
          check(m, p, w, where)
        end
        p:close()
      end
    end)
  end
end)

describe("grace given as a string", function()
  -- Regression: grace = "5" was refused with "grace must be a number of
  -- seconds >= 0, got 5", which reads as if 5 were refused.
  it("says the value was a string", function()
    local p = runnel.open()
    local s = p:stream("ev", { {"ts","int"} })
    assert.equal('ev.aggregate: grace must be a finite number of seconds >= 0, got string "5"',
                 H.error_of(function() s:aggregate{ window = runnel.tumbling(10, "ts"), grace = "5", n = runnel.count() } end))
    p:close()
  end)
end)
