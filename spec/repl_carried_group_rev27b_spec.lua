-- FAILS (3 of 3; all pass on 17d9ddd^): the REPL browsing a state beside a
-- sync = false writer of its own process, the writer opening a group
-- (w:begin()) after carrying groups from earlier lines. Since 3694578 the
-- refresh before each line no longer commits the carried groups, and
-- inside the writer's open group neither does a read through runnel.attach
-- (test_attach_carry: it reads what LMDB holds), nor does
-- rn_carried_groups count them (carrying_writer wants the writer idle), so
-- the catalogue's committed count is kept: the REPL shows the state as it
-- was before the carried groups until the writer's group ends. Before,
-- each line committed them, so a group begun later read them.
local H = require "helper"
local bin = H.runnel_bin

describe("the REPL beside its own sync = false writer inside a group", function()
  after_each(H.cleanup)

  it("counts while the writer is inside a group with carried groups before it", function()
    local dir = H.browsed_state()
    local out, err, code = H.sh(("%s repl %s/st"):format(bin, dir), table.concat({
      "w = runnel.open{ path = p:path(), sync = false }",
      'a = w:table("alpha", { {"id","int"}, key = "id" })',
      "a:insert{ id = 2 }",
      "a:insert{ id = 3 }",
      "w:begin()",
      "alpha:count()",
    }, "\n") .. "\n")
    assert.equal(0, code, err)
    assert.equal("3\n", out)
  end)

  it(".tables while the writer is inside a group with carried groups before it", function()
    local dir = H.browsed_state()
    local out, err, code = H.sh(("%s repl %s/st"):format(bin, dir), table.concat({
      "w = runnel.open{ path = p:path(), sync = false }",
      'a = w:table("alpha", { {"id","int"}, key = "id" })',
      "a:insert{ id = 2 }",
      "a:insert{ id = 3 }",
      "w:begin()",
      ".tables",
    }, "\n") .. "\n")
    assert.equal(0, code, err)
    assert.matches("alpha +| table +| +3", out)
  end)
end)

describe("the REPL beside its own sync = false writer inside a group: rows", function()
  after_each(H.cleanup)
  it("a row the writer committed (carried) before its open group", function()
    local dir = H.browsed_state()
    local out, err, code = H.sh(("%s repl %s/st"):format(bin, dir), table.concat({
      "w = runnel.open{ path = p:path(), sync = false }",
      'a = w:table("alpha", { {"id","int"}, key = "id" })',
      "a:insert{ id = 2 }",
      "a:insert{ id = 3 }",
      "w:begin()",
      "alpha:get(3) ~= nil",
    }, "\n") .. "\n")
    assert.equal(0, code, err)
    assert.equal("true\n", out)
  end)
end)
