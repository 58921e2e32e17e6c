-- A name that is not a column, or not UTF-8, is quoted in the message with
-- its escapes, as the README promises ("unknown relation \"players\\u0000evil\""):
-- a newline or a stray byte printed raw broke the message's line or showed
-- as a replacement character. The C push (core/api.c) quoted already; a
-- row table from Lua and an attach's get printed the name raw.
local runnel = require "runnel"
local H = require "spec.helper"

describe("names quoted in messages", function()
  after_each(H.cleanup)

  it("an unknown column from a Lua row table, with a newline or bytes that are not UTF-8", function()
    local p = runnel.open{}
    local t = p:table("t", { {"id","int"}, key = "id" })
    assert.are.equal('t: unknown column "x\\n"', H.error_of(t.insert, t, { id = 1, ["x\n"] = 1 }))
    assert.are.equal('t: unknown column "x\\xff\\xfe"', H.error_of(t.insert, t, { id = 1, ["x\xff\xfe"] = 1 }))
    assert.are.equal('t: unknown column "naïve"', H.error_of(t.insert, t, { id = 1, ["naïve"] = 1 }))
    assert.are.equal(0, t:count()) -- each group rolled back
    p:close()
  end)

  it("a relation or column name that is not UTF-8 is refused with its bytes escaped", function()
    local p = runnel.open{}
    assert.are.equal('relation name "bad\\xffname\\n" is not valid UTF-8',
                     H.error_of(p.table, p, "bad\xffname\n", { {"id","int"}, key = "id" }))
    assert.are.equal('ok: column name "i\\xc3d" is not valid UTF-8',
                     H.error_of(p.table, p, "ok", { {"i\xc3d","int"}, key = "i\xc3d" }))
    -- a well-formed character cut short by the end is escaped too
    assert.are.equal('ok: column name "end\\xe2\\x82" is not valid UTF-8',
                     H.error_of(p.table, p, "ok", { {"end\xe2\x82","int"}, key = "end\xe2\x82" }))
    assert.is_truthy(p:table("Straße", { {"naïve","int"}, key = "naïve" }))
    p:close()
  end)

  it("an attach's get names an unknown column with its escapes", function()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir }
    local codes = p:table("codes", { {"code","string"}, {"n","int"}, key = "code" })
    codes:insert{ code = "42", n = 1 }
    p:close()
    local att = runnel.attach(dir, "codes")
    assert.are.equal('attach codes: get: unknown column "co\\td"', H.error_of(att.get, att, { code = "42", ["co\td"] = 1 }))
    assert.are.equal(1, att:get{ code = "42" }.n)
  end)
end)
