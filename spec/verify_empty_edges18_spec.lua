-- runnel verify of a state whose index, top or distinct holds nothing (its
-- table empty) sorted the ids it found with qsort(NULL, 0, …), which C
-- does not allow (glibc declares the argument nonnull): under `make asan`
-- UBSan stopped verify there ("null pointer passed as argument 1"), so the
-- state could not be checked. Found by the API-sequence campaign.
local runnel = require "runnel"
local H = require "helper"

describe("runnel verify of relations that hold nothing", function()
  after_each(H.cleanup)

  it("says the state is whole", function()
    local dir = H.tmpdir() .. "/st"
    local p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", { {"id","int"}, {"g","int"}, {"sc","int"}, key = "id" })
    t:index{ "sc", "desc", name = "ix" }
    t:top{ n = 2, by = "g", order = { {"sc", "desc"} }, name = "tp" }
    t:select{ "g" }:distinct("d")
    t:insert{ id = 1, g = 1, sc = 1 }
    t:delete(1) -- emptied: the orders and the distinct's index held rows once
    p:close()
    local out, err, code = H.sh(("%s verify %s"):format(H.runnel_bin, dir))
    assert.same({ "", 0 }, { err, code }, out)
    assert.matches("whole", out, 1, true)
  end)
end)
