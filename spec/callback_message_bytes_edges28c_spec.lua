-- A callback's own message is kept as it was raised (docs/api.md,
-- rn_errmsg), bytes that are no UTF-8 included (review 28c). Regression:
-- the pass that ends a message cut by its buffer on a whole character
-- (0cd3865) ran on every message, cut or not, and dropped the last bytes of
-- one ending in a byte of no character: error("caf\xe9") from a filter
-- raised "f: filter: caf", error("x\xc0\x80") raised "f: filter: x".
local runnel = require "runnel"
local H = require "helper"

describe("a callback's own message", function()
  after_each(H.cleanup)

  for _, said in ipairs{ "caf\xe9", "x\xff", "x\xc0\x80", "a\xf0\x9f\x98", "caf\xc3\xa9" } do
    local shown = said:gsub("[\x80-\xff]", function(b) return ("\\x%02x"):format(b:byte()) end)
    it("is kept whole: " .. shown, function()
      local p = runnel.open()
      local t = p:table("t", { {"id","int"}, key = "id" })
      t:filter(function() error(said, 0) end, "f")
      local ok, e = pcall(t.insert, t, { id = 1 })
      assert.is_false(ok)
      assert.equal("f: filter: " .. said, e)
      p:close()
    end)
  end

  it("is kept whole from a sink", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, key = "id" })
    t:sink(function() error("sink caf\xe9", 0) end)
    local ok, e = pcall(t.insert, t, { id = 1 })
    assert.is_false(ok)
    assert.equal("t: sink: sink caf\xe9", e)
    p:close()
  end)

  -- Not a callback's own message: runnel's words on where the function it
  -- refused is defined, a chunk named with bytes of no character. Before,
  -- they reached the message raw (appended past the UTF-8 pass).
  it("is not where runnel names the function it refused: its place is UTF-8", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, key = "id" })
    local fn = load("return function() return { id = 'x' } end", "=caf\xe9.lua")()
    t:map(fn, { {"id","int"}, key = "id" }, "m")
    local ok, e = pcall(t.insert, t, { id = 1 })
    assert.is_false(ok)
    assert.equal('map returned a bad row: m: column "id": expected int, got string (the map at caf\\xe9.lua:1)', e)
    p:close()
  end)
end)
