-- Values, keys and rows at their edges: keyed maps and selects, -0.0 and NaN
-- in rows, distinct and keyless tables (core/derive.c, core/row.c, core/key.c).
local runnel = require "runnel"
local H = require "helper"

describe("a keyed map", function()
  local p
  after_each(function() if p then p:close() end p = nil; H.cleanup() end)

  local function keyed(q)
    local t = q:table("t", { {"id","int"}, {"k","string"}, {"v","int"}, key = "id" })
    local m = t:map(function(r) return { k = r.k, id = r.id, v = r.v } end,
                    { {"k","string"}, {"id","int"}, {"v","int"}, key = "k" }, "m")
    return t, m
  end

  it("gives a row whose key changes as a DELETE of the old key and an INSERT of the new one", function()
    local dir = H.tmpdir()
    p = runnel.open()
    local t, m = keyed(p)
    local log = H.record(m)
    m:sink(runnel.ndjson(dir .. "/m.ndjson"))
    t:insert{ id = 1, k = "a", v = 1 }
    t:update{ id = 1, v = 2 }          -- same key: an UPDATE
    t:update{ id = 1, k = "b" }        -- key moves
    assert.same({ "INSERT 1", "UPDATE 1", "DELETE 1", "INSERT 1" }, H.verbs(log))
    assert.same({ k = "a", id = 1, v = 2 }, log[3][4])
    assert.same({ k = "b", id = 1, v = 2 }, log[4][3])
    assert.equal('{"verb":"INSERT","k":"a","id":1,"v":1}\n' ..
                 '{"verb":"UPDATE","k":"a","id":1,"v":2}\n' ..
                 '{"verb":"DELETE","k":"a"}\n' ..
                 '{"verb":"INSERT","k":"b","id":1,"v":2}\n', H.read(dir .. "/m.ndjson"))
  end)

  it("gives a select whose declared key changes as a DELETE and an INSERT", function()
    p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"name","string"}, key = "id" })
    local s = t:select{ "name", "id", key = "name" }
    local log = H.record(s)
    t:insert{ id = 1, name = "ann" }
    t:update{ id = 1, name = "bob" }
    assert.same({ "INSERT 1", "DELETE 1", "INSERT 1" }, H.verbs(log))
  end)
end)
