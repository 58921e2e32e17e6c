-- .watch REL… split its argument at spaces, so a relation whose name
-- holds one ("a b", which names may: DESIGN 3) could not be watched: both
-- `.watch a b` and `.watch "a b"` were refused. Names are now read as
-- .open reads paths: "a b" (or 'a b') in quotes is one name; .schema
-- takes a quoted name too (it took the quotes for part of the name).
local H = require "helper"

local bin = H.runnel_bin

describe("the REPL's .watch of a relation whose name holds a space", function()
  it("takes the name in quotes, and prints only its groups", function()
    local out, err, code = H.sh(bin, table.concat({
      't = p:table("a b", { {"id","int"}, key = "id" })',
      'u = p:table("u", { {"id","int"}, key = "id" })',
      '.watch "a b"',
      "t:insert{ id = 1 }",
      "u:insert{ id = 1 }",
      ".watch u 'a b'",
      '.watch "a b',
      ".watch a b",
    }, "\n") .. "\n")
    assert.are.same({ table.concat({
      'watch "a b"',
      "a b · group 1",
      " row id | verb   | id",
      "--------+--------+----",
      "      1 | INSERT |  1",
      'watch "a b" u',
      'error: a name opened with " is not closed',
      'error: no relation "a" to watch (known: a b, u)',
    }, "\n") .. "\n", "", 0 }, { out, err, code })
  end)

  it("and .schema takes it quoted too, as well as unquoted", function()
    local out, err, code = H.sh(bin, table.concat({
      't = p:table("a b", { {"id","int"}, key = "id" })',
      '.schema "a b"',
      ".schema a b",
      '.schema "a b" c',
    }, "\n") .. "\n")
    local grid = 'table "a b"\n column | type | null | key | default\n--------+------+------+-----+---------\n'
      .. " id     | int  |      | key |\n"
    assert.are.same({ grid .. grid .. "error: .schema takes one NAME (quote a name with spaces)\n", "", 0 },
      { out, err, code })
  end)
end)
