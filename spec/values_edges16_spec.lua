-- Values JSON sinks must be able to write. A Lua string that is not UTF-8
-- inside an any, list or map value was stored as a string, and the NDJSON
-- sink could not write it: "t: out of memory delivering group 1", the
-- group and every later one waiting for good. Such a value is bytes now
-- (a string is UTF-8), written as base64 and read back in Lua as the same
-- string. A map holding keys JSON writes as one key (1 and "1") is refused
-- naming the file and line, the relation and the column.
local runnel = require "runnel"
local H = require "helper"

local function b64(s)
  local digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local v = a << 16 | (b or 0) << 8 | (c or 0)
    for k = 0, 3 do
      local d = (v >> (18 - 6 * k)) & 63
      out[#out + 1] = (k <= 1 or (k == 2 and b) or (k == 3 and c)) and digits:sub(d + 1, d + 1) or "="
    end
  end
  return table.concat(out)
end

describe("values a JSON sink writes", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  it("stores bytes that are not UTF-8 in any, list and map values as bytes, and the NDJSON sink writes them", function()
    local p = runnel.open(dir .. "/st")
    local t = p:table("t", { {"id","int"}, {"a","any", null = true}, {"l","list", null = true},
                             {"m","map", null = true}, key = "id" })
    t:sink(runnel.ndjson(dir .. "/out.ndjson"))
    local bin = "\xff\0\xc3("
    t:insert{ id = 1, a = bin }
    t:insert{ id = 2, l = { "ok", bin } }
    t:insert{ id = 3, m = { [bin] = 1, k = { bin } } }
    t:insert{ id = 4, a = "Stra\xc3\x9fe" }
    p:deliver()
    assert.equal(bin, t:get(1).a)
    assert.equal(bin, t:get(2).l[2])
    assert.equal(1, t:get(3).m[bin])
    assert.equal(bin, t:get(3).m.k[1])
    p:close()
    assert.same({}, runnel.inspect(dir .. "/st").outbox_waiting) -- nothing held back
    local lines = {}
    for line in H.read(dir .. "/out.ndjson"):gmatch("[^\n]+") do lines[#lines + 1] = assert(runnel.json_decode(line)) end
    assert.equal(4, #lines)
    assert.equal(b64(bin), lines[1].a)
    assert.equal(b64(bin), lines[2].l[2])
    assert.equal(b64(bin), lines[3].m.k[1])
    assert.equal("Stra\xc3\x9fe", lines[4].a)
  end)

  it("refuses a map whose keys JSON writes as one key, naming where", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"m","map", null = true}, key = "id" })
    local err = H.error_of(t.insert, t, { id = 1, m = { [1] = "int", ["1"] = "str" } })
    assert.equal('t: column "m": map keys 1 and "1" are one key in JSON, where keys are text (NDJSON and SQLite '
                 .. 'sinks write maps as JSON)', err)
    local ok, raw = pcall(function() t:insert{ id = 1, m = { [true] = 1, ["true"] = 2 } } end)
    assert.is_false(ok)
    assert.matches("^[^:]*values_edges16_spec%.lua:%d+: t: column \"m\": map keys true and \"true\"", raw)
    t:insert{ id = 1, m = { [1] = "a", ["2"] = "b" } }
    assert.equal(1, t:count())
    p:close()
  end)
end)
