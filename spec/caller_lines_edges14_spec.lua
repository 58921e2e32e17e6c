-- Argument errors name the caller's file:line, not a line of runnel.lua
-- (runnel skips its own frames): an index's range options, p.close with
-- another self, an attached handle's rows with another self.
local runnel = require "runnel"

local HERE = "spec/caller_lines_edges14_spec.lua"

-- The error fn raises, which must name the line fn is defined on.
local function raised(fn)
  local ok, err = pcall(fn)
  assert.is_false(ok)
  return err, ("%s:%d: "):format(HERE, debug.getinfo(fn, "S").linedefined)
end

describe("argument errors", function()
  local p, t, ix, a
  before_each(function()
    p = runnel.open()
    t = p:table("t", { {"id","int"}, {"v","int"}, key = "id" })
    ix = t:index{ "v", name = "ix" }
    a = runnel.attach((p:path()), "t")
  end)
  after_each(function() a:close(); p:close() end)

  it("of idx:range name the caller's line", function()
    local err, at = raised(function() for _ in ix:range{ offset = 1.5 } do end end)
    assert.equal(at .. "ix: range: offset must be an integer, got 1.5", err)
    err, at = raised(function() for _ in ix:range{ limit = "ten" } do end end)
    assert.equal(at .. 'ix: range: limit must be an integer, got string "ten"', err)
    err, at = raised(function() for _ in ix:range(5) do end end)
    assert.equal(at .. "ix: range: expects { from =, to =, offset =, limit = }, got number", err)
    t:insert{ id = 1, v = 1 }; t:insert{ id = 2, v = 2 }; t:insert{ id = 3, v = 3 }
    local got = {}
    for r in ix:range{ offset = 1.0, limit = 1 } do got[#got + 1] = r.id end -- a whole float is an integer
    assert.same({ 2 }, got)
  end)

  it("of p.close and att.rows with another self name the caller's line", function()
    local err, at = raised(function() p.close(5) end)
    assert.equal(at .. "close: expects a runnel.Pipeline as self (call it as x:close(…)), got number", err)
    err, at = raised(function() p.close(t) end)
    assert.equal(at .. "close: expects a runnel.Pipeline as self (call it as x:close(…)), got userdata", err)
    err, at = raised(function() a.rows(5) end)
    assert.equal(at .. "bad argument #1 to 'rows' (runnel.Attached expected, got number)", err)
  end)
end)
