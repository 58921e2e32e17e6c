-- p:on_durable(fn): fn(seq) when the groups up to seq are durable: in LMDB and on disk (issue
-- 11: the moment an outbox delivers at). With sync after every commit;
-- with sync = false when the carried transaction commits.
local runnel = require "runnel"
local H = require "helper"

-- A pipeline whose hook records each seq and what a reader of the state
-- (runnel.attach: LMDB's committed data only) sees at that moment.
local function setup(opts)
  local dir = H.tmpdir()
  opts.path = dir
  local p = runnel.open(opts)
  local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
  t:sink(runnel.store("kept"))
  local heard = {}
  p:on_durable(function(seq)
    local att = runnel.attach(dir, "kept")
    local n = 0
    for _ in att:rows() do n = n + 1 end
    heard[#heard + 1] = ("%d:%d"):format(seq, n)
    att:close()
  end)
  return p, t, heard
end

describe("p:on_durable with sync", function()
  after_each(H.cleanup)

  it("is told after every commit, with the group already in LMDB", function()
    local p, t, heard = setup{ sync = true }
    t:insert{ k = 1, v = "a" }
    p:batch(function() t:insert{ k = 2, v = "b" }; t:insert{ k = 3, v = "c" } end)
    assert.same({ "1:1", "2:3" }, heard)
    p:close()
  end)

  it("is not told of a group that rolled back, nor twice of one", function()
    local p, t, heard = setup{ sync = true }
    t:insert{ k = 1, v = "a" }
    assert.is_false(pcall(t.insert, t, { k = 1, v = "dup" }))
    p:flush()
    t:insert{ k = 2, v = "b" }
    p:close()
    assert.same({ "1:1", "2:2" }, heard)
  end)

  it("runs where tables cannot be changed, and may read them", function()
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, key = "k" })
    local seen
    p:on_durable(function(seq)
      local ok, err = pcall(t.insert, t, { k = 99 })
      seen = { seq, p:seq(), ok, err:match("cannot be changed") ~= nil }
    end)
    t:insert{ k = 1 }
    assert.same({ 1, 1, false, true }, seen)
    assert.is_nil(t:get(99))
    p:close()
  end)

  it("needs a function", function()
    local p = runnel.open()
    assert.is_false(pcall(p.on_durable, p, 1))
    p:close()
  end)
end)

describe("p:on_durable with sync = false", function()
  after_each(H.cleanup)

  it("is told when the carried transaction commits: flush, close", function()
    local p, t, heard = setup{ sync = false }
    t:insert{ k = 1, v = "a" }
    t:insert{ k = 2, v = "b" }
    assert.same({}, heard) -- carried: committed to the caller, not yet in LMDB
    p:flush()
    assert.same({ "2:2" }, heard)
    p:flush() -- nothing new
    t:insert{ k = 3, v = "c" }
    p:close()
    assert.same({ "2:2", "3:3" }, heard)
  end)

  it("is told when the carry bounds commit it, and at a declaration", function()
    local p, t, heard = setup{ sync = false, carry = { groups = 2 } }
    t:insert{ k = 1, v = "a" }
    t:insert{ k = 2, v = "b" }
    assert.same({ "2:2" }, heard)
    t:insert{ k = 3, v = "c" }
    p:table("u", { {"k","int"}, key = "k" }) -- a declaration commits what is carried
    assert.same({ "2:2", "3:3" }, heard)
    p:close()
  end)

  it("is not told of carried groups a rollback keeps, until they commit", function()
    local p, t, heard = setup{ sync = false }
    t:insert{ k = 1, v = "a" }
    assert.is_false(pcall(t.insert, t, { k = 1, v = "dup" }))
    assert.same({}, heard)
    p:flush()
    assert.same({ "1:1" }, heard)
    p:close()
  end)
end)
