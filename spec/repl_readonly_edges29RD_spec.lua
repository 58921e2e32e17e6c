-- The REPL browsing a state (runnel repl STATE) answers a method the view
-- lacks with why (lua/repl.lua read_only). Every method of a pipeline or
-- relation was said to be missing because the state is read-only, a
-- reading one too: players:id_of(1) said 'relation "players" is
-- read-only ... (to change it, ...)' and p:stats() 'the state is
-- read-only', though neither changes anything. A reading method now says
-- what the view offers; the binding's own methods (_declare) stay nil.
local H = require "helper"
local runnel = require "runnel"

local bin = H.runnel_bin

describe("the REPL browsing a state read-only", function()
  after_each(H.cleanup)

  it("says a reading method it lacks is not offered, not that the state is read-only", function()
    local dir = H.tmpdir()
    local st = dir .. "/st"
    local p = runnel.open(st)
    p:table("players", { {"id","int"}, {"name","string"}, key = "id" }):insert{ id = 1, name = "ann" }
    p:close()
    local out, err, code = H.sh(("%s repl %s"):format(bin, st), table.concat({
      "players:id_of(1)",
      "p:stats()",
      "players:insert{ id = 2, name = 'bob' }",
      "print(players._count, p._declare)",
    }, "\n") .. "\n")
    assert.are.equal(0, code, err)
    local rest = (" the REPL browses the state at %s read-only (for every method, open it with a script that declares "
      .. "its relations: .open %s FILE.lua)\n"):format(st, st)
    assert.are.equal(table.concat({
      'error: stdin:1: id_of: browsed relation "players" offers name, schema, rows, get and count:' .. rest,
      "error: stdin:1: stats: the browsed state offers relations, relation, path, seq and close:" .. rest,
      ('error: stdin:1: insert: relation "players" is read-only: the REPL browses the state at %s (to change it, '
        .. "open it with a script that declares its relations: .open %s FILE.lua)\n"):format(st, st),
      "nil\tnil\n",
    }), out)
  end)
end)
