-- An NDJSON value the JSON parser refuses (round 20): bytes that are not
-- UTF-8 (a CESU surrogate, an overlong form), a lone surrogate escape, a
-- bare NaN said only "malformed JSON at column 47: unable to decode byte
-- 0xed", naming no relation or column, in a line of many columns; a file
-- whose lines end with a lone CR (old Mac) said "end of file expected near
-- '{'" on its first line. The relation and the column are named now, and
-- the lone CR is said.
local runnel = require "runnel"
local H = require "spec.helper"

describe("a value the JSON parser refuses", function()
  local p, t, path
  before_each(function()
    path = H.tmpdir() .. "/in.ndjson"
    p = runnel.open()
    t = p:table("t", { {"id","int"}, {"s","string", null = true}, {"f","float", null = true}, key = "id" })
  end)
  after_each(function() p:close(); H.cleanup() end)

  local good = '{"rel":"t","op":"insert","row":{"id":1}}\n'
  local function row(fields) return '{"rel":"t","op":"insert","row":{"id":2,' .. fields .. ',"f":1.5}}\n' end

  it("names the relation and the column, after file:line", function()
    for _, bad in ipairs{ '"s":"\xed\xa0\x80"', '"s":"\xc0\xaf"', '"s":"\xf4\x90\x80\x80"', '"s":"a\\ud800"',
                          '"s":"a\\udc00b"', '"s":"a\1b"', '"s":NaN', '"s":+1', '"s":01', '"s":tru' } do
      local err = H.ndjson_run_error(p, path, good .. row(bad))
      local want = path .. ':2: t: column "s": malformed JSON at column '
      assert.equal(want, err:sub(1, #want), bad)
    end
    assert.equal(0, t:count()) -- each group rolled back
  end)

  it("names the relation for a column name it cannot read", function()
    local err = H.ndjson_run_error(p, path, good .. '{"rel":"t","op":"insert","row":{"id":2,"s\\u0000":"x"}}\n')
    local want = path .. ':2: t: a column name: malformed JSON at column '
    assert.equal(want, err:sub(1, #want))
  end)

  it("names the column of an any value with a key it cannot read", function()
    local p2 = runnel.open()
    p2:table("u", { {"id","int"}, {"a","any"}, key = "id" })
    H.write(path, '{"rel":"u","op":"insert","row":{"id":1,"a":{"\\ud800":1}}}\n')
    local ok, err = pcall(p2.run, p2, runnel.ndjson_source(path))
    p2:close()
    assert.is_false(ok)
    assert.matches(path .. ':1: u: column "a": malformed JSON at column ', err, 1, true)
  end)

  it("says a UTF-16 byte order mark", function()
    for _, bom in ipairs{ "\xff\xfe", "\xfe\xff" } do
      assert.equal(path .. ":1: a UTF-16 byte order mark (BOM) starts the line: NDJSON input is UTF-8",
                   H.ndjson_run_error(p, path, bom .. good))
    end
  end)

  it("says that lines end with a lone CR", function()
    local err = H.ndjson_run_error(p, path, good:gsub("\n", "\r") .. good:gsub("1", "2"):gsub("\n", "\r"))
    assert.matches(": the line holds a carriage return (CR) not followed by a line feed (LF): NDJSON lines end with LF "
                   .. "or CRLF", err, 1, true)
    assert.equal(path .. ":1: malformed JSON", err:sub(1, #path + 18))
  end)

  it("takes CRLF line ends and a surrogate pair", function()
    H.write(path, (good .. row('"s":"\\ud83d\\ude00"')):gsub("\n", "\r\n"))
    p:run(runnel.ndjson_source(path))
    assert.equal("😀", t:get{ id = 2 }.s)
  end)
end)
