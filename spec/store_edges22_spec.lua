-- Permanent stores (round 22): each defect found has its regression test
-- here.
local runnel = require "runnel"
local H = require "helper"

describe("a store written by two store sinks", function()
  after_each(H.cleanup)

  -- Regression: t and u both kept in store "s" were taken: u's delete of
  -- its row 1 took t's row 1 out of the store, which then held 0 rows of
  -- t's 1, without a word.
  it("is refused naming both relations, the first sink's rows kept", function()
    local dir = H.tmpdir() .. "/st"
    local p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", { {"id","int"}, {"v","string"}, key = "id" })
    local u = p:table("u", { {"id","int"}, {"v","string"}, key = "id" })
    t:sink(runnel.store("s"))
    local ok, err = pcall(function() u:sink(runnel.store("s")) end)
    assert.is_false(ok)
    assert.matches('store_edges22_spec.lua:%d+: u: store "s": the store sink of relation t declared in this pipeline '
                   .. "writes it already %(a store keeps one relation's rows: name another store%)", tostring(err))
    ok, err = pcall(function() t:sink(runnel.store("s")) end)
    assert.is_false(ok)
    assert.matches('t: store "s": the store sink of this relation declared in this pipeline writes it already',
                   tostring(err), 1, true)
    t:insert{ id = 1, v = "from t" }
    u:insert{ id = 1, v = "from u" }
    u:delete{ id = 1 }
    p:close()
    local a = runnel.attach(dir, "s")
    assert.same({ id = 1, v = "from t" }, a:get(1))
    a:close()
  end)
end)
