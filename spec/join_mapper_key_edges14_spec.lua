-- What a join's mapper may return as a key (DESIGN §3, §9): a scalar for
-- a one-column key, or a table giving each key column by position or by
-- name. A table that lacks a key column, or has a field naming none, is
-- an error naming the join, the mapper's file:line, the right relation
-- and the column; the group rolls back. Before: a silent miss (or a
-- match that ignored the stray field).
local runnel = require "runnel"
local H = require "helper"

describe("a mapper returning a key table", function()
  local p, L, R, C, j, mapper_line
  local function join_with(mapper, right)
    mapper_line = debug.getinfo(mapper, "S").linedefined
    return L:join(right or R, { mapper = mapper, name = "j" })
  end
  local function where() return ("spec/join_mapper_key_edges14_spec.lua:%d"):format(mapper_line) end
  before_each(function()
    p = runnel.open()
    L = p:table("L", { {"id","int"}, {"k","any"}, key = "id" })
    R = p:table("R", { {"id","int"}, {"name","string"}, key = "id" })
    C = p:table("C", { {"a","int"}, {"b","string"}, {"name","string"}, key = { "a", "b" } })
    R:insert{ id = 7, name = "seven" }
    C:insert{ a = 1, b = "x", name = "one-x" }
  end)
  after_each(function() p:close() end)

  local function refused(k)
    p:begin()
    L:insert{ id = 100, k = 7 }
    local err = H.error_of(L.insert, L, { id = 1, k = k })
    assert.is_false(p:in_group()) -- the whole group rolled back
    assert.equal(0, L:count())
    assert.equal(0, j:count())
    L:insert{ id = 2, k = 7 } -- the pipeline goes on
    assert.equal(1, j:count())
    L:delete{ id = 2 }
    return err
  end

  it("refuses a table without the key column (one-column key)", function()
    j = join_with(function(l) return l.k end)
    assert.equal(('j: mapper (%s) returned a key without column "id" of R'):format(where()), refused({}))
  end)

  it("refuses a field that names no key column", function()
    j = join_with(function(l) return l.k end)
    assert.equal(('j: mapper (%s) returned a key with field "bogus", which names no key column of R'):format(where()),
                 refused({ id = 7, bogus = 1 }))
    assert.equal(('j: mapper (%s) returned a key with field "bogus", which names no key column of R'):format(where()),
                 refused({ bogus = 7 }))
    assert.equal(('j: mapper (%s) returned a key with field 2, which names no key column of R'):format(where()),
                 refused({ 7, 2 }))
    assert.equal(('j: mapper (%s) returned a key with field "name", which names no key column of R'):format(where()),
                 refused({ id = 7, name = "seven" })) -- a column, but not of the key
  end)

  it("refuses a composite key missing a column, by position or by name", function()
    j = join_with(function(l) return l.k end, C)
    local ok = { a = 1, b = "x" }
    p:begin()
    L:insert{ id = 100, k = ok }
    local err = H.error_of(L.insert, L, { id = 1, k = { a = 1 } })
    assert.equal(('j: mapper (%s) returned a key without column "b" of C'):format(where()), err)
    assert.is_false(p:in_group())
    assert.equal(('j: mapper (%s) returned a key without column "b" of C'):format(where()),
                 H.error_of(L.insert, L, { id = 1, k = { 1 } }))
    assert.equal(0, j:count())
  end)

  it("still takes every documented shape", function()
    j = join_with(function(l) return l.k end)
    L:insert{ id = 1, k = 7 }
    L:insert{ id = 2, k = { 7 } }
    L:insert{ id = 3, k = { id = 7 } }
    L:insert{ id = 4, k = { 7.0 } }
    L:insert{ id = 5, k = 8 } -- no such right row: no match
    L:insert{ id = 6, k = { id = runnel.null } } -- a null key part: no match
    assert.equal(4, j:count())
    local L2 = p:table("L2", { {"id","int"}, {"k","any"}, key = "id" })
    local meta = setmetatable({}, { __index = { a = 1, b = "x" } }) -- read through __index
    local jc = L2:join(C, { mapper = function(l) return l.id == 13 and meta or l.k end, name = "jc" })
    L2:insert{ id = 10, k = { 1, "x" } }
    L2:insert{ id = 11, k = { a = 1, b = "x" } }
    L2:insert{ id = 12, k = { 1, b = "x" } }
    L2:insert{ id = 13, k = 0 }
    assert.equal(4, jc:count())
  end)
end)
