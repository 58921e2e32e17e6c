-- What p:run and runnel.json_decode say about bad input (DESIGN §11: "a
-- clear error naming what and where (file and line for file input)").
-- Each it names what it guards; before the fixes:
-- * a change missing "rel", "op" or "row" said only the expected shape;
-- * runnel.json_decode(42) returned 42 (docs: a non-string raises);
-- * a UTF-8 BOM starting a line past the first said "invalid token";
-- * a number out of range followed by a second one named no column;
-- * a value nested past jansson's limit (2048) said "maximum parsing depth
--   reached", naming neither the relation nor the column;
-- * one NUL byte right after a number or a literal was taken (jansson's
--   leniency: [1\0,2] read as [1,2]; JSON has no NUL outside strings, and
--   one there most often means a torn or zero-filled file).
local H = require "helper"
local runnel = require "runnel"

local EXPECTED = 'expected {"rel": name, "op": "insert"|"update"|"upsert"|"delete", "row": {…}}'

describe("p:run's messages", function()
  local dir, p, t, path
  before_each(function()
    dir = H.tmpdir()
    path = dir .. "/in.ndjson"
    p = runnel.open()
    t = p:table("t", { {"id","int"}, {"x","float", null=true}, {"l","list", null=true}, key = "id" })
  end)
  after_each(function() p:close(); H.cleanup() end)

  it("name the field a change is missing", function()
    assert.equal(path .. ':1: missing "rel": ' .. EXPECTED, H.ndjson_run_error(p, path, '{"op":"insert","row":{"id":1}}\n'))
    assert.equal(path .. ':1: t: missing "op": ' .. EXPECTED, H.ndjson_run_error(p, path, '{"rel":"t","row":{"id":1}}\n'))
    assert.equal(path .. ':1: t: missing "row": ' .. EXPECTED, H.ndjson_run_error(p, path, '{"rel":"t","op":"insert"}\n'))
    assert.equal(path .. ':1: t: missing "op" and "row": ' .. EXPECTED, H.ndjson_run_error(p, path, '{"rel":"t"}\n'))
    assert.equal(path .. ':1: missing "rel" and "row": ' .. EXPECTED, H.ndjson_run_error(p, path, '{"op":"insert"}\n'))
    assert.equal(path .. ':1: "rel" must be a string (a relation\'s name), got a number',
                 H.ndjson_run_error(p, path, '{"rel":7,"op":"insert","row":{"id":1}}\n'))
    assert.equal(path .. ':1: t: "op" must be a string (insert, update, upsert, delete), got null',
                 H.ndjson_run_error(p, path, '{"rel":"t","op":null,"row":{"id":1}}\n'))
    assert.equal(path .. ':2: ' .. EXPECTED, H.ndjson_run_error(p, path, '{"rel":"t","op":"insert","row":{"id":1}}\n[1]\n'))
    assert.equal(0, t:count())
  end)

  it("say a UTF-8 BOM past the first line is one", function()
    local bom = "\xEF\xBB\xBF"
    assert.equal(path .. ":2: a UTF-8 byte order mark (BOM) starts the line: only the first line of the input may "
                 .. "start with one",
                 H.ndjson_run_error(p, path, bom .. '{"rel":"t","op":"insert","row":{"id":1}}\n'
                                             .. bom .. '{"rel":"t","op":"insert","row":{"id":2}}\n'))
    H.write(path, bom .. '{"rel":"t","op":"insert","row":{"id":1}}\n\n \t \n{"rel":"t","op":"insert","row":{"id":2}}\n')
    assert.equal(2, p:run(runnel.ndjson_source(path)).applied) -- at byte 0 it is skipped; blank lines too
  end)

  it("name the column of a number out of range when another one follows", function()
    assert.equal(path .. ':1: t: column "x": the number 1e999 is beyond a float\'s range (about ±1.8e308)',
                 H.ndjson_run_error(p, path, '{"rel":"t","op":"insert","row":{"id":4, "x": 1e999, "l": [1e999]}}\n'))
    assert.equal(path .. ':1: t: column "l": the integer 99999999999999999999 is beyond int64 '
                 .. '(-9223372036854775808 to 9223372036854775807)',
                 H.ndjson_run_error(p, path,
                                    '{"rel":"t","op":"insert","row":{"id":4, "l": [99999999999999999999]}, "z": 1e999}\n'))
  end)

  it("name a value nested past 2048 deep as too deep, with its relation and column", function()
    local deep = ("["):rep(3000) .. ("]"):rep(3000)
    assert.equal(path .. ':1: t: column "l": value nested more than 64 deep',
                 H.ndjson_run_error(p, path, '{"rel":"t","op":"insert","row":{"id":5, "l": ' .. deep .. '}}\n'))
    assert.equal(path .. ':1: JSON nested more than 64 deep', H.ndjson_run_error(p, path, deep .. '\n'))
  end)

  it("refuse a NUL byte right after a number", function()
    assert.matches("^" .. path:gsub("%p", "%%%0") .. ":1: malformed JSON at column %d+: a NUL byte outside a string$",
                   H.ndjson_run_error(p, path, '{"rel":"t","op":"insert","row":{"id":8, "x": 1\0}}\n'))
    assert.equal(0, t:count())
  end)
end)

describe("runnel.json_decode", function()
  it("raises for a non-string", function()
    for _, v in ipairs{ 42, 1.5, true } do
      local ok, err = pcall(runnel.json_decode, v)
      assert.is_false(ok)
      assert.matches("bad argument #1 to '[%w%.]*json_decode' %(string expected, got " .. type(v) .. "%)", err)
    end
    assert.has_error(function() runnel.json_decode() end)
  end)

  it("refuses a NUL byte outside a string, reads one inside", function()
    for _, s in ipairs{ "[1\0,2]", "1\0", '{"x": true\0}', "[1.5\0]", "[null\0]" } do
      local v, err = runnel.json_decode(s)
      assert.is_nil(v, s)
      assert.matches("a NUL byte outside a string", err)
    end
    assert.equal("a\0b", runnel.json_decode('["a\\u0000b"]')[1])
  end)
end)
