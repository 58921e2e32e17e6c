-- The REPL closes the pipelines it opened when it ends (Ctrl-D, .quit,
-- os.exit) and when .open makes another state p: a group left open on a
-- state was rolled back without a word, and the user, who saw each change
-- accepted, found none of them in the state. It is still rolled back (a
-- group is whole or not at all), and now the REPL says so with how many
-- changes went; a temporary pipeline, removed whole, and an empty group
-- say nothing.
local H = require "helper"

local bin = H.runnel_bin

describe("the REPL leaving a group open on a state", function()
  after_each(H.cleanup)

  local function setup()
    local dir = H.tmpdir()
    H.write(dir .. "/decl.lua", 't = p:table("t", { {"id","int"}, key = "id" })\n')
    return dir
  end

  it("at its end says the group was rolled back, with its changes", function()
    local dir = setup()
    for _, last in ipairs{ "", ".quit\n", "os.exit(0)\n" } do
      local out, err, code = H.sh(("%s repl %s/st %s/decl.lua"):format(bin, dir, dir),
        ".watch off\np:begin()\nt:insert{ id = 1 }\nt:insert{ id = 2 }\n" .. last)
      assert.are.same({ ("watch off\nnote: the group open on the state at %s/st was rolled back: 2 changes "
        .. "discarded (p:commit() keeps a group)\n"):format(dir), "", 0 }, { out, err, code })
    end
    local out = H.sh(("%s query %s/st t --format csv"):format(bin, dir))
    assert.are.equal("id\n", out) -- rolled back, as before
  end)

  it("at .open of another state says so too", function()
    local dir = setup()
    local out, err, code = H.sh(("%s repl %s/st %s/decl.lua"):format(bin, dir, dir),
      (".watch off\np:begin()\nt:insert{ id = 1 }\n.open %s/other\n"):format(dir))
    assert.are.same({ ("watch off\nnote: the group open on the state at %s/st was rolled back: 1 change discarded "
      .. "(p:commit() keeps a group)\n`p` is the state at %s/other\n"):format(dir, dir), "", 0 }, { out, err, code })
  end)

  it("says nothing for a committed group, an empty one, or a temporary pipeline", function()
    local dir = setup()
    local out, err, code = H.sh(("%s repl %s/st %s/decl.lua"):format(bin, dir, dir),
      ".watch off\np:begin()\nt:insert{ id = 1 }\np:commit()\np:begin()\n")
    assert.are.same({ "watch off\n1\n", "", 0 }, { out, err, code }) -- 1: commit's group number
    out, err, code = H.sh(bin, 't = p:table("t", { {"id","int"}, key = "id" })\n.watch off\np:begin()\nt:insert{ id = 1 }\n')
    assert.are.same({ "watch off\n", "", 0 }, { out, err, code })
    out = H.sh(("%s query %s/st t --format csv"):format(bin, dir))
    assert.are.equal("id\n1\n", out)
  end)
end)
