-- Options given a value of the wrong type (round 22): Lua takes any value
-- as a condition, so a boolean option given "false" or 1 was taken as
-- another setting without a word. Each is refused naming the option.
local runnel = require "runnel"
local H = require "helper"

describe("a boolean option given another type", function()
  after_each(H.cleanup)

  -- Regression: sync = "false" opened a synced state (a string is true),
  -- writemap = 1 one without writemap.
  it("open's sync and writemap are refused, with the script's line", function()
    local dir = H.tmpdir()
    local err = H.message_of(function() runnel.open{ path = dir, sync = "false" } end)
    assert.matches('options_edges22_spec.lua:%d+: open: sync must be a boolean, got string "false"', err)
    err = H.message_of(function() runnel.open{ path = dir, writemap = 1 } end)
    assert.matches("open: writemap must be a boolean, got 1", err, 1, true)
    local p = runnel.open{ path = dir, sync = false, writemap = false } -- booleans are taken
    p:close()
  end)

  -- Regression: { "x", "int", null = "yes" } declared a not-null column.
  it("a column's null is refused naming relation and column, nested ones too", function()
    local p = runnel.open()
    local err = H.message_of(function() p:table("t", { {"id","int"}, {"x","int", null = "yes"}, key = "id" }) end)
    assert.matches('options_edges22_spec.lua:%d+: t: column "x": null must be a boolean, got string "yes"', err)
    err = H.message_of(function() p:table("t", { {"id","int"}, {"s", { {"y","int", null = 1} } }, key = "id" }) end)
    assert.matches('t: column "s": column "y": null must be a boolean, got 1', err, 1, true)
    local t = p:table("t", { {"id","int"}, {"x","int", null = true}, key = "id" })
    t:insert{ id = 1 }
    assert.same({ id = 1 }, t:get(1))
    p:close()
  end)

  -- Regression: cache = { missing = 0 } cached "no row" (0 is true in Lua),
  -- a sink's consolidate = "no" consolidated.
  it("a lookup cache's missing and a sink's consolidate are refused", function()
    local p = runnel.open()
    local err = H.message_of(function()
      p:lookup("prices", { {"sku","string"}, {"price","float"}, key = "sku",
                           source = function() return nil end, cache = { missing = 0 } })
    end)
    assert.matches('options_edges22_spec.lua:%d+: prices: cache: missing must be a boolean, got 0', err)
    local t = p:table("t", { {"id","int"}, key = "id" })
    err = H.message_of(function() t:sink{ insert = function() end, consolidate = "no" } end)
    assert.matches('options_edges22_spec.lua:%d+: sink: consolidate must be a boolean, got string "no"', err)
    local got = 0
    t:sink{ insert = function() got = got + 1 end, consolidate = false }
    t:insert{ id = 1 }
    assert.equal(1, got)
    p:close()
  end)

  -- Regression: p:run's progress = "no" kept the progress line.
  it("p:run's progress is refused", function()
    local p = runnel.open()
    p:table("t", { {"id","int"}, key = "id" })
    local file = H.tmpdir() .. "/in.ndjson"
    H.write(file, '{"rel":"t","op":"insert","row":{"id":1}}\n')
    local err = H.message_of(function() p:run(runnel.ndjson_source(file), { progress = "no" }) end)
    assert.matches('options_edges22_spec.lua:%d+: run: progress must be a boolean, got string "no"', err)
    assert.equal(1, p:run(runnel.ndjson_source(file), { progress = false }).applied)
    p:close()
  end)
end)
