-- A value is refused when it nests deeper than a stored row can be read
-- back (msgpack-c reads 32 nested containers): it used to be stored, and
-- then t:get answered nil and subscribers failed with "a row could not be
-- decoded".
local runnel = require "runnel"
local H = require "helper"

local function nested(depth)
  local v = 1
  for _ = 1, depth do v = { v } end
  return v
end

describe("deeply nested values", function()
  after_each(H.cleanup)

  it("are stored and read back up to the limit, refused beyond it", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"a","any", null = true}, {"l","list", null = true}, key = "id" })
    local log = t:cdc{ preimage = true, postimage = true, format = "debezium" }
    local seen = 0
    log:sink(function() seen = seen + 1 end)
    t:insert{ id = 1, a = nested(24), l = nested(24) }
    assert.same(nested(24), t:get(1).a)
    assert.same(nested(24), t:get(1).l)
    assert.is_true(seen > 0)
    local ok, err = pcall(t.insert, t, { id = 2, a = nested(25) })
    assert.is_false(ok)
    assert.matches('t: column "a": expected a value nesting at most 24 lists, maps or structs, got table', err)
    ok, err = pcall(t.update, t, { id = 1, l = nested(40) })
    assert.is_false(ok)
    assert.matches('column "l"', err)
    assert.same(nested(24), t:get(1).a)
    assert.is_nil(t:get(2))
    p:close()
  end)

  it("from NDJSON are refused with the line", function()
    local dir = H.tmpdir()
    local f = assert(io.open(dir .. "/in.ndjson", "wb"))
    f:write('{"rel":"t","op":"insert","row":{"id":1,"a":', ("["):rep(30), "1", ("]"):rep(30), "}}\n")
    f:close()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"a","any", null = true}, key = "id" })
    local ok, err = pcall(p.run, p, runnel.ndjson_source(dir .. "/in.ndjson"))
    assert.is_false(ok)
    assert.matches('in.ndjson:1: t: column "a": expected a value nesting at most 24', err)
    assert.equal(0, t:count())
    p:close()
  end)
end)
