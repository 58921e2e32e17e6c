-- p:run's refusals of a value in a struct field name the field, as the
-- other refusals of nested values do (`column "s" field "a"`): a number
-- beyond int64 or a float's range, and a string JSON cannot read, named
-- only their column until 0.38.
local runnel = require "runnel"
local H = require "helper"

describe("p:run naming the struct field of a refused value", function()
  after_each(H.cleanup)

  local COLS = { {"k","int"},
                 {"s", { {"a","int"}, {"b","string", null = true}, {"f","float", null = true},
                         {"in", { {"x","int"} }, null = true} }},
                 key = "k" }

  -- The error of p:run over a file holding line, and the rows after it.
  local function run_line(line)
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir }
    local t = p:table("t", COLS)
    local path = dir .. "/in.ndjson"
    local f = assert(io.open(path, "w"))
    f:write('{"rel":"t","op":"insert","row":{"k":1,"s":{"a":1}}}\n', line, "\n")
    f:close()
    local ok, err = pcall(p.run, p, runnel.ndjson_source(path))
    local n = t:count()
    p:close()
    assert.is_false(ok)
    return tostring(err), n, path
  end

  it("an integer beyond int64 in a field", function()
    local err, n, path = run_line('{"rel":"t","op":"insert","row":{"k":2,"s":{"a":9223372036854775808}}}')
    assert.matches(path .. ':2: t: column "s" field "a": the integer 9223372036854775808 is beyond int64', err, 1, true)
    assert.equal(0, n) -- the group the line was in rolled back whole, the line before it too
  end)

  it("an integer beyond int64 in a field of a field, the struct given in slot order", function()
    local err = run_line('{"rel":"t","op":"insert","row":{"k":2,"s":[1,null,null,{"x":-9223372036854775809}]}}')
    assert.matches('t: column "s" field "in" field "x": the integer -9223372036854775809 is beyond int64', err, 1, true)
  end)

  it("an integer beyond int64 for a float field says how to write it", function()
    local err = run_line('{"rel":"t","op":"insert","row":{"k":2,"s":{"a":1,"f":18446744073709551616}}}')
    assert.matches('t: column "s" field "f": the integer 18446744073709551616 is beyond int64, which a JSON '
                   .. 'integer must fit in: for a float field write it with a fraction part or an exponent '
                   .. '(18446744073709551616.0)', err, 1, true)
  end)

  it("a number beyond a float's range in a field", function()
    local err = run_line('{"rel":"t","op":"insert","row":{"k":2,"s":{"a":1,"f":1e999}}}')
    assert.matches('t: column "s" field "f": the number 1e999 is beyond a float\'s range', err, 1, true)
  end)

  it("a string JSON cannot read in a field", function()
    local err = run_line('{"rel":"t","op":"insert","row":{"k":2,"s":{"a":1,"b":"\\ud800"}}}')
    assert.matches('t: column "s" field "b": malformed JSON', err, 1, true)
  end)

  it("a top-level column is named as before", function()
    local err = run_line('{"rel":"t","op":"insert","row":{"k":9223372036854775808,"s":{"a":1}}}')
    assert.matches('t: column "k": the integer 9223372036854775808 is beyond int64', err, 1, true)
  end)
end)
