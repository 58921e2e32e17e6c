-- p:begin() twice (issue 10, defect 11): the second call is refused and says
-- the open group stays open; that group can still be committed or rolled
-- back, and a call that succeeds afterwards leaves no stale message.
local runnel = require "runnel"
local H = require "helper"

describe("begin twice", function()
  local dir, p, t
  before_each(function()
    dir = H.tmpdir()
    p = runnel.open(dir)
    t = p:table("t", { {"k","int"}, key = "k" })
  end)
  after_each(function()
    if p then p:close() end
    H.cleanup()
  end)

  it("is refused, saying the open group stays open", function()
    p:begin()
    t:insert{ k = 1 }
    assert.equal("begin: a group is already open; it stays open", H.error_of(p.begin, p))
    assert.is_true(p:in_group())
    t:insert{ k = 2 }
    assert.equal(1, p:commit())
    p:close()
    p = runnel.open(dir)
    t = p:table("t", { {"k","int"}, key = "k" })
    assert.equal(1, p:seq())
    assert.equal(2, t:count())
  end)

  it("leaves the open group to be rolled back", function()
    t:insert{ k = 1 }
    p:begin()
    t:insert{ k = 2 }
    assert.equal("begin: a group is already open; it stays open", H.error_of(p.begin, p))
    p:rollback()
    assert.is_false(p:in_group())
    assert.is_nil(t:get(2))
    assert.equal(1, t:count())
  end)

  it("from a batch: the batch raises and the outer group stays open", function()
    p:begin()
    t:insert{ k = 1 }
    assert.matches("a group is already open; it stays open", H.error_of(p.batch, p, function() end), 1, true)
    assert.is_true(p:in_group())
    assert.equal(1, p:commit())
    assert.equal(1, t:count())
  end)
end)
