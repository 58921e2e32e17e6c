-- An empty string in a row written as JSON (core/ndjson.c, json_str): msgpack
-- gives an empty string no bytes (its pointer may be NULL), which jansson
-- refused, so the line was taken for an allocation failure: an NDJSON
-- sink's group waited for good ("out of memory delivering group 1") and
-- nothing more reached the file. It is written "".
local runnel = require "runnel"
local H = require "helper"

describe("an empty string in an NDJSON sink's line", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  it("is written as \"\" to a path and to an open file", function()
    local log = dir .. "/out.ndjson"
    local p = runnel.open{ path = dir .. "/st" }
    local t = p:table("t", { {"k","int"}, {"s","string"}, {"l","list"}, key = "k" })
    t:sink(runnel.ndjson(log, { verb = false }))
    local mem = io.open(dir .. "/mem.ndjson", "w")
    t:sink(runnel.ndjson(mem, { verb = false }))
    t:insert{ k = 1, s = "", l = { "", "a" } }
    p:deliver()
    t:insert{ k = 2, s = "b", l = {} }
    p:close()
    mem:close()
    local want = '{"k":1,"s":"","l":["","a"]}\n{"k":2,"s":"b","l":[]}\n'
    assert.equal(want, H.read(log))
    assert.equal(want, H.read(dir .. "/mem.ndjson"))
  end)
end)
