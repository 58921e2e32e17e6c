-- A method called with a dot instead of a colon (round 22): the mistake
-- every Lua user makes once, told the same way by every method.
local runnel = require "runnel"
local H = require "helper"

describe("a method called as t.method{…}", function()
  local p, t
  before_each(function()
    p = runnel.open()
    t = p:table("t", { {"id","int"}, key = "id" })
  end)
  after_each(function() p:close() end)

  -- Regression: t.insert{ id = 1 } said "bad argument #1 to 'insert'
  -- (runnel.Relation expected, got table)", where t.get(1) said to call it
  -- as x:get(…); p.commit(5) said "core_commit".
  it("names the method and says to call it with a colon", function()
    local calls = { insert = function() t.insert{ id = 1 } end, update = function() t.update{ id = 1 } end,
                    delete = function() t.delete{ id = 1 } end, upsert = function() t.upsert{ id = 1 } end }
    for m, call in pairs(calls) do
      assert.matches(("misuse_edges22_spec.lua:%%d+: %s: expects a runnel.Relation as self %%(call it as x:%s%%(…%%)%%), "
                      .. "got table"):format(m, m), H.message_of(call))
    end
    assert.matches("misuse_edges22_spec.lua:%d+: insert: expects a runnel.Relation as self %(call it as x:insert%(…%)%), got table",
                   H.message_of(function() t.insert{ id = 1 } end))
    assert.matches("commit: expects a runnel.Pipeline as self (call it as x:commit(…)), got number",
                   H.message_of(function() p.commit(5) end), 1, true)
    assert.matches("flush: expects a runnel.Pipeline as self (call it as x:flush(…)), got no value",
                   H.message_of(function() p.flush() end), 1, true)
    assert.equal(0, t:count()) -- nothing applied
  end)

  it("through an expression (t[m]{…}), where no name is known, says so without one", function()
    assert.matches("misuse_edges22_spec.lua:%d+: expects a runnel.Relation as self %(call its methods as x:method%(…%)%), got table",
                   H.message_of(function() local m = "insert"; t[m]{ id = 1 } end))
  end)
end)
