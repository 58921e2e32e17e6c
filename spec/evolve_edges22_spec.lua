-- Edges of schema evolution (round 22): each defect found has its
-- regression test here, named after what it guards.
local runnel = require "runnel"
local H = require "helper"

local open = H.open_noting

describe("renames that form a cycle", function()
  after_each(H.cleanup)

  local function stored(dir)
    local p = open(dir)
    local t = p:table("t", { {"id","int"}, {"a","string"}, {"b","string"}, {"c","string"}, key = "id" })
    t:insert{ id = 1, a = "A", b = "B", c = "C" }
    p:close()
  end

  local function refused(dir, declare)
    local p = open(dir)
    local ok, err = pcall(declare, p)
    p:close()
    assert.is_false(ok)
    return tostring(err)
  end

  local function unchanged(dir)
    local p = open(dir)
    local t = p:table("t", { {"id","int"}, {"a","string"}, {"b","string"}, {"c","string"}, key = "id" })
    assert.same({ id = 1, a = "A", b = "B", c = "C" }, t:get(1))
    p:close()
  end

  -- Regression: { "a", was = "b" }, { "b", was = "a" } (a swap) was taken
  -- without a word and did nothing (the state holds both names, as after
  -- a swap applied): the user's swap was lost, and one applied would be
  -- applied again at every open.
  it("a swap is refused naming the relation and the columns, the state kept", function()
    local dir = H.tmpdir()
    stored(dir)
    local err = refused(dir, function(p)
      p:table("t", { {"id","int"}, {"a","string", was = "b"}, {"b","string", was = "a"}, {"c","string"}, key = "id" })
    end)
    assert.matches('relation "t": columns "b" and "a" are renamed in a cycle (was)', err, 1, true)
    assert.matches("evolve_edges22_spec.lua:%d+:", err)
    unchanged(dir)
  end)

  it("a cycle of three, given through p:alter, is refused too", function()
    local dir = H.tmpdir()
    stored(dir)
    local err = refused(dir, function(p)
      p:alter("t", { rename = { a = "b", b = "c", c = "a" } })
      p:table("t", { {"id","int"}, {"a","string"}, {"b","string"}, {"c","string"}, key = "id" })
    end)
    assert.matches('relation "t": columns "%a" and "%a" and "%a" are renamed in a cycle', err)
    unchanged(dir)
  end)

  it("and on a new state, whatever the state holds", function()
    local dir = H.tmpdir()
    local err = refused(dir, function(p)
      p:table("t", { {"id","int"}, {"a","string", was = "b"}, {"b","string", was = "a"}, key = "id" })
    end)
    assert.matches('renamed in a cycle', err, 1, true)
  end)

  -- Regression: a was b, b was c over a state holding b and c refused b
  -- as a new column ("new column "b" string is not null and has no
  -- default"): b, renamed away to a, never took c's values.
  it("a chain that is no cycle (a was b, b was c) shifts the values, once", function()
    local dir = H.tmpdir()
    local p = open(dir)
    local t = p:table("t", { {"id","int"}, {"b","string"}, {"c","string"}, key = "id" })
    t:insert{ id = 1, b = "B", c = "C" }
    p:close()
    p = open(dir)
    t = p:table("t", { {"id","int"}, {"a","string", was = "b"}, {"b","string", was = "c"}, key = "id" })
    assert.same({ id = 1, a = "B", b = "C" }, t:get(1))
    p:close()
    p = open(dir) -- applied: the same declaration again changes nothing
    t = p:table("t", { {"id","int"}, {"a","string", was = "b"}, {"b","string", was = "c"}, key = "id" })
    assert.same({ id = 1, a = "B", b = "C" }, t:get(1))
    p:close()
  end)
end)
