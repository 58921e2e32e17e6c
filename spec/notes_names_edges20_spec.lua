-- A note (printed on stderr, or handed to on_note) naming a relation
-- declared with a control character in its name (round 20): errors escape
-- it now (names_escaped_edges20), notes printed it raw, a newline breaking
-- the note's line.
local runnel = require "runnel"
local H = require "spec.helper"

describe("a note naming a relation with a control character", function()
  after_each(H.cleanup)

  it("escapes it as messages do", function()
    local dir = H.tmpdir() .. "/st"
    local p = runnel.open{ path = dir, notes = false }
    p:table("a\nb", { {"id","int"}, key = "id" })
    p:close()
    local notes = {}
    p = runnel.open{ path = dir, notes = function(line) notes[#notes + 1] = line end }
    p:table("c", { {"id","int"}, key = "id" })
    p:close()
    local text = table.concat(notes, "\n")
    assert.matches("a\\nb", text, 1, true)
    assert.is_nil(text:find("a\nb", 1, true))
  end)

  it("in a note of the core (a column added)", function()
    local dir = H.tmpdir() .. "/st"
    local p = runnel.open{ path = dir, notes = false }
    p:table("a\nb", { {"id","int"}, key = "id" })
    p:close()
    local notes = {}
    p = runnel.open{ path = dir, notes = function(line) notes[#notes + 1] = line end }
    p:table("a\nb", { {"id","int"}, {"x\t","int", null = true}, key = "id" })
    p:close()
    assert.same({ 'a\\nb: added "x\\t" int = null' }, notes)
  end)
end)
