-- A control character escaped as its decimal code (\27) and followed by a
-- digit read as another code: "\27" then "1" showed as \271. Before a digit
-- the code takes three digits, as Lua's %q writes it (\0271), in grids and
-- in runnel inspect.
local runnel = require "runnel"
local H = require "helper"

describe("a control character before a digit", function()
  after_each(H.cleanup)

  it("shows as three digits in a grid, so the next digit stays its own", function()
    local g = runnel.grid({ "s" }, { { "\0271m" }, { "\1" .. "2\0" }, { "\0279" } })
    -- before: \271m, \12\0 and \279: other codes than the cell's
    assert.equal(table.concat({ " s", "---------", " \\0271m", " \\0012\\0", " \\0279" }, "\n"), g)
    assert.equal(1, load("return '\\0271m'")():find("\27", 1, true)) -- as Lua reads it back
  end)

  it("in runnel inspect too", function()
    local dir = H.tmpdir() .. "/st"
    local p = runnel.open{ path = dir, notes = false }
    p:table("a\0271", { {"i\0012","int"}, key = "i\0012" }):insert{ ["i\0012"] = 1 }
    p:close()
    local out, err, code = H.sh(("%s inspect %s"):format(H.runnel_bin, dir))
    assert.same({ "", 0 }, { err, code })
    assert.matches(" a\\0271   | table |    1 |       2 | i\\0012 int key\n", out, 1, true)
  end)
end)
