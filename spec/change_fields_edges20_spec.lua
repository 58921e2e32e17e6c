-- A change line whose required field is misspelt (round 20): unknown
-- top-level fields are ignored (a producer may add its own), so {"rel":
-- "t", "op": "insert", "rwo": {…}} said only `t: missing "row"`, the
-- misspelling that caused it left for the user to find. The message now
-- names the unknown field too; a line with every field and extra ones is
-- still taken.
local runnel = require "runnel"
local H = require "spec.helper"

local SHAPE = 'expected {"rel": name, "op": "insert"|"update"|"upsert"|"delete", "row": {…}}'

describe("a change with a misspelt field", function()
  local p, t, path
  before_each(function()
    path = H.tmpdir() .. "/in.ndjson"
    p = runnel.open()
    t = p:table("t", { {"id","int"}, key = "id" })
  end)
  after_each(function() p:close(); H.cleanup() end)

  local good = '{"rel":"t","op":"insert","row":{"id":1}}\n'

  it("names the missing field and the unknown one, with file:line", function()
    assert.equal(path .. ':2: t: missing "row" (the change has an unknown field "rwo"): ' .. SHAPE,
                 H.ndjson_run_error(p, path, good .. '{"rel":"t","op":"insert","rwo":{"id":2}}\n'))
    assert.equal(path .. ':1: missing "rel" (the change has an unknown field "rle"): ' .. SHAPE,
                 H.ndjson_run_error(p, path, '{"rle":"t","op":"insert","row":{"id":2}}\n'))
    assert.equal(path .. ':1: t: missing "op" and "row" (the change has an unknown field "Op"): ' .. SHAPE,
                 H.ndjson_run_error(p, path, '{"rel":"t","Op":"insert"}\n'))
    assert.equal(0, t:count()) -- the group rolled back
  end)

  it("says nothing more when no field is unknown", function()
    assert.equal(path .. ':1: t: missing "row": ' .. SHAPE, H.ndjson_run_error(p, path, '{"rel":"t","op":"insert"}\n'))
  end)

  it("still takes a change with fields of its own beside the three", function()
    H.write(path, '{"rel":"t","op":"insert","row":{"id":1},"ts":"2026-01-01","source":"x"}\n')
    p:run(runnel.ndjson_source(path))
    assert.equal(1, t:count())
  end)
end)
