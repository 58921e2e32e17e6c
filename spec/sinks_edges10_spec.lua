-- Sinks, stats and source-schema changes (round 10).
local runnel = require "runnel"
local H = require "helper"

-- p:stats().outbox names each durable sink the way errors and notes do: its
-- relation, then the sink as its user knows it ("t: durable sink d"), never
-- its key in the state ("sink:d", "sqlite:<path>\31<table>"). The keys of
-- 0.19 and before still find a sink's count.
describe("p:stats().outbox", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  it("names a durable Lua sink by its relation and name; its old key still reads it", function()
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:sink(function() error("down") end, { durable = true, name = "d" })
    t:insert{ k = 1 }
    t:insert{ k = 2 }
    assert.same({ ["t: durable sink d"] = 2 }, p:stats().outbox)
    assert.equal(2, p:stats().outbox["sink:d"])
    p:close()
  end)

  it("names an SQLite sink by its table and file, with no control byte", function()
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:sink(runnel.sqlite(dir .. "/out.db", "mirror"))
    t:insert{ k = 1 }
    local outbox = p:stats().outbox
    local name = next(outbox)
    assert.is_nil(next(outbox, name))
    assert.is_nil(name:find("%c"))
    local real = H.sh("realpath '" .. dir .. "/out.db'"):gsub("\n$", "")
    assert.equal('t: durable sink to table "mirror" in ' .. real, name)
    assert.equal(0, outbox[name])
    p:close()
  end)

  it("names an NDJSON sink by its file", function()
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:sink(runnel.ndjson(dir .. "/out.ndjson"))
    t:insert{ k = 1 }
    local real = H.sh("realpath '" .. dir .. "/out.ndjson'"):gsub("\n$", "")
    assert.same({ ["t: durable sink to " .. real] = 0 }, p:stats().outbox)
    p:close()
  end)

  it("counts each NDJSON sink on an open file apart, by relation and in declaration order", function()
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, key = "k" })
    local u = p:table("u", { {"k","int"}, key = "k" })
    local full = assert(io.open("/dev/full", "w"))
    t:sink(runnel.ndjson(full))
    t:sink(runnel.ndjson(full))
    u:sink(runnel.ndjson(full))
    t:insert{ k = 1 }
    t:insert{ k = 2 }
    u:insert{ k = 1 }
    local outbox = p:stats().outbox
    assert.same({ ["t: NDJSON sink on an open file"] = 2, ["t: NDJSON sink on an open file (2)"] = 2,
                  ["u: NDJSON sink on an open file"] = 1 }, outbox)
    assert.equal(5, outbox["(unnamed)"]) -- the old key: every such sink's groups
    pcall(p.close, p)
    full:close()
  end)
end)
