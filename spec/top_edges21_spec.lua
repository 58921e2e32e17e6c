-- Edges of tops found in round 21, each fix with its test.
local runnel = require "runnel"
local H = require "helper"

describe("top{ n = … } given a string", function()
  -- Regression: n = "3" was refused with "n must be a positive integer,
  -- got 3", which reads as if 3 were refused; the message says it was a
  -- string.
  it("says the value was a string", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"v","int"}, key = "id" })
    assert.equal('board: n must be a positive integer, got string "3"',
                 H.error_of(function() t:top{ n = "3", order = { "v" }, name = "board" } end))
    assert.equal("board: n must be a positive integer, got 0",
                 H.error_of(function() t:top{ n = 0, order = { "v" }, name = "board" } end))
    p:close()
  end)
end)
