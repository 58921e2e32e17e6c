-- Windows and aggregates at their edges (adversarial review): event times
-- that have no window, window bounds past the int range, window sizes that
-- are not finite, min/max of NaN.
local runnel = require "runnel"
local H = require "helper"

-- Runs body (Lua text, with `runnel` and a pipeline `p` open) in a child
-- `runnel run`, so that a crash fails this spec instead of ending it.
-- Returns the child's stdout, stderr and exit code.
local function child(body)
  local dir = H.tmpdir()
  local script = dir .. "/w.lua"
  H.write(script, 'local runnel = require "runnel"\nlocal p = runnel.open()\n' .. body .. "\np:close()\n")
  return H.sh(("timeout 20 %s run %s"):format(H.runnel_bin, script))
end

-- A stream ev(k, ts, v) with a tumbling (or hopping) window aggregate over
-- it, then one insert of ts (Lua text), printing "ok <count>" or the error.
local function one_event(ts_type, window, ts)
  return child(([[
local s = p:stream("ev", { {"k","string"}, {"ts","%s"}, {"v","int"} })
local w = s:aggregate{ by = "k", window = %s, n = runnel.count() }
local ok, err = pcall(function() s:insert{ k = "a", ts = %s, v = 1 } end)
print(ok and ("ok " .. w:count()) or err)
for r in w:rows() do print(r.window_start, r.window_end) end]]):format(ts_type, window, ts))
end

describe("window edges", function()
  teardown(H.cleanup)

  it("refuses an event time with no window (NaN, infinite, too far for exact window numbers), naming the column", function()
    for _, case in ipairs{
      { "0/0", 'the event time column "ts" is NaN' },
      { "math.huge", 'the event time column "ts" is inf' },
      { "-math.huge", 'the event time column "ts" is -inf' },
      { "1e20", 'the event time column "ts" is 1e+20: too far from 0 for windows of step 10' },
    } do
      for _, window in ipairs{ 'runnel.tumbling(10, "ts")', 'runnel.hopping(10, 5, "ts")' } do
        local out, err, code = one_event("float", window, case[1])
        assert.equal(0, code, err)
        if window:find("hopping") then case[2] = case[2]:gsub("step 10", "step 5") end
        assert.matches("w.lua:5: ev.aggregate: " .. case[2], out, 1, true)
      end
    end
  end)

  it("keeps float event times near the exact limit in their windows", function()
    local out, err, code = one_event("float", 'runnel.tumbling(10, "ts")', "2^52 * 10 + 20")
    assert.equal(0, code, err)
    assert.equal("ok 1\n4.5035996273705e+16\t4.5035996273705e+16\n", out)
  end)

  it("refuses an int event time whose window passes the int range instead of wrapping it", function()
    local cases = {
      { "math.maxinteger", 'runnel.tumbling(10, "ts")', "9223372036854775807: its window of size 10 passes the 64-bit int range" },
      { "math.mininteger", 'runnel.tumbling(10, "ts")', "-9223372036854775808: its window of size 10 passes the 64-bit int range" },
      { "math.mininteger + 2", 'runnel.hopping(10, 5, "ts")', "-9223372036854775806: its window of size 10 passes the 64-bit int range" },
      { "math.maxinteger - 3", 'runnel.hopping(10, 5, "ts")', "9223372036854775804: its window of size 10 passes the 64-bit int range" },
    }
    for _, case in ipairs(cases) do
      local out, err, code = one_event("int", case[2], case[1])
      assert.equal(0, code, err)
      assert.matches('w.lua:5: ev.aggregate: the event time column "ts" is ' .. case[3], out, 1, true)
    end
    -- the windows that fit are kept, to the last one
    local out, err, code = one_event("int", 'runnel.tumbling(10, "ts")', "math.mininteger + 8")
    assert.equal(0, code, err)
    assert.equal("ok 1\n-9223372036854775800\t-9223372036854775790\n", out)
    out, err, code = one_event("int", 'runnel.tumbling(10, "ts")', "9223372036854775797 - 10")
    assert.equal(0, code, err)
    assert.equal("ok 1\n9223372036854775780\t9223372036854775790\n", out)
  end)

  it("keeps the group whole after a refused event time", function()
    local p = runnel.open()
    local s = p:stream("ev", { {"k","string"}, {"ts","float"} })
    local w = s:aggregate{ by = "k", window = runnel.tumbling(10, "ts"), n = runnel.count() }
    s:insert{ k = "a", ts = 1 }
    p:begin()
    s:insert{ k = "a", ts = 2 }
    assert.matches('ev.aggregate: the event time column "ts" is NaN', H.error_of(s.insert, s, { k = "b", ts = 0 / 0 }))
    assert.is_false(p:in_group())                      -- the group was rolled back
    assert.same({ { k = "a", window_start = 0.0, window_end = 10.0, n = 1 } }, (function()
      local out = {}
      for r in w:rows() do out[#out + 1] = r end
      return out
    end)())
    p:close()
  end)

  it("names the input file and line of an event time refused in p:run, keeping the groups before it", function()
    local dir = H.tmpdir()
    local input = dir .. "/in.ndjson"
    H.write(input, '{"rel":"ev","op":"insert","row":{"k":"a","ts":1}}\n{"rel":"ev","op":"insert","row":{"k":"a","ts":2}}\n'
                   .. '{"rel":"ev","op":"insert","row":{"k":"a","ts":3}}\n{"rel":"ev","op":"insert","row":{"k":"b","ts":1e300}}\n')
    local p = runnel.open()
    local s = p:stream("ev", { {"k","string"}, {"ts","float"} })
    local w = s:aggregate{ by = "k", window = runnel.tumbling(10, "ts"), n = runnel.count() }
    local ok, err = pcall(p.run, p, runnel.ndjson_source(input), { batch = 2 })
    assert.is_false(ok)
    assert.equal(input .. ':4: ev.aggregate: the event time column "ts" is 1e+300: too far from 0 for windows of step 10 '
                 .. "(window numbers past 2^53 are not exact)", err)
    local rows = {}
    for r in w:rows() do rows[#rows + 1] = r.k .. " " .. r.n end
    assert.same({ "a 2" }, rows)                         -- the first group; the second rolled back
    p:close()
  end)

  it("refuses window sizes and steps that are not finite, or past what an int time column holds", function()
    local p = runnel.open()
    local s = p:stream("ev", { {"ts","float"}, {"t","int"} })
    assert.matches("ev.aggregate: a window needs a finite size and step",
                   H.error_of(function() s:aggregate{ window = runnel.tumbling(math.huge, "ts"), n = runnel.count() } end), 1, true)
    assert.matches("ev.aggregate: a window needs a finite size and step",
                   H.error_of(function() s:aggregate{ window = runnel.hopping(math.huge, math.huge, "ts"), n = runnel.count() } end), 1, true)
    assert.equal("ev.aggregate: grace must be a finite number of seconds >= 0, got nan",
                 H.error_of(function() s:aggregate{ window = runnel.tumbling(10, "ts"), grace = 0 / 0, n = runnel.count() } end))
    assert.equal("ev.aggregate: grace must be a finite number of seconds >= 0, got -1",
                 H.error_of(function() s:aggregate{ window = runnel.tumbling(10, "ts"), grace = -1, n = runnel.count() } end))
    assert.matches("ev.aggregate: an int time column takes window sizes and steps up to 2^62",
                   H.error_of(function() s:aggregate{ window = runnel.tumbling(2^63, "t"), n = runnel.count() } end), 1, true)
    p:close()
  end)
end)

describe("grace over int event times past 2^53 (nanoseconds)", function()
  it("drops as late only events whose window is final, to the nanosecond", function()
    local p = runnel.open()
    local s = p:stream("ev", { {"k","string"}, {"ts","int"} })
    local w = s:aggregate{ by = "k", window = runnel.tumbling(1000000000, "ts"), grace = 0, n = runnel.count() }
    local base = 1700000000000000000
    s:insert{ k = "a", ts = base + 999999990 }
    s:insert{ k = "a", ts = base + 999999999 }          -- 9 ns later, the same window: not late
    s:insert{ k = "a", ts = base + 1000000000 }         -- the next window: the first is final now
    s:insert{ k = "a", ts = base + 999999995 }          -- late
    local rows = {}
    for r in w:rows() do rows[#rows + 1] = r.window_start .. " " .. r.n end
    assert.same({ "1700000000000000000 2", "1700000001000000000 1" }, rows)
    assert.equal(1, w:late())
    assert.equal(1, p:stats().final["ev.aggregate"])
    p:close()
  end)

  it("gives random late events at 1.7e18 what it gives them at 0, through rollbacks", function()
    local function run(base, seed)
      math.randomseed(seed)
      local p = runnel.open()
      local s = p:stream("ev", { {"k","int"}, {"ts","int"} })
      local w = s:aggregate{ by = "k", window = runnel.hopping(10, 5, "ts"), grace = 3, n = runnel.count() }
      local now = 0
      for _ = 1, 60 do
        pcall(p.batch, p, function()
          for _ = 1, math.random(1, 6) do
            now = now + math.random(0, 3)
            s:insert{ k = math.random(1, 2), ts = base + now - (math.random() < 0.3 and math.random(0, 20) or 0) }
          end
          if math.random(8) == 1 then error("rolled back") end
        end)
      end
      local out = {}
      for r in w:rows() do out[#out + 1] = ("%d %d %d"):format(r.k, r.window_start - base, r.n) end
      table.sort(out)
      out[#out + 1] = ("late %d final %d"):format(w:late(), p:stats().final["ev.aggregate"])
      p:close()
      return out
    end
    for seed = 1, 5 do assert.same(run(0, seed), run(1700000000000000000, seed)) end
  end)

  it("keeps windows next to the int range's end exact", function()
    local p = runnel.open()
    local s = p:stream("ev", { {"k","string"}, {"ts","int"} })
    local w = s:aggregate{ by = "k", window = runnel.tumbling(10, "ts"), grace = 5, n = runnel.count() }
    s:insert{ k = "a", ts = math.maxinteger - 30 }      -- ..777: [..770, ..780)
    s:insert{ k = "a", ts = math.maxinteger - 24 }      -- ..783: [..780, ..790)
    s:insert{ k = "a", ts = math.maxinteger - 35 }      -- ..772: ..783 < ..780 + 5, not late
    s:insert{ k = "a", ts = math.maxinteger - 22 }      -- ..785: ..770 is final now
    s:insert{ k = "a", ts = math.maxinteger - 36 }      -- ..771: late
    local rows = {}
    for r in w:rows() do rows[#rows + 1] = r.window_start .. " " .. r.n end
    assert.same({ "9223372036854775770 2", "9223372036854775780 2" }, rows)
    assert.equal(1, w:late())
    p:close()
  end)
end)

describe("aggregate edges", function()
  it("names the aggregate and the column of a NaN refused by min or max", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"f","float", null = true}, key = "id" })
    t:aggregate{ low = runnel.min("f") }
    t:insert{ id = 1, f = 1.5 }
    assert.equal('t.aggregate: min "low" of column "f" is NaN: NaN has no place among min and max',
                 H.error_of(function() t:update{ id = 1, f = 0 / 0 } end))
    assert.equal(1.5, t:get(1).f)
    p:close()
  end)
end)

describe("aggregate by a float column", function()
  it("refuses a NaN group value naming the column, windowed or not, and rolls the group back", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"f","float", null = true}, key = "id" })
    local a = t:aggregate{ by = "f", n = runnel.count() }
    t:insert{ id = 1, f = 1.5 }
    assert.equal('t.aggregate: by column "f" is NaN: NaN has no place in a group key',
                 H.error_of(function() t:insert{ id = 2, f = 0 / 0 } end))
    assert.equal(1, t:count())
    assert.equal(1, a:count())
    local s = p:stream("s", { {"k","float"}, {"ts","int"} })
    s:aggregate{ by = "k", window = runnel.tumbling(10, "ts"), n = runnel.count() }
    assert.equal('s.aggregate: by column "k" is NaN: NaN has no place in a group key',
                 H.error_of(function() s:insert{ k = 0 / 0, ts = 1 } end))
    local u = p:table("u", { {"id","int"}, {"f","float"}, key = "id" })
    u:insert{ id = 1, f = 0 / 0 }                        -- declared over a table holding NaN: refused as well
    assert.equal('u.aggregate: by column "f" is NaN: NaN has no place in a group key',
                 H.error_of(function() u:aggregate{ by = "f", n = runnel.count() } end))
    p:close()
  end)
end)

describe("runnel.agg edges", function()
  it("names the aggregate and the function that failed, and the column of a value it cannot keep", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"v","int"}, key = "id" })
    local mode
    t:aggregate{ n = runnel.count(), u = runnel.agg{
      init = function() if mode == "init" then error("init boom", 0) end return 0 end,
      add = function(st, row) if mode == "add" then return print end return st + row.v end,
      remove = function(st, row) return st - row.v end,
      result = function(st) if mode == "result" then return { f = print } end return st end } }
    t:insert{ id = 1, v = 1 }
    t:delete{ id = 1 }                                   -- the group empties: the next insert inits again
    mode = "init"
    assert.equal('t.aggregate: aggregate "u": init: init boom', H.error_of(t.insert, t, { id = 2, v = 1 }))
    mode = "add"
    assert.equal('t.aggregate: aggregate "u": add: column "u": expected a storable value, got function',
                 H.error_of(t.insert, t, { id = 2, v = 1 }))
    mode = "result"
    assert.equal('t.aggregate: aggregate "u": result: column "u": expected a storable value, got function',
                 H.error_of(t.insert, t, { id = 2, v = 1 }))
    assert.equal(0, t:count())
    p:close()
  end)
end)
