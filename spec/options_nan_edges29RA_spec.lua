-- A NaN given to an option checked without given() is said "nan" too
-- (review of round 29, A): 29A made given() say "nan", but the options whose
-- refusals show the value with tostring still said "-nan" (x86's 0/0 has
-- its sign set), one word for one NaN everywhere else.
local runnel = require "runnel"
local H = require "helper"

local N = 0 / 0

describe("an option given NaN outside given()", function()
  local p, t
  before_each(function()
    p = runnel.open()
    t = p:table("t", { {"id","int"}, {"v","int"}, key = "id" })
  end)
  after_each(function() p:close() end)

  -- Regression: each said "got -nan".
  it("is said nan by open, cdc, join, top and lookups", function()
    assert.equal("open: max_readers must be an integer from 1 to 65536 (LMDB's reader slots; 126 by default), got nan",
                 H.error_of(function() runnel.open{ max_readers = N } end))
    assert.equal('cdc: preimage must be false, true or "full", got nan', H.error_of(function() t:cdc{ preimage = N } end))
    assert.equal("cdc: postimage must be a boolean, got nan", H.error_of(function() t:cdc{ postimage = N } end))
    assert.equal('cdc: format must be "log", "debezium" or "flink", got nan', H.error_of(function() t:cdc{ format = N } end))
    assert.equal('join: kind must be "inner", "left" or "outer", got nan',
                 H.error_of(function() t:join(t, { on = "v", kind = N }) end))
    assert.equal('best: ties must be "row" (row numbers, equal values ordered by id), got nan',
                 H.error_of(function() t:top{ n = 1, order = { "v" }, ties = N, name = "best" } end))
    assert.equal('best: the direction of "v" must be "asc" or "desc", got nan',
                 H.error_of(function() t:top{ n = 1, order = { { "v", N } }, name = "best" } end))
    assert.equal("l: cache: size must be a whole number >= 1, got nan",
                 H.error_of(function()
                   p:lookup("l", { {"k","string"}, {"v","int"}, key = "k", source = function() end,
                                   cache = { ttl = 1, size = N } })
                 end))
  end)

  it("still shows other values as before", function()
    assert.equal('cdc: preimage must be false, true or "full", got half', H.error_of(function() t:cdc{ preimage = "half" } end))
    assert.equal('join: kind must be "inner", "left" or "outer", got 2', H.error_of(function() t:join(t, { on = "v", kind = 2 }) end))
  end)
end)
