-- runnel verify noted that a cdc relation and a stream join (with a table)
-- "hold state as of group N, not M: rebuilt at the next open"
-- when the last groups did not touch them: they keep no state, nothing is
-- rebuilt, and the note stayed after every open — a false alarm that hid
-- the real notes among it.
local runnel = require "runnel"
local H = require "helper"

describe("runnel verify of relations that keep no state", function()
  after_each(H.cleanup)

  it("notes nothing for a cdc relation or a stream join the last groups did not touch", function()
    local dir = H.tmpdir() .. "/st"
    local p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
    local u = p:table("u", { {"k","int"}, key = "k" })
    local ev = p:stream("ev", { {"k","int"} })
    t:cdc{}
    ev:join(t, { on = "k" })
    t:insert{ k = 1, v = 1 }
    ev:insert{ k = 1 }
    u:insert{ k = 1 } -- groups that touch neither
    u:insert{ k = 2 }
    p:close()
    local out, err, code = H.sh(("%s verify %s"):format(H.runnel_bin, dir))
    assert.same({ "", 0 }, { err, code }, out)
    assert.matches("whole (0 damaged, 0 notes)", out, 1, true)
  end)
end)
