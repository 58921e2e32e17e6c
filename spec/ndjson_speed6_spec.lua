-- p:run's fast path (issue 13): columns found through a per-relation hint
-- of the last line's order, strings scanned 8 bytes at a time, duplicate
-- keys caught by a filter. Lines whose columns come in any order, any
-- subset, past the hints' 16, with long and escaped strings, read exactly
-- as before; bad ones are refused with the same words.
local runnel = require "runnel"
local H = require "helper"

local function write(path, lines) H.write(path, table.concat(lines, "\n") .. "\n") end

describe("p:run column lookup and scanning", function()
  local dir, p
  before_each(function() dir = H.tmpdir(); p = runnel.open() end)
  after_each(function() p:close(); H.cleanup() end)

  it("reads columns in any order and subset, line after line, in two relations", function()
    local a = p:table("a", { {"id","int"}, {"x","string", null = true}, {"y","int", null = true}, key = "id" })
    local b = p:table("b", { {"y","int", null = true}, {"id","int"}, {"x","string", null = true}, key = "id" })
    write(dir .. "/in.ndjson", {
      '{"rel":"a","op":"insert","row":{"id":1,"x":"one","y":10}}',
      '{"rel":"a","op":"insert","row":{"y":20,"id":2,"x":"two"}}',
      '{"rel":"b","op":"insert","row":{"x":"b-one","id":1}}',
      '{"rel":"a","op":"insert","row":{"x":"three","y":30,"id":3}}',
      '{"rel":"b","op":"insert","row":{"id":2,"y":5}}',
      '{"rel":"a","op":"update","row":{"id":1,"y":11}}',
      '{"op":"update","row":{"y":12,"id":1},"rel":"a"}',
    })
    local stats = p:run(runnel.ndjson_source(dir .. "/in.ndjson"), { batch = 3 })
    assert.same({ lines = 7, applied = 7, rejected = 0, groups = 3 }, stats)
    assert.same({ id = 1, x = "one", y = 12 }, a:get(1))
    assert.same({ id = 2, x = "two", y = 20 }, a:get(2))
    assert.same({ id = 3, x = "three", y = 30 }, a:get(3))
    assert.same({ id = 1, x = "b-one" }, b:get(1))
    assert.same({ id = 2, y = 5 }, b:get(2))
  end)

  it("reads a relation of more columns than the hints hold, reordered", function()
    local cols, names = { key = "c1" }, {}
    for i = 1, 20 do cols[i] = { "c" .. i, "int" }; names[i] = "c" .. i end
    local t = p:table("wide", cols)
    local function line(order, base)
      local parts = {}
      for _, i in ipairs(order) do parts[#parts + 1] = string.format('"c%d":%d', i, base + i) end
      return '{"rel":"wide","op":"upsert","row":{' .. table.concat(parts, ",") .. '}}'
    end
    local fwd, rev = {}, {}
    for i = 1, 20 do fwd[i] = i; rev[i] = 21 - i end
    write(dir .. "/in.ndjson", { line(fwd, 0), line(rev, 100), line(fwd, 0) })
    -- c1 is the key: lines 1 and 3 name key 1, line 2 key 101
    p:run(runnel.ndjson_source(dir .. "/in.ndjson"), {})
    local r1, r2 = t:get(1), t:get(101)
    for i = 1, 20 do
      assert.equal(i, r1["c" .. i])
      assert.equal(100 + i, r2["c" .. i])
    end
  end)

  it("reads strings of every length with escapes and UTF-8 anywhere, as runnel.json_decode does", function()
    local t = p:table("s", { {"id","int"}, {"v","string"}, key = "id" })
    local lines, want = {}, {}
    local pieces = { "é", "\\n", "\\u00e9", "\\\"", "\\\\", "€", "😀", "/" }
    local n = 0
    for len = 0, 19 do
      for k, piece in ipairs(pieces) do
        n = n + 1
        local at = (len * 7 + k) % (len + 1)
        local s = string.rep("a", at) .. piece .. string.rep("z", len - at)
        lines[#lines + 1] = string.format('{"rel":"s","op":"insert","row":{"id":%d,"v":"%s"}}', n, s)
        want[n] = runnel.json_decode('"' .. s .. '"')
      end
    end
    write(dir .. "/in.ndjson", lines)
    p:run(runnel.ndjson_source(dir .. "/in.ndjson"), {})
    for i = 1, n do assert.equal(want[i], t:get(i).v) end
  end)

  it("refuses a duplicate key, an unknown column after good lines, and a raw control byte, as before", function()
    p:table("players", { {"id","int"}, {"name","string"}, key = "id" })
    local f = dir .. "/in.ndjson"
    write(f, {
      '{"rel":"players","op":"insert","row":{"id":1,"name":"ann"}}',
      '{"rel":"players","op":"insert","row":{"id":2,"name":"bob","id":3}}',
      '{"rel":"players","op":"insert","row":{"id":4,"nam":"x"}}',
      '{"rel":"players","op":"insert","row":{"id":5,"name":"a long name\1 here"}}',
      '{"rel":"players","op":"insert","rel":"players","row":{"id":6,"name":"x"}}',
      '{"rel":"players","op":"insert","row":{"name":"cy","id":7}}',
    })
    local stats = p:run(runnel.ndjson_source(f), { on_error = "skip", rejects = dir .. "/rejects.txt" })
    assert.same({ lines = 6, applied = 2, rejected = 4, groups = 1 }, stats)
    local got = {}
    for l in H.read(dir .. "/rejects.txt"):gmatch("[^\n]+") do got[#got + 1] = l:match("^[^\t]*") end
    assert.same({
      f .. ':2: players: duplicate key "id" at column 59',
      f .. ':3: players: unknown column "nam" (did you mean "name"?)',
      f .. ":4: players: column \"name\": malformed JSON at column 64: control character 0x1 near '\"a long name'",
      f .. ':5: duplicate key "rel" at column 32',
    }, got)
  end)
end)
