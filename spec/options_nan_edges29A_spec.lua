-- A NaN given as an option is said "nan" (round 29, A), as a NaN value is
-- elsewhere (json_decode_numbers): Lua's tostring(0/0) says "-nan" on x86,
-- a sign a NaN does not mean.
local runnel = require "runnel"
local H = require "helper"

describe("an option given NaN", function()
  local p, t, s
  before_each(function()
    p = runnel.open()
    t = p:table("t", { {"id","int"}, {"v","int"}, key = "id" })
    s = p:stream("s", { {"ts","int"} })
  end)
  after_each(function() p:close() end)

  it("names it nan in top's n", function()
    assert.equal("best: n must be a positive integer, got nan",
                 H.error_of(function() t:top{ n = 0 / 0, order = { "v" }, name = "best" } end))
    assert.equal("best: n must be a positive integer, got nan",
                 H.error_of(function() t:top{ n = -(0 / 0), order = { "v" }, name = "best" } end))
  end)

  it("names it nan in an index's range", function()
    local ix = t:index{ "v", name = "ix" }
    assert.equal("ix: range: limit must be an integer, got nan", H.error_of(function() ix:range{ limit = 0 / 0 } end))
    assert.equal("ix: range: offset must be an integer, got nan", H.error_of(function() ix:range{ offset = 0 / 0 } end))
  end)

  it("names it nan in an aggregate's grace", function()
    assert.equal("w: grace must be a finite number of seconds >= 0, got nan",
                 H.error_of(function() s:aggregate{ window = runnel.tumbling(10, "ts"), grace = 0 / 0,
                                                    n = runnel.count(), name = "w" } end))
  end)
end)
