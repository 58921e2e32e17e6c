-- Declarations, types, names and the conversions the schema drives (DESIGN §3).
local runnel = require "runnel"
local H = require "helper"

describe("declaring relations", function()
  local p
  before_each(function() p = runnel.open() end)
  after_each(function() p:close() end)

  it("accepts any UTF-8 column name everywhere", function()
    local t = p:table("odd", { {"@ID","int"}, {"MESSAGE.AMOUNT","float"}, {"SELECT","string"},
                               {"a b","bool", null = true}, {"Straße","string", null = true}, key = "@ID" })
    t:insert{ ["@ID"] = 1, ["MESSAGE.AMOUNT"] = 2.5, SELECT = "bar", ["Straße"] = "x" }
    assert.same({ ["@ID"] = 1, ["MESSAGE.AMOUNT"] = 2.5, SELECT = "bar", ["Straße"] = "x" }, t:get(1))
    assert.equal('odd: column "MESSAGE.AMOUNT": expected float, got string',
                 H.error_of(t.insert, t, { ["@ID"] = 2, ["MESSAGE.AMOUNT"] = "x", SELECT = "y" }))
  end)

  it("refuses duplicate column names", function()
    assert.equal('t: duplicate column name "a"',
                 H.error_of(p.table, p, "t", { {"a","int"}, {"a","string"} }))
  end)

  it("refuses unknown types and options with the column named", function()
    assert.equal('t: column "a": unknown type integer (int, float, string, bool, bytes, list, map, any or a column list)',
                 H.error_of(p.table, p, "t", { {"a","integer"} }))
    assert.equal('t: column "a": unknown option nullable',
                 H.error_of(p.table, p, "t", { {"a","int", nullable = true} }))
  end)

  it("refuses a key that is not a declared column, nullable, or not scalar", function()
    assert.equal('t: key column "x" is not a declared column',
                 H.error_of(p.table, p, "t", { {"a","int"}, key = "x" }))
    assert.equal('t: key column "a" cannot be nullable',
                 H.error_of(p.table, p, "t", { {"a","int", null = true}, key = "a" }))
    assert.equal('t: key column "a" has type list; keys are int, float, string, bool or bytes',
                 H.error_of(p.table, p, "t", { {"a","list"}, key = "a" }))
  end)

  it("refuses a stream with a key and a relation declared twice", function()
    assert.equal("s: a stream has no key", H.error_of(p.stream, p, "s", { {"a","int"}, key = "a" }))
    p:table("t", { {"a","int"}, key = "a" })
    assert.equal('relation "t" is already declared', H.error_of(p.table, p, "t", { {"a","int"}, key = "a" }))
  end)

  it("checks a default against its column", function()
    assert.equal('t: column "n": expected int, got string',
                 H.error_of(p.table, p, "t", { {"n","int", default = "zero"} }))
  end)

  it("reports the declared schema", function()
    local t = p:table("t", { {"id","int"}, {"n","int", default = 3}, {"s","string", null = true}, key = "id" })
    local s = t:schema()
    assert.equal("table", s.kind)
    assert.same({ "id" }, s.key)
    assert.same({ name = "n", type = "int", null = false, key = false, default = 3 }, s.columns[2])
  end)
end)

describe("values", function()
  local p, t
  before_each(function()
    p = runnel.open()
    t = p:table("v", { {"id","int"}, {"f","float", null = true}, {"b","bytes", null = true},
                       {"ok","bool", null = true}, {"l","list", null = true}, {"m","map", null = true},
                       {"a","any", null = true},
                       {"pos", { {"x","int"}, {"y","int", null = true}, {"tag","string", default = "none"} }, null = true},
                       key = "id" })
  end)
  after_each(function() p:close() end)

  it("stores integers given as floats as integers, and keeps floats floats", function()
    t:insert{ id = 7.0, f = 1 }
    local row = t:get(7)
    assert.equal("integer", math.type(row.id))
    assert.equal("float", math.type(row.f))
    assert.equal(1.0, row.f)
  end)

  it("refuses a float with a fraction for an int, never rounding", function()
    assert.equal('v: column "id": expected int, got number 7.5', H.error_of(t.insert, t, { id = 7.5 }))
  end)

  it("keeps an empty list a list, an empty map a map, and nulls inside lists in place", function()
    t:insert{ id = 1, l = {}, m = {} , a = { 1, runnel.null, 3 } }
    local row = t:get(1)
    assert.same({}, row.l)
    assert.same({}, row.m)
    assert.same({ 1, runnel.null, 3 }, row.a)
    t:insert{ id = 2, l = { "x", runnel.null }, m = { k = 1, [2] = "two" } }
    assert.same({ "x", runnel.null }, t:get(2).l)
    assert.same({ k = 1, [2] = "two" }, t:get(2).m)
  end)

  it("converts nested structs by their field names, with defaults", function()
    t:insert{ id = 1, pos = { x = 3.0 } }
    assert.same({ x = 3, tag = "none" }, t:get(1).pos)
    assert.equal('v: column "pos" field "x": expected int, got string',
                 H.error_of(t.insert, t, { id = 2, pos = { x = "far" } }))
    assert.equal('v: column "pos": unknown field "z"', H.error_of(t.insert, t, { id = 2, pos = { x = 1, z = 1 } }))
  end)

  it("holds bytes with NULs and booleans", function()
    t:insert{ id = 1, b = "a\0b", ok = false }
    assert.equal("a\0b", t:get(1).b)
    assert.equal(false, t:get(1).ok)
  end)

  it("names the Lua type of a value it cannot store", function()
    assert.equal('v: column "a": expected a storable value, got function',
                 H.error_of(t.insert, t, { id = 1, a = print }))
    assert.equal('v: column "ok": expected bool, got string', H.error_of(t.insert, t, { id = 1, ok = "yes" }))
  end)

  it("refuses strings that are not UTF-8 in string columns", function()
    local s = p:table("s", { {"k","string"}, key = "k" })
    assert.equal('s: column "k": expected string, got string that is not valid UTF-8',
                 H.error_of(s.insert, s, { k = "\xff" }))
  end)
end)
