-- Hopping windows of a float time whose size is just under 1024 steps
-- (round 30B). The declaration allows size/step up to 1024, and the
-- aggregate kept room for 1024 windows per event; but with the size a
-- hair under 1024 steps, float rounding puts some event times in 1025
-- windows [start, start + size): the 1025th key was written past the end
-- of its array, and the group failed with "a group key could not be
-- decoded" (or worse, memory was overwritten). The loop also put an event
-- in a window whose start, rounded, is after it, and missed the window
-- starting exactly at the event (ts / step, rounded, fell just under that
-- window's index). Each event now goes in exactly the windows that hold
-- it, start <= ts < start + size.
local runnel = require "runnel"
local H = require "helper"

-- The windows [k*step, k*step + size) holding ts, in doubles.
local function holding(size, step, ts)
  local out = {}
  for k = math.floor((ts - size) / step), math.floor(ts / step) + 1 do
    local start = k * step
    if start <= ts and ts < start + size then out[#out + 1] = start end
  end
  return out
end

-- Runs the case in a child `runnel run`, so that memory overwritten fails
-- this spec instead of ending it.
local function child(size, step, ts)
  local dir = H.tmpdir()
  local script = dir .. "/w.lua"
  H.write(script, ([[
local runnel = require "runnel"
local p = runnel.open()
local s = p:stream("ev", { {"k","int"}, {"ts","float"} })
local w = s:aggregate{ by = "k", window = runnel.hopping(%.17g, %.17g, "ts"), n = runnel.count() }
local ok, err = pcall(function() s:insert{ k = 1, ts = %.17g } end)
if not ok then print(err) end
for r in w:rows() do print(("%%.17g %%d"):format(r.window_start, r.n)) end
p:close()
]]):format(size, step, ts))
  return H.sh(("timeout 60 %s run %s"):format(H.runnel_bin, script))
end

describe("hopping windows of a size just under 1024 steps", function()
  teardown(H.cleanup)

  for _, case in ipairs{
    { 102.39999999999999, 0.1, 1000011.1 },     -- 1024 windows, and one more above ts by rounding
    { 1.0239999999999998, 0.001, 1e9 },         -- 1025 windows that each hold ts
  } do
    local size, step, ts = case[1], case[2], case[3]
    it(("puts ts = %.17g in the windows holding it (size %.17g, step %.17g)"):format(ts, size, step), function()
      assert.is_true(size / step <= 1024)         -- a declaration the aggregate accepts
      local want = {}
      for _, start in ipairs(holding(size, step, ts)) do want[#want + 1] = ("%.17g 1"):format(start) end
      assert.is_true(#want >= 1024)
      local out, err, code = child(size, step, ts)
      assert.equal(0, code, err)
      assert.equal("", err)
      assert.equal(table.concat(want, "\n") .. "\n", out)
    end)
  end

  it("puts an event in the window that starts exactly at it", function()
    local p = runnel.open()
    local s = p:stream("ev", { {"k","int"}, {"ts","float"} })
    local w = s:aggregate{ by = "k", window = runnel.hopping(1, 0.3, "ts"), n = runnel.count() }
    local ts = -29762 * 0.3                     -- -8928.6000000000004: ts / 0.3 rounds under -29762
    assert.equal(ts, holding(1, 0.3, ts)[4])    -- the fourth window [ts, ts + 1) holds it
    s:insert{ k = 1, ts = ts }
    local starts = {}
    for r in w:rows() do starts[#starts + 1] = r.window_start; assert.equal(1, r.n) end
    assert.same(holding(1, 0.3, ts), starts)
    assert.equal(4, #starts)
    p:close()
  end)
end)
