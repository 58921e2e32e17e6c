-- Row ids (DESIGN §4; table.c invariants ROWID-1..4).
local runnel = require "runnel"
local H = require "helper"

describe("row ids", function()
  local p
  before_each(function() p = runnel.open() end)
  after_each(function() p:close() end)

  it("count up from 1 per keyed table and come back for a re-inserted key (ROWID-1)", function()
    local t = p:table("t", { {"k","string"}, key = "k" })
    local log = H.record(t)
    t:insert{ k = "a" }
    t:insert{ k = "b" }
    t:delete{ k = "a" }
    t:insert{ k = "c" }
    t:insert{ k = "a" }
    assert.same({ "INSERT 1", "INSERT 2", "DELETE 1", "INSERT 3", "INSERT 1" }, H.verbs(log))
    assert.equal(1, t:id_of("a"))
    assert.is_nil(t:id_of("zz"))
  end)

  it("are allocated per relation", function()
    local a = p:table("a", { {"k","int"}, key = "k" })
    local b = p:table("b", { {"k","int"}, key = "k" })
    a:insert{ k = 10 }
    b:insert{ k = 10 }
    a:insert{ k = 11 }
    assert.equal(2, a:id_of(11))
    assert.equal(1, b:id_of(10))
  end)

  it("stay with the row through updates and upserts", function()
    local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
    local log = H.record(t)
    t:insert{ k = 5, v = 1 }
    t:update{ k = 5, v = 2 }
    t:upsert{ k = 5, v = 3 }
    t:upsert{ k = 6, v = 3 }
    assert.same({ "INSERT 1", "UPDATE 1", "UPDATE 1", "INSERT 2" }, H.verbs(log))
  end)

  it("are not used up by a rolled-back group (ROWID-2)", function()
    local t = p:table("t", { {"k","int"}, key = "k" })
    p:begin()
    t:insert{ k = 1 }
    t:insert{ k = 2 }
    p:rollback()
    t:insert{ k = 3 }
    assert.equal(1, t:id_of(3))
    assert.is_nil(t:id_of(1))
  end)

  it("give every keyless insert a new id and match deletes to the smallest equal id (ROWID-3)", function()
    local t = p:table("log", { {"msg","string"}, {"n","int", null = true} })
    local log = H.record(t)
    t:insert{ msg = "x" }
    t:insert{ msg = "x" }
    t:insert{ msg = "y", n = 1 }
    t:delete{ msg = "x" }
    t:update({ msg = "y", n = 1 }, { msg = "y", n = 2 })
    assert.same({ "INSERT 1", "INSERT 2", "INSERT 3", "DELETE 1", "UPDATE 3" }, H.verbs(log))
    assert.same({ msg = "y", n = 1 }, log[5][4])
    assert.equal('log: delete: no stored row equals the given row', H.error_of(t.delete, t, { msg = "nope" }))
    assert.equal(2, t:count())
  end)

  it("treat a missing nullable column as null when matching keyless rows", function()
    local t = p:table("log", { {"msg","string"}, {"n","int", null = true} })
    t:insert{ msg = "x", n = runnel.null }
    t:delete{ msg = "x" }
    assert.equal(0, t:count())
  end)

  it("number stream events 1, 2, 3 across groups", function()
    local s = p:stream("ev", { {"kind","string"} })
    local log = H.record(s)
    s:insert{ kind = "a" }
    p:batch(function() s:insert{ kind = "b" }; s:insert{ kind = "c" } end)
    assert.same({ "INSERT 1", "INSERT 2", "INSERT 3" }, H.verbs(log))
  end)

  it("persist across a reopen, with tombstones", function()
    local dir = H.tmpdir()
    local q = runnel.open(dir)
    local t = q:table("t", { {"k","int"}, key = "k" })
    local s = q:stream("s", { {"x","int"} })
    t:insert{ k = 1 }
    t:insert{ k = 2 }
    t:delete{ k = 1 }
    s:insert{ x = 1 }
    q:close()
    q = runnel.open(dir)
    t = q:table("t", { {"k","int"}, key = "k" })
    s = q:stream("s", { {"x","int"} })
    local log, slog = H.record(t), H.record(s)
    t:insert{ k = 3 }
    t:insert{ k = 1 }
    s:insert{ x = 2 }
    assert.same({ "INSERT 3", "INSERT 1" }, H.verbs(log))
    assert.same({ "INSERT 2" }, H.verbs(slog))
    q:close()
    H.cleanup()
  end)
end)
