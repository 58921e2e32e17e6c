-- key_text_edges29_spec.lua — a float key in a message is written as Lua
-- writes the number: 0.0, -0.0 and 7.0 came out as "0", "-0" and "7",
-- which hid that the key column is a float (and a -0.0 looked like a
-- typo). -0.0 and 0.0 are one key; the message shows the one given.
local runnel = require "runnel"
local H = require "spec.helper"

describe("a float key in a message (29)", function()
  local p, t
  before_each(function()
    p = runnel.open()
    t = p:table("t", { { "id", "float" }, { "v", "int" }, key = "id" })
    p:batch(function()
      for _, id in ipairs{ 0.0, 7.0, 1e20, 5.5, math.huge } do t:insert{ id = id, v = 1 } end
    end)
  end)
  after_each(function() p:close() end)

  for _, c in ipairs{ { 0.0, "0.0" }, { -0.0, "-0.0" }, { 7.0, "7.0" }, { 1e20, "1e+20" }, { 5.5, "5.5" },
                      { math.huge, "inf" } } do
    it(("writes %s for a key that exists"):format(c[2]), function()
      local err = H.error_of(p.batch, p, function() t:insert{ id = c[1], v = 2 } end)
      assert.equal(("t: insert: a row with key (id = %s) already exists"):format(c[2]), err)
      assert.equal(1, t:get(c[1]).v)
    end)
  end

  it("writes -7.0 for a key that does not", function()
    assert.equal("t: update: no row with key (id = -7.0)",
                 H.error_of(p.batch, p, function() t:update{ id = -7.0, v = 2 } end))
  end)
end)
