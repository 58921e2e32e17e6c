-- runnel.json_decode and numbers (core/json.c): a number no int64 or
-- double holds is said as the NDJSON input says it, with where it starts;
-- a whole number beyond ±2^53 comes back as the float it reads as, which
-- an int column refuses (core/row.c: a float there may not be the integer
-- written), as it refuses any float beyond ±2^53 from Lua.
local runnel = require "runnel"

describe("runnel.json_decode's numbers", function()
  it("says a real beyond a double's range plainly, with its position", function()
    local v, err = runnel.json_decode('{"n":1e400}')
    assert.is_nil(v)
    -- before: malformed JSON at column 10: real number overflow near '1e400'
    assert.equal("the number 1e400 is beyond a float's range (about ±1.8e308) at column 6", err)
    v, err = runnel.json_decode('[1,\n -2.5e999]')
    assert.is_nil(v)
    assert.equal("the number -2.5e999 is beyond a float's range (about ±1.8e308) at line 2, column 2", err)
  end)

  it("says an integer beyond int64 plainly, with its position", function()
    local v, err = runnel.json_decode('{"n":99999999999999999999}')
    assert.is_nil(v)
    assert.equal("the integer 99999999999999999999 is beyond int64 (-9223372036854775808 to "
                 .. "9223372036854775807) at column 6", err)
    local long = string.rep("9", 100)
    v, err = runnel.json_decode(long)
    assert.is_nil(v)
    assert.equal("the integer " .. long:sub(1, 64) .. "… is beyond int64 (-9223372036854775808 to "
                 .. "9223372036854775807) at column 1", err)
  end)

  it("gives a whole number with a fraction part as a float, beyond ±2^53 the float it reads as", function()
    local v = runnel.json_decode('{"a":3.0,"b":9007199254740993.0,"c":9007199254740993}')
    assert.equal("float", math.type(v.a))
    assert.equal(9007199254740992.0, v.b)
    assert.equal("float", math.type(v.b))
    assert.equal(9007199254740993, v.c) -- an integer is exact
    assert.equal("integer", math.type(v.c))
  end)

  it("a float beyond ±2^53, decoded or from Lua, is refused by an int column naming it; 3.0 is still 3", function()
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, {"n","int", null = true}, {"f","float", null = true},
                             {"s", { {"x","int"} }, null = true}, key = "k" })
    local v = runnel.json_decode('{"k":1,"n":9007199254740993.0}')
    local ok, err = pcall(t.insert, t, v)
    assert.is_false(ok) -- before: stored 9007199254740992
    assert.equal('t: column "n": expected int, got number 9007199254740992 as a float: beyond ±2^53 a float is not '
                 .. "exact (9007199254740993 would be 9007199254740992 too): give it as an integer", err)
    ok, err = pcall(t.insert, t, { k = 1, s = { x = -2^60 } })
    assert.is_false(ok)
    assert.matches('t: column "s" field "x": expected int, got number -1.152921504606847e+18 as a float', err, 1, true)
    ok, err = pcall(t.insert, t, { k = 1, n = 2^63 }) -- beyond int64: out of range, as the integer 2^63 is
    assert.equal('t: column "n": expected int, got number 9.2233720368547758e+18 out of range', err)
    ok, err = pcall(t.insert, t, { k = 1, n = -1e300 })
    assert.equal('t: column "n": expected int, got number -1.0000000000000001e+300 out of range', err)
    ok, err = pcall(t.insert, t, { k = 1, n = 1.5 }) -- not whole: only the number
    assert.equal('t: column "n": expected int, got number 1.5', err)
    ok, err = pcall(t.insert, t, { k = 1, n = 0/0 }) -- x86's 0/0 is a NaN with its sign set: not "-nan"
    assert.equal('t: column "n": expected int, got number nan', err)
    ok, err = pcall(t.insert, t, { k = 1, n = -(0/0) })
    assert.equal('t: column "n": expected int, got number nan', err)
    assert.is_nil(t:get(1))
    t:insert(runnel.json_decode('{"k":1,"n":3.0,"f":9007199254740993.0,"s":{"x":-9007199254740991.0}}'))
    local got = t:get(1)
    assert.equal(3, got.n)
    assert.equal("integer", math.type(got.n))
    assert.equal(9007199254740992.0, got.f) -- a float column takes the float
    assert.equal(-9007199254740991, got.s.x)
    t:insert{ k = 2, n = 9007199254740993 } -- an integer is exact
    assert.equal(9007199254740993, t:get(2).n)
    p:close()
  end)
end)
