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
