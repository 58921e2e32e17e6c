-- Numbers in JSON changes (core/json_change.c): a number no int64 or
-- double holds is refused naming the relation and the column, with the
-- file and line; a number with a fraction part or exponent for an int
-- column is taken when exact (3.0), refused when not (3.5, and beyond
-- ±2^53, where 9007199254740993.0 reads as 9007199254740992).
local runnel = require "runnel"
local H = require "helper"

describe("a JSON change's numbers", function()
  local dir, input, p, t
  before_each(function()
    dir = H.tmpdir()
    input = dir .. "/in.ndjson"
    p = runnel.open(dir .. "/st")
    t = p:table("t", { {"k","int"}, {"n","int", null = true}, {"f","float", null = true}, key = "k" })
  end)
  after_each(function() p:close(); H.cleanup() end)


  local function one(row)
    H.write(input, ('{"rel":"t","op":"upsert","row":%s}\n'):format(row))
    local ok, err = pcall(p.run, p, runnel.ndjson_source(input))
    return not ok and tostring(err) or nil
  end

  it("names the column of an integer beyond int64, keeps file:line and rolls the group back", function()
    H.write(input, '{"rel":"t","op":"insert","row":{"k":1,"n":1}}\n'
                .. '{"rel":"t","op":"insert","row":{"k":2,"n":2}}\n'
                .. '{"rel":"t","op":"insert","row":{"k":3,"n":99999999999999999999}}\n')
    local ok, err = pcall(p.run, p, runnel.ndjson_source(input), { batch = 2 })
    assert.is_false(ok)
    -- before: in.ndjson:3: malformed JSON at column 45: too big integer near '99999999999999999999'
    assert.matches(input .. ':3: t: column "n": the integer 99999999999999999999 is beyond int64 '
                   .. "(-9223372036854775808 to 9223372036854775807)", err, 1, true)
    assert.equal(2, t:count()) -- the first group stays; the second is rolled back
    assert.is_nil(t:get(3))
  end)

  it("names the column of a real beyond a double's range, negative too", function()
    assert.matches(input .. ':1: t: column "n": the number 1e400 is beyond a float\'s range', one('{"k":5,"n":1e400}'), 1, true)
    assert.matches(input .. ':1: t: column "f": the number -1.5e999 is beyond a float\'s range',
                   one('{"k":5,"f":-1.5e999}'), 1, true)
    assert.matches(input .. ':1: t: column "f": the integer 99999999999999999999 is beyond int64, which a JSON integer '
                   .. "must fit in: for a float column write it with a fraction part or an exponent "
                   .. "(99999999999999999999.0)", one('{"k":5,"f":99999999999999999999}'), 1, true)
    assert.is_nil(t:get(5))
  end)

  it("names the column and field when the number is inside a nested value, and in the rejects of a skipping run", function()
    local q = runnel.open(dir .. "/st2")
    q:table("s", { {"k","int"}, {"pos", { {"x","float"} }, null = true}, key = "k" })
    H.write(input, '{"rel":"s","op":"insert","row":{"k":1,"pos":{"x":1e999}}}\n{"rel":"s","op":"insert","row":{"k":2}}\n')
    local rejects = dir .. "/rejects"
    q:run(runnel.ndjson_source(input), { on_error = "skip", rejects = rejects })
    assert.matches(input .. ':1: s: column "pos" field "x": the number 1e999 is beyond a float\'s range', H.read(rejects),
                   1, true)
    assert.equal(1, q:relation("s"):count())
    q:close()
  end)

  it("takes a whole number with a fraction part for an int column while exact, refuses it beyond ±2^53", function()
    assert.is_nil(one('{"k":5,"n":3.0}'))
    assert.equal(3, t:get(5).n)
    assert.is_nil(one('{"k":5,"n":9007199254740991.0}'))
    assert.equal(9007199254740991, t:get(5).n)
    assert.is_nil(one('{"k":5,"n":-4.5e3}'))
    assert.equal(-4500, t:get(5).n)
    assert.matches(input .. ':1: t: column "n": expected int, got number 3.5', one('{"k":5,"n":3.5}'), 1, true)
    -- before: stored 9007199254740992
    assert.matches(input .. ':1: t: column "n": expected int, got a number with a fraction part or an exponent that '
                   .. "reads as 9007199254740992: beyond ±2^53 such a number is not exact", one('{"k":5,"n":9007199254740993.0}'), 1, true)
    assert.matches('column "n": expected int, got a number with a fraction part or an exponent that reads as -1e+18',
                   one('{"k":5,"n":-1e18}'), 1, true)
    assert.equal(-4500, t:get(5).n)
    assert.is_nil(one('{"k":5,"n":9007199254740993}')) -- an integer is exact
    assert.equal(9007199254740993, t:get(5).n)
    assert.is_nil(one('{"k":5,"f":9007199254740993.0}')) -- a float column takes the float
  end)

  it("refuses a whole number beyond ±2^53 for an int field inside a struct too, naming its path", function()
    local q = runnel.open(dir .. "/st2")
    local s = q:table("s", { {"k","int"}, {"pos", { {"x","int"}, {"in", { {"y","int"} }, null = true} }, null = true},
                             key = "k" })
    local function line(row)
      H.write(input, ('{"rel":"s","op":"upsert","row":%s}\n'):format(row))
      local ok, err = pcall(q.run, q, runnel.ndjson_source(input))
      return not ok and tostring(err) or nil
    end
    -- before: stored 9007199254740992
    assert.matches(input .. ':1: s: column "pos" field "x": expected int, got a number with a fraction part or an '
                   .. "exponent that reads as 9007199254740992: beyond ±2^53 such a number is not exact",
                   line('{"k":1,"pos":{"x":9007199254740993.0}}'), 1, true)
    assert.matches(input .. ':1: s: column "pos" field "in" field "y": expected int, got a number with a fraction '
                   .. "part or an exponent that reads as -1e+18", line('{"k":1,"pos":{"x":1,"in":{"y":-1e18}}}'), 1, true)
    assert.matches(input .. ':1: s: column "pos" field "x": expected int', line('{"k":1,"pos":[9007199254740993.0,null]}'),
                   1, true)
    assert.is_nil(s:get(1))
    assert.is_nil(line('{"k":1,"pos":{"x":3.0,"in":{"y":9007199254740991.0}}}'))
    assert.same({ x = 3, ["in"] = { y = 9007199254740991 } }, s:get(1).pos)
    q:close()
  end)
end)
