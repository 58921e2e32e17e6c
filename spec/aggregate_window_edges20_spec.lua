-- A window made final calls a user aggregate's result once more (its row
-- stays as that result makes it; its state is dropped). A result function
-- that raises there must roll the group back naming the relation and the
-- aggregate, and keep the committed state: checked, it does (a pin, not a
-- fix).
local runnel = require "runnel"

describe("a user aggregate over a window made final", function()
  it("rolls the group back when result raises, naming the relation, the aggregate and the line", function()
    local p = runnel.open()
    local s = p:stream("clicks", { {"player","int"}, {"ts","int"} })
    local boom = false
    local w = s:aggregate{ by = "player", window = runnel.tumbling(10, "ts"), grace = 0, name = "pm",
      n = runnel.agg{ init = function() return 0 end, add = function(st) return st + 1 end,
        result = function(st) if boom and st == 2 then error("result at the end") end return st end } }
    s:insert{ player = 1, ts = 1 }
    s:insert{ player = 1, ts = 2 }
    boom = true
    local ok, err = pcall(function() s:insert{ player = 1, ts = 15 } end) -- makes window 0 final
    assert.is_false(ok)
    assert.matches('^[^:]+:%d+: pm: aggregate "n": result: [^:]+:%d+: result at the end$', tostring(err))
    assert.equal(2, p:seq())
    assert.equal(0, p:stats().final.pm)
    boom = false -- a read computes the rows' results too
    local rows = {}
    for r in w:rows() do rows[#rows + 1] = { r.window_start, r.n } end
    assert.same({ { 0, 2 } }, rows)
    s:insert{ player = 1, ts = 15 }
    assert.equal(1, p:stats().final.pm)
    rows = {}
    for r in w:rows() do rows[#rows + 1] = { r.window_start, r.n } end
    assert.same({ { 0, 2 }, { 10, 1 } }, rows)
    p:close()
  end)
end)
