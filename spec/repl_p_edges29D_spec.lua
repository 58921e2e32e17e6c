-- `p` in the REPL is a global the user may set to anything. After
-- `p = 5` (or true, or a function) the next line ended the whole session,
-- exit 1, with "runnel: lua/repl.lua:207: attempt to index a number value
-- (local 'p')": the REPL asked p for its stats outside any pcall. And
-- .tables, .schema and .watch REL raised inside the REPL's own code after
-- `p = nil` ("error: lua/repl.lua:319: attempt to index a nil value").
-- The session goes on, and those commands say what p holds. The same for
-- a library global the REPL's own code called (print = nil, pcall = nil):
-- it keeps the ones it started with.
local H = require "helper"

local bin = H.runnel_bin

local function says(cmd, what)
  return ("error: .%s reads the pipeline p, and p is %s (.open DIR makes the state at DIR p; p = runnel.open() a "
    .. "temporary one)\n"):format(cmd, what)
end

describe("the REPL after p is set to something else", function()
  for _, case in ipairs{ { "5", "a number value" }, { "true", "a boolean value" },
                         { "function() end", "a function value" }, { "{}", "a table value" },
                         { "setmetatable({}, { __index = function() error('boom') end })", "a table value" } } do
    it(("goes on after p = %s, a line that fails included"):format(case[1]), function()
      local out, err, code = H.sh(bin, table.concat({
        "p = " .. case[1],
        "1 + 1",
        'error("mine")',
        "print('still here')",
        ".tables",
      }, "\n") .. "\n")
      assert.are.same({ "2\nerror: stdin:1: mine\nstill here\n" .. says("tables", case[2]), "", 0 }, { out, err, code })
    end)
  end

  it("says what p holds for .tables, .schema and .watch REL after p = nil; .watch off still works", function()
    local out, err, code = H.sh(bin, "t = p:table('t', { {'id','int'}, key = 'id' })\np = nil\n.tables\n.schema t\n"
      .. ".watch t\n.watch off\nt:count()\n")
    assert.are.same({ says("tables", "nil") .. says("schema", "nil") .. says("watch", "nil") .. "watch off\n0\n", "", 0 },
      { out, err, code })
  end)

  it("takes a pipeline again as p, and its groups roll back as before", function()
    local out, err, code = H.sh(bin, table.concat({
      "q = p",
      "p = 5",
      "p = q",
      "t = p:table('t', { {'id','int'}, key = 'id' })",
      ".watch off",
      "p:begin()",
      "t:insert{ id = 1 }",
      "t:insert{ id = 'x' }",
      "p:in_group()",
    }, "\n") .. "\n")
    assert.are.equal(0, code, err)
    assert.are.equal('watch off\nerror: stdin:1: t: column "id": expected int, got string  (group rolled back: 1 earlier '
      .. "change discarded)\nfalse\n", out)
  end)

  for _, name in ipairs{ "print", "tostring", "pcall", "type", "io", "require", "getmetatable" } do
    it(("goes on after %s = nil: the REPL keeps the library it started with"):format(name), function()
      local out, err, code = H.sh(bin, name .. " = nil\n1 + 1\nerror('mine')\n.watch off\n40 + 2\n")
      assert.are.same({ "2\nerror: stdin:1: mine\nwatch off\n42\n", "", 0 }, { out, err, code })
    end)
  end
end)
