-- Hostile NDJSON input (issue 10 #6, #7, #16): names compared by length and
-- bytes, one reject per line, duplicate keys refused.
local runnel = require "runnel"
local H = require "helper"

local function write(path, lines) H.write(path, table.concat(lines, "\n") .. "\n") end

local function read(path) return assert(H.read(path)) end

local function lines_of(s)
  local out = {}
  for l in s:gmatch("([^\n]*)\n") do out[#out + 1] = l end
  return out
end

describe("p:run on hostile lines", function()
  local dir, p, players
  before_each(function()
    dir = H.tmpdir()
    p = runnel.open()
    players = p:table("players", { {"id","int"}, {"name","string"},
                                   {"pos", { {"x","int"}, {"y","int", null = true} }, null = true}, key = "id" })
  end)
  after_each(function() p:close(); H.cleanup() end)

  -- The error of running one line (without skip), without the file name.
  local function run_error(line)
    write(dir .. "/in.ndjson", { line })
    local ok, err = pcall(p.run, p, runnel.ndjson_source(dir .. "/in.ndjson"))
    assert.is_false(ok)
    assert.is_false(p:in_group())
    assert.equal(0, players:count())
    return (err:gsub("^" .. dir:gsub("%p", "%%%0") .. "/in%.ndjson:1: ", ""))
  end

  it("does not apply a relation name with a NUL byte to the name before it", function()
    assert.equal('unknown relation "players\\u0000evil" (known: players)',
                 run_error('{"rel":"players\\u0000evil","op":"insert","row":{"id":1,"name":"x"}}'))
    assert.equal('unknown relation "pla\\"yers\\n" (known: players)',
                 run_error('{"rel":"pla\\"yers\\n","op":"insert","row":{"id":1,"name":"x"}}'))
  end)

  it("does not take an op with a NUL byte for the op before it", function()
    assert.equal('players: unknown op "upsert\\u0000" (insert, update, upsert, delete)',
                 run_error('{"rel":"players","op":"upsert\\u0000","row":{"id":1,"name":"x"}}'))
    assert.equal('players: unknown op "insert\\u0000x" (insert, update, upsert, delete)',
                 run_error('{"rel":"players","op":"insert\\u0000x","row":{"id":1,"name":"x"}}'))
  end)

  it("refuses a column or field name with a NUL byte", function()
    assert.matches('NUL byte in object key', run_error('{"rel":"players","op":"insert","row":{"id":1,"name\\u0000x":"x"}}'))
    assert.matches('NUL byte in object key',
                   run_error('{"rel":"players","op":"insert","row":{"id":1,"name":"a","pos":{"x\\u0000":1}}}'))
  end)

  it("refuses duplicate keys, naming the key, the relation and the line", function()
    assert.equal('players: duplicate key "name" at column 57',
                 run_error('{"rel":"players","op":"insert","row":{"id":1,"name":"a","name":"b"}}'))
    assert.equal('players: duplicate key "x" at column 70',
                 run_error('{"rel":"players","op":"insert","row":{"id":1,"name":"a","pos":{"x":1,"x":2}}}'))
    assert.equal('players: duplicate key "op" at column 32',
                 run_error('{"rel":"players","op":"insert","op":"delete","row":{"id":1,"name":"a"}}'))
    assert.equal('duplicate key "rel" at column 18',
                 run_error('{"rel":"players","rel":"nobody","op":"insert","row":{"id":1,"name":"a"}}'))
    assert.equal('duplicate key "a\\"\\\\" at column 34',
                 run_error('{"rel":"nobody","row":{"a\\"\\\\":1,"a\\"\\\\":2}}'))
  end)

  it("writes exactly one line per reject, control characters escaped", function()
    local t = p:table("t", { {"k","int"}, {"a\nb","int", null = true}, key = "k" })
    write(dir .. "/in.ndjson", {
      '{"rel":"players","op":"insert","row":{"id":1,"a\\nb":"x"}}',
      '{"rel":"t","op":"insert","row":{"k":1,"a\\nb":"x"}}',
      '{"rel":"t\\n\\t\\r\\u001f","op":"insert","row":{"k":2}}',
      '{"rel":"t","op":"insert","row":{"k":3,"a\\tb":1}}',
      '{"rel":"t","op":"insert","row":{"k":4,"a\\nb":4}}',
    })
    local stats = p:run(runnel.ndjson_source(dir .. "/in.ndjson"),
                        { batch = 10, on_error = "skip", rejects = dir .. "/rejects.txt" })
    assert.same({ lines = 5, applied = 1, rejected = 4, groups = 1 }, stats)
    assert.equal(4, t:get(4)["a\nb"])
    local f = dir .. "/in.ndjson"
    local got = lines_of(read(dir .. "/rejects.txt"))
    assert.same({
      f .. ':1: players: unknown column "a\\nb"\t{"rel":"players","op":"insert","row":{"id":1,"a\\nb":"x"}}',
      f .. ':2: t: column "a\\nb": expected int, got string\t{"rel":"t","op":"insert","row":{"k":1,"a\\nb":"x"}}',
      f .. ':3: unknown relation "t\\n\\t\\r\\u001f" (known: players, t)\t{"rel":"t\\n\\t\\r\\u001f","op":"insert","row":{"k":2}}',
      f .. ':4: t: unknown column "a\\tb" (did you mean "a\\nb"?)\t{"rel":"t","op":"insert","row":{"k":3,"a\\tb":1}}',
    }, got)
  end)
end)

describe("runnel.json_decode", function()
  it("refuses duplicate keys, naming the key", function()
    local v, err = runnel.json_decode('{"a":1,"b":{"c":1,"c":2}}')
    assert.is_nil(v)
    assert.equal('duplicate key "c" at column 19', err)
    v, err = runnel.json_decode('[{"a":1},{"a":2,"a":3}]')
    assert.is_nil(v)
    assert.equal('duplicate key "a" at column 17', err)
    v, err = runnel.json_decode('{\n  "a": 1,\n  "a": 2\n}')
    assert.is_nil(v)
    assert.equal('duplicate key "a" at line 3, column 3', err)
    assert.same({ a = 1, b = { c = 2 } }, runnel.json_decode('{"a":1,"b":{"c":2}}'))
  end)
end)

describe("a duplicate key too long to quote whole", function()
  it("is cut at a character boundary, so the message stays UTF-8", function()
    local key = ("é"):rep(150)
    local value, err = runnel.json_decode(('{"%s":1,"%s":2}'):format(key, key))
    assert.is_nil(value)
    assert.matches("duplicate key", err)
    assert.is_truthy(utf8.len(err), "not valid UTF-8: " .. err)
  end)
end)
