-- A pipeline closed while groups wait for a durable sink on an open file
-- (OUTBOX-6 in core/outbox.c): that sink keeps them in memory only, so a
-- close that cannot deliver them loses them; it says so rather than
-- closing as if nothing were lost. Named sinks keep theirs in the state.
local runnel = require "runnel"
local H = require "helper"

describe("closing with groups waiting", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  it("for an NDJSON sink on an open file that cannot take them raises, naming them, and is closed", function()
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, key = "k" })
    local full = assert(io.open("/dev/full", "w"))
    t:sink(runnel.ndjson(full))
    t:insert{ k = 1 }
    t:insert{ k = 2 }
    assert.same({ ["t: NDJSON sink on an open file"] = 2 }, p:stats().outbox)
    local ok, err = pcall(p.close, p)
    assert.is_false(ok)
    assert.matches("close: t: groups 1 to 2 waiting for its NDJSON sink on an open file were not delivered "
                   .. "and are lost (it keeps them in memory only): ndjson: writing: No space left on device",
                   err, 1, true)
    assert.equal("runnel.Pipeline (closed)", tostring(p))
    assert.has_no.errors(function() p:close() end) -- a second close is quiet
    full:close()
  end)

  it("says the open file's own failure, not another sink's", function()
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:sink(function() error("the other sink is down") end, { durable = true, name = "other" }) -- fails first
    local full = assert(io.open("/dev/full", "w"))
    t:sink(runnel.ndjson(full))
    t:insert{ k = 1 }
    local ok, err = pcall(p.close, p)
    assert.is_false(ok)
    assert.matches("close: t: groups 1 to 1 waiting for its NDJSON sink on an open file were not delivered "
                   .. "and are lost (it keeps them in memory only): ndjson: writing: No space left on device",
                   err, 1, true)
    full:close()
  end)

  it("closes quietly once the open file took every group", function()
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, key = "k" })
    local path = dir .. "/out.ndjson"
    local f = assert(io.open(path, "w"))
    t:sink(runnel.ndjson(f, { verb = false }))
    t:insert{ k = 1 }
    assert.has_no.errors(function() p:close() end)
    f:close()
    assert.equal('{"k":1}\n', H.read(path))
  end)

  it("keeps a named sink's waiting groups in the state and closes quietly", function()
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:sink(function() error("down") end, { durable = true, name = "d" })
    t:insert{ k = 1 }
    assert.has_no.errors(function() p:close() end)
    p = runnel.open(dir .. "/s")
    t = p:table("t", { {"k","int"}, key = "k" })
    local got = {}
    t:sink(function(_, row) got[#got + 1] = row.k end, { durable = true, name = "d" })
    assert.same({ 1 }, got)
    p:close()
  end)
end)

describe("a durable sink declared from inside a callback", function()
  it("is refused as added inside a group, not as a flush", function()
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, key = "k" })
    local err
    t:sink(function()
      local ok, e = pcall(t.sink, t, function() end, { durable = true, name = "late" })
      err = not ok and e or "declared"
    end, { durable = true, name = "d" })
    t:insert{ k = 1 }
    assert.matches("t: sinks are added outside groups", err, 1, true)
    assert.same({ ["t: durable sink d"] = 0 }, p:stats().outbox)
    p:close()
  end)
end)
