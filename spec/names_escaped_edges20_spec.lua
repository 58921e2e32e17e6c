-- A relation or column name declared in the script with a control character
-- in it (round 20): a name is any non-empty UTF-8 string, and one given in
-- the input ("unknown column \"q\\u0001\"") was escaped in messages, but a
-- declared one printed raw: "t<newline>x: column \"c<tab>ol\": expected
-- string, got number" broke the message's line on stderr. Every message now
-- escapes control characters as a quoted name does (\n, \t, \u0001).
local runnel = require "runnel"
local H = require "spec.helper"

describe("declared names with control characters, in messages", function()
  local p, t
  before_each(function()
    p = runnel.open{}
    t = p:table("t\nx", { {"id","int"}, {"c\tol","string"}, key = "id" })
  end)
  after_each(function() p:close(); H.cleanup() end)

  it("from the relation's calls", function()
    assert.are.equal('t\\nx: column "c\\tol": expected string, got number',
                     H.error_of(t.insert, t, { id = 1, ["c\tol"] = 5 }))
    assert.are.equal('t\\nx: column "c\\tol": missing (the column is not nullable)', H.error_of(t.insert, t, { id = 1 }))
    assert.are.equal('t\\nx: unknown column "zz"', H.error_of(t.insert, t, { id = 1, ["c\tol"] = "x", zz = 1 }))
    t:insert{ id = 1, ["c\tol"] = "x" }
    assert.are.equal("t\\nx: insert: a row with key (id = 1) already exists",
                     H.error_of(t.insert, t, { id = 1, ["c\tol"] = "x" }))
    assert.are.equal(1, t:count())
  end)

  it("from declarations", function()
    assert.are.equal('relation "t\\nx" is already declared', H.error_of(p.table, p, "t\nx", { {"id","int"}, key = "id" }))
    assert.are.equal('u\\r: duplicate column name "i\\u0001d"',
                     H.error_of(p.table, p, "u\r", { {"i\1d","int"}, {"i\1d","int"}, key = "i\1d" }))
    assert.are.equal('u: key column "i\\u007fd" is not a declared column (did you mean "id"?)',
                     H.error_of(p.table, p, "u", { {"id","int"}, key = "i\127d" }))
    assert.are.equal("l\\n: a lookup needs a key", H.error_of(p.lookup, p, "l\n", { {"id","int"}, source = print }))
    assert.are.equal("v\\n: column #1 needs a non-empty string name", H.error_of(p.table, p, "v\n", { {"","int"}, key = "" }))
  end)

  it("from p:run, after the file and line", function()
    local path = H.tmpdir() .. "/in.ndjson"
    H.write(path, '{"rel":"t\\nx","op":"insert","row":{"id":2,"c\\tol":1}}\n')
    local ok, err = pcall(p.run, p, runnel.ndjson_source(path))
    assert.is_false(ok)
    assert.are.equal(path .. ':1: t\\nx: column "c\\tol": expected string, got number',
                     (tostring(err):gsub("^[^\n]-%.lua:%d+: ", "")))
    assert.are.equal(0, t:count())
  end)

  it("a callback's own message is kept as it is", function()
    t:sink(function() error("two\nlines", 0) end)
    assert.are.equal("t\\nx: sink: two\nlines", H.error_of(t.insert, t, { id = 1, ["c\tol"] = "x" }))
  end)
end)
