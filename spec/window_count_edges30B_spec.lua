-- Hopping windows of a float time whose size is just under 1024 steps
-- (round 30B). The declaration allows size/step up to 1024, and the
-- aggregate kept room for 1024 windows per event; but with the size a
-- hair under 1024 steps, float rounding puts some event times in 1025
-- windows: the 1025th key was written past the end of its array, and the
-- group failed with "a group key could not be decoded" (or worse, memory
-- was overwritten). The array now has room for them, and a key past it
-- is refused, never written.
local runnel = require "runnel"
local H = require "helper"

-- The windows the aggregate gives ts when size is no multiple of step
-- (core/aggregate_apply.c, float_windows): k from floor((ts - size) /
-- step) + 1 to floor(ts / step), less a window whose end is not past ts.
local function windows(size, step, ts)
  local out = {}
  for k = math.floor((ts - size) / step) + 1, math.floor(ts / step) do
    if k * step + size > ts then out[#out + 1] = k * step end
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
    { 102.39999999999999, 0.1, 1000011.1 },
    { 1.0239999999999998, 0.001, 1e9 },
  } do
    local size, step, ts = case[1], case[2], case[3]
    it(("count ts = %.17g in each of its 1025 windows (size %.17g, step %.17g)"):format(ts, size, step), function()
      assert.is_true(size / step <= 1024)         -- a declaration the aggregate accepts
      local want = {}
      for _, start in ipairs(windows(size, step, ts)) do want[#want + 1] = ("%.17g 1"):format(start) end
      assert.equal(1025, #want)
      local out, err, code = child(size, step, ts)
      assert.equal(0, code, err)
      assert.equal("", err)
      assert.equal(table.concat(want, "\n") .. "\n", out)
    end)
  end
end)
