-- p:batch(fn): fn runs inside one group, which is the batch's (DESIGN §5,
-- §9). p:commit() and p:rollback() inside fn are refused with an error,
-- so the batch rolls back everything fn did; before, they ended the group
-- and fn's later changes were committed one by one although batch raised.
local runnel = require "runnel"
local H = require "helper"

describe("p:batch", function()
  local p, t
  local function ids() return H.ids_text(t) end
  before_each(function()
    p = runnel.open()
    t = p:table("t", { {"id","int"}, key = "id" })
  end)
  after_each(function() p:close() end)

  it("refuses p:commit() inside fn and rolls back all of fn's changes", function()
    local err = H.error_of(p.batch, p, function() t:insert{ id = 1 }; p:commit(); t:insert{ id = 2 } end)
    assert.equal("commit: inside p:batch(fn) the group is the batch's: it commits when fn returns; raise an error "
                 .. "in fn to roll it back", err)
    assert.equal("", ids())
    assert.equal(0, p:seq())
    assert.is_false(p:in_group())
  end)

  it("refuses p:rollback() inside fn, naming the caller's line", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(p.batch, p, function() t:insert{ id = 1 }; p:rollback(); t:insert{ id = 2 } end)
    assert.is_false(ok)
    assert.equal(("spec/batch_edges14_spec.lua:%d: rollback: inside p:batch(fn) the group is the batch's: it "
                  .. "commits when fn returns; raise an error in fn to roll it back"):format(line), err)
    assert.equal("", ids())
    assert.equal(0, p:seq())
  end)

  it("commits once when fn returns, even if fn caught a refused commit; commit works again after", function()
    assert.equal(1, p:batch(function()
      t:insert{ id = 1 }
      assert.is_false(pcall(p.commit, p))
      t:insert{ id = 2 }
    end))
    assert.equal("1,2", ids())
    p:begin(); t:insert{ id = 3 }; p:rollback()
    p:begin(); t:insert{ id = 4 }; p:commit()
    assert.equal("1,2,4", ids())
    assert.equal(2, p:seq())
  end)
end)
