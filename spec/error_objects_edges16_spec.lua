-- An error object with a __tostring raised from a callback: the message
-- says what its __tostring gives, as lua5.4 prints it, after the relation
-- and the callback. Before, it said only the type ("t: sink: table"), or,
-- from a scan, "error in scan": the message of every library that raises
-- error objects was lost. A __tostring that raises, or returns no string,
-- still gives the type; the group is rolled back either way.
local runnel = require "runnel"
local H = require "helper"

local function told(text)
  return setmetatable({}, { __tostring = function() return text end })
end

describe("an error object with __tostring raised from", function()
  after_each(H.cleanup)

  local function fresh()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"a","int", null = true}, key = "id" })
    local u = p:table("u", { {"uid","int"}, key = "uid" })
    t:insert{ id = 1, a = 1 }
    u:insert{ uid = 1 }
    return p, t, u
  end

  local CALLBACKS = {
    sink = function(t, _, raise) t:sink(function() raise() end) end,
    filter = function(t, _, raise) t:filter(function() raise() end):sink(function() end) end,
    map = function(t, _, raise) t:map(function() raise() end, { {"id","int"}, key = "id" }):sink(function() end) end,
    mapper = function(t, u, raise) t:join(u, { mapper = function(r) raise(r.id) end, kind = "left" }) end,
    lookup = function(t, _, raise, p)
      local l = p:lookup("l", { {"k","int"}, key = "k", source = function() raise() end })
      t:join(l, { on = "a", kind = "left", name = "tl" })
    end,
  }

  for name, hook in pairs(CALLBACKS) do
    it(("a %s says what __tostring gives; the group rolls back"):format(name), function()
      local p, t, u = fresh()
      local armed = false
      hook(t, u, function() if armed then error(told("custom told")) end return true end, p)
      armed = true
      local ok, err = pcall(function() p:batch(function() t:insert{ id = 2, a = 7 } end) end)
      armed = false
      assert.is_false(ok)
      assert.equal("string", type(err))
      assert.matches("custom told", err, 1, true)
      assert.is_nil(t:get(2))
      assert.is_false(p:in_group())
      p:close()
    end)
  end

  it("a scan says what __tostring gives, at the caller's line", function()
    local p, t = fresh()
    local ok, err = pcall(function() t:scan(function() error(told("custom told")) end) end)
    assert.is_false(ok)
    assert.matches("error_objects_edges16_spec%.lua:%d+: custom told$", err)
    p:close()
  end)

  it("a __tostring that raises, or gives no string, gives the type", function()
    local p, t = fresh()
    for _, obj in ipairs{ setmetatable({}, { __tostring = function() error("refused") end }),
                          setmetatable({}, { __tostring = function() return 42 end }) } do
      t:sink(function() error(obj) end)
      local ok, err = pcall(function() t:insert{ id = 3 } end)
      assert.is_false(ok)
      assert.matches("t: sink: table", err, 1, true)
      assert.is_nil(t:get(3))
      p:close()
      p, t = fresh()
    end
    p:close()
  end)
end)
