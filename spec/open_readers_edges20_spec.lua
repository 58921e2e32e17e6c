-- runnel.open{ max_readers = N } (round 20): LMDB's reader slots, 126 by
-- default, shared by every process on a state; each read held open (a
-- rows() iteration kept between groups, an attachment) takes one. A state
-- made with more holds more reads at once; a bad value is refused.
local runnel = require "runnel"
local H = require "helper"

describe("runnel.open max_readers", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  local function iterations(p, t, n)
    local held, err = {}, nil
    for i = 1, n do
      local ok, f, st, c = pcall(t.rows, t)
      local why = f
      if ok then ok, why = pcall(f, st, c) end -- started: its read is open
      if not ok then err = why break end
      held[i] = st
    end
    return held, err
  end

  it("gives a new state more reader slots", function()
    local p = runnel.open{ path = dir .. "/s", max_readers = 400 }
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:insert{ k = 1 }
    local held, err = iterations(p, t, 300)
    assert.is_nil(err)
    assert.equal(300, #held)
    held = nil
    collectgarbage()
    p:close()
  end)

  it("without it, the 126 slots run out and the error names the option", function()
    local p = runnel.open{ path = dir .. "/s" }
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:insert{ k = 1 }
    local held, err = iterations(p, t, 300)
    assert.is_true(#held < 126)
    assert.matches("MDB_READERS_FULL", err)
    assert.matches("unless opened with max_readers", err, 1, true)
    held = nil
    collectgarbage()
    p:close()
  end)

  it("refuses what is not an integer from 1 to 65536", function()
    for _, bad in ipairs{ 0, -1, 65537, 1.5, "8" } do
      local ok, err = pcall(runnel.open, { path = dir .. "/s", max_readers = bad })
      assert.is_false(ok)
      assert.matches("open: max_readers must be an integer from 1 to 65536 (LMDB's reader slots; 126 by default), got "
                     .. tostring(bad), err, 1, true)
    end
  end)
end)
