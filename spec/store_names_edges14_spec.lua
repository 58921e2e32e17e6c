-- Relations and permanent stores share one namespace (runnel.attach,
-- runnel.inspect and p:drop take either by name, a store first): a store
-- may take its own relation's name, or a name no relation has. Before, a
-- store named like another relation was taken, and runnel.attach of that
-- relation read the store instead.
local runnel = require "runnel"
local H = require "helper"

local function quiet(dir) return runnel.open{ path = dir, notes = false } end

describe("a store named like another relation", function()
  after_each(H.cleanup)

  it("is refused, naming both, and the sink is not added", function()
    local dir = H.tmpdir()
    local p = quiet(dir)
    local t = p:table("t", { {"id","int"}, {"v","int"}, key = "id" })
    local u = p:table("u", { {"id","int"}, {"w","string"}, key = "id" })
    assert.equal('u: store "t": a relation of this state is named "t" (relations and stores share names: '
                 .. 'a store takes its own relation\'s name or one no relation has)',
                 H.error_of(u.sink, u, runnel.store("t")))
    t:insert{ id = 1, v = 10 }
    u:insert{ id = 2, w = "x" }
    local a = runnel.attach(dir, "t") -- the table, not a store
    assert.same({ id = 1, v = 10 }, a:get(1))
    assert.is_nil(a:get(2))
    a:close()
    p:close()
  end)

  it("is refused when the state holds the relation, declared or not yet", function()
    local dir = H.tmpdir()
    local p = quiet(dir)
    p:table("t", { {"id","int"}, key = "id" }):insert{ id = 1 }
    p:close()
    p = quiet(dir)
    local u = p:table("u", { {"id","int"}, key = "id" })
    assert.matches('u: store "t": a relation of this state is named "t"', H.error_of(u.sink, u, runnel.store("t")),
                   1, true)
    p:close()
  end)
end)

describe("a relation named like a store that keeps another relation", function()
  after_each(H.cleanup)

  it("is refused, in the same run and after a reopen", function()
    local dir = H.tmpdir()
    local p = quiet(dir)
    local u = p:table("u", { {"id","int"}, key = "id" })
    u:sink(runnel.store("s"))
    u:insert{ id = 1 }
    local msg = 'relation "s": the state has a store "s" that keeps relation "u" (relations and stores share names: '
                .. 'name the relation otherwise, or drop the store first)'
    assert.equal(msg, H.error_of(p.table, p, "s", { {"id","int"}, key = "id" }))
    assert.equal(msg, H.error_of(p.stream, p, "s", { {"id","int"} }))
    assert.equal(msg, H.error_of(u.filter, u, function() return true end, "s"))
    assert.is_nil(p:relation("s"))
    p:close()
    p = quiet(dir)
    assert.equal(msg, H.error_of(p.table, p, "s", { {"id","int"}, key = "id" }))
    p:drop("s") -- the store: its name is free again
    p:table("s", { {"id","int"}, key = "id" }):insert{ id = 5 }
    local a = runnel.attach(dir, "s")
    assert.same({ id = 5 }, a:get(5))
    a:close()
    p:close()
  end)
end)

describe("a store named like its own relation", function()
  after_each(H.cleanup)

  it("still works, across reopens (it holds that relation's rows)", function()
    local dir = H.tmpdir()
    for round = 1, 2 do
      local p = quiet(dir)
      local t = p:table("totals", { {"k","string"}, {"v","int"}, key = "k" })
      t:sink(runnel.store("totals"))
      t:upsert{ k = "a", v = round }
      local a = runnel.attach(dir, "totals")
      assert.same({ k = "a", v = round }, a:get("a"))
      a:close()
      p:close()
    end
  end)
end)
