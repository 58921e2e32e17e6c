-- .watch takes a relation name in quotes since 6ce0ded ("a b"; "on", which
-- is otherwise the mode), but its answer still listed the names bare and
-- joined by spaces: the names "a b" and u echoed as "watch a b u", three
-- names, and the relation on as "watch on", the mode. The echo now writes
-- each name as .watch takes it.
local H = require "helper"

local bin = H.runnel_bin

describe("the REPL's .watch answer", function()
  it("quotes a name with a space, a quote, or the name of a mode", function()
    local out, err, code = H.sh(bin, table.concat({
      't1 = p:table("a b", { {"id","int"}, key = "id" })',
      't2 = p:table("u", { {"id","int"}, key = "id" })',
      't3 = p:table("on", { {"id","int"}, key = "id" })',
      [[t4 = p:table('say "hi"', { {"id","int"}, key = "id" })]],
      ".watch u 'a b'",
      '.watch "on"',
      [[.watch 'say "hi"' u]],
      ".watch on",
    }, "\n") .. "\n")
    assert.are.same({ table.concat({
      'watch "a b" u',
      'watch "on"',
      [[watch 'say "hi"' u]],
      "watch on",
    }, "\n") .. "\n", "", 0 }, { out, err, code })
  end)
end)
