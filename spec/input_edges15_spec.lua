-- A change whose row holds a value nested deeper than runnel reads (64)
-- is refused naming the file and line, the relation and the column, like
-- any other bad value; before, it said only "JSON nested more than 64
-- deep". The group rolls back.
local runnel = require "runnel"
local H = require "helper"

local function nested(n, leaf) return ("["):rep(n) .. (leaf or "") .. ("]"):rep(n) end

local function change(id, v)
  return ('{"rel":"t","op":"insert","row":{"id":%d,"v":%s}}'):format(id, v)
end

describe("a change nested too deep", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  local function run(lines)
    local path = dir .. "/in.ndjson"
    H.write(path, table.concat(lines, "\n") .. "\n")
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"v","any", null = true}, key = "id" })
    local ok, err = pcall(p.run, p, runnel.ndjson_source(path), { batch = 10, progress = false })
    local count = t:count()
    p:close()
    return ok, err, path, count
  end

  for _, leaf in ipairs{ "", "1" } do
    it("names the file, line, relation and column (" .. (leaf == "" and "empty" or "a number") .. " inside)", function()
      local ok, err, path = run{ change(1, "null"), change(2, nested(70, leaf)) }
      assert.is_false(ok)
      assert.equal(path .. ':2: t: column "v": value nested more than 64 deep', err)
    end)
  end

  it("rolls the group back", function()
    local _, _, _, count = run{ change(1, "null"), change(2, nested(65)) }
    assert.equal(0, count)
  end)

  it("names the deepest column when several are deep", function()
    local line = ('{"rel":"t","op":"insert","row":{"id":1,"a":%s,"v":%s}}'):format(nested(3), nested(66))
    local _, err, path = run{ line }
    assert.equal(path .. ':1: t: column "v": value nested more than 64 deep', err)
  end)

  it("keeps the plain message when the relation is unknown", function()
    local line = ('{"rel":"nope","op":"insert","row":{"id":1,"v":%s}}'):format(nested(70))
    local _, err = run{ line }
    assert.matches("JSON nested more than 64 deep", err, 1, true)
    assert.not_matches("column", err, 1, true)
  end)

  it("runnel.json_decode keeps its message", function()
    local v, err = runnel.json_decode(nested(70))
    assert.is_nil(v)
    assert.matches("JSON nested more than 64 deep", err, 1, true)
  end)
end)
