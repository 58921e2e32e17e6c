-- `runnel repl STATE` browses an existing state read-only. Calling a
-- method that changes it (players:insert, p:begin, p:table, players:join)
-- printed Lua's "attempt to call a nil value (method 'insert')", which
-- does not say the view is read-only nor how to write. Each such method
-- now says so, naming the relation, the state and the way to open it for
-- writing; the state is left as it was, and a name no pipeline or relation
-- has is still nil.
local H = require "helper"
local runnel = require "runnel"

local bin = H.runnel_bin

local function make_state(dir)
  local p = runnel.open(dir)
  local t = p:table("players", { {"id","int"}, {"name","string"}, key = "id" })
  t:insert{ id = 1, name = "ann" }
  p:close()
end

describe("the REPL browsing a state read-only", function()
  after_each(H.cleanup)

  it("says a method that would change it is read-only, and changes nothing", function()
    local dir = H.tmpdir()
    local st = dir .. "/st"
    make_state(st)
    local before = H.read(st .. "/data.mdb")
    local out, err, code = H.sh(("%s repl %s"):format(bin, st), table.concat({
      'players:insert{ id = 2, name = "bob" }',
      "p:begin()",
      'p:table("t", { {"id","int"}, key = "id" })',
      "players:delete(1)",
      "players.nosuch",
      "players:count()",
      "p:seq()",
    }, "\n") .. "\n")
    assert.are.equal(0, code, err)
    local open = (" the REPL browses the state at %s (to change it, open it with a script that declares its relations: "
      .. ".open %s FILE.lua)\n"):format(st, st)
    assert.are.equal(table.concat({
      'error: stdin:1: insert: relation "players" is read-only:' .. open,
      "error: stdin:1: begin: the state is read-only:" .. open,
      "error: stdin:1: table: the state is read-only:" .. open,
      'error: stdin:1: delete: relation "players" is read-only:' .. open,
      "nil\n",
      "1\n",
      "1\n",
    }), out)
    assert.are.equal(before, H.read(st .. "/data.mdb"))
  end)

  it("quotes a path with a space as .open takes it", function()
    local dir = H.tmpdir()
    local st = dir .. "/a state"
    make_state(st)
    local out, err, code = H.sh(("%s repl '%s'"):format(bin, st), "p:commit()\n")
    assert.are.equal(0, code, err)
    assert.are.equal(('error: stdin:1: commit: the state is read-only: the REPL browses the state at %s (to change '
      .. 'it, open it with a script that declares its relations: .open "%s" FILE.lua)\n'):format(st, st), out)
  end)

  it("still completes a browsed relation's own methods only", function()
    local dir = H.tmpdir()
    local st = dir .. "/st"
    make_state(st)
    local out, err, code = H.sh(("%s repl %s"):format(bin, st),
      'local c = require("runnel.repl").complete("players:", 8) table.sort(c) print(table.concat(c, " "))\n')
    assert.are.equal(0, code, err)
    assert.are.equal("count get name rows schema\n", out)
  end)
end)
