-- Names that become LMDB keys and database names (issue 10, defect 10):
-- past the limit they are refused with the real limit, never with a raw
-- LMDB code or a stack overflow.
local runnel = require "runnel"
local H = require "helper"

describe("names longer than LMDB keys allow", function()
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

  it("are refused for relations, saying the limit", function()
    local name = ("r"):rep(600)
    assert.equal(('relation name "%s…" is 600 bytes; the limit is 508'):format(("r"):rep(24)),
                 H.error_of(p.table, p, name, { {"k","int"}, key = "k" }))
    assert.matches("is 600 bytes; the limit is 508", H.error_of(p.stream, p, name, { {"k","int"} }), 1, true)
    assert.matches("the limit is 508", H.error_of(t.filter, t, function() return true end, name), 1, true)
    assert.matches("the limit is 508", H.error_of(t.aggregate, t, { by = "k", n = runnel.count(), name = name }), 1, true)
  end)

  it("work up to the limit, across a reopen", function()
    local name = ("r"):rep(508)
    local u = p:table(name, { {"k","int"}, key = "k" })
    u:insert{ k = 1 }
    local j = t:join(u, { on = "k", name = ("j"):rep(508) })
    t:insert{ k = 1 }
    assert.equal(1, j:count())
    p:close()
    p = runnel.open(dir)
    u = p:table(name, { {"k","int"}, key = "k" })
    assert.equal(1, u:count())
  end)

  it("are refused for stores, even of 16 MiB", function()
    assert.matches('t: store name "sss.*" is 600 bytes; the limit is 508',
                   H.error_of(t.sink, t, runnel.store(("s"):rep(600))))
    assert.matches("is 16777216 bytes; the limit is 508", H.error_of(t.sink, t, runnel.store(("s"):rep(16 << 20))), 1, true)
    t:sink(runnel.store(("s"):rep(508)))
    t:insert{ k = 1 }
    assert.equal(1, p:seq())
    p:close()
    p = nil
    local a = runnel.attach(dir, ("s"):rep(508))
    assert.same({ k = 1 }, a:get(1))
    a:close()
    assert.matches("is 600 bytes; the limit is 508", H.error_of(runnel.attach, dir, ("s"):rep(600)), 1, true)
  end)
end)
