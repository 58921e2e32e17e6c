-- NDJSON path sinks and the carried transaction (sync = false): a file
-- moved while a carried LMDB transaction is open is not written on. The
-- sink's move check needs a transaction of its own to record the new
-- file's position (core/outbox.c, renewed), which cannot begin while the
-- carried one is open; before, a delivery pass run then (a retry of a
-- failed delivery, at a carried commit) skipped the check and wrote the
-- waiting groups into the moved file.
local runnel = require "runnel"
local H = require "helper"

local ks = H.ndjson_ks
local read = H.text_of

describe("an NDJSON path sink with sync = false", function()
  local dir, log, state
  before_each(function() dir, log, state = H.ndjson_case() end)
  after_each(H.cleanup)

  it("writes no group to its moved file while a carried transaction is open", function()
    local p = runnel.open{ path = state, sync = false }
    local s = p:stream("s", { {"k","int"}, {"pad","string"} })
    s:sink(runnel.ndjson(log, { verb = false }))
    s:insert{ k = 1, pad = "x" }
    p:flush()
    assert.equal("1", ks(read(log)))
    local f = assert(io.open(log, "a")); f:write('{"k":0,'); f:close() -- another writer's torn line
    s:insert{ k = 2, pad = "x" }
    p:flush()                                     -- group 2 waits: the sink refuses to append after it
    assert.matches("incomplete line", H.error_of(function() p:deliver() end), 1, true)
    f = assert(io.open(log, "a")); f:write('"pad":"y"}\n'); f:close() -- mended, then rotated
    assert(os.rename(log, log .. ".1"))
    s:insert{ k = 3, pad = "x" }                             -- carried: the retry must not go to the moved file
    assert.equal("1,0", ks(read(log .. ".1")))
    p:close()
    assert.equal("1,0", ks(read(log .. ".1")))
    assert.equal("2,3", ks(read(log)))
  end)
end)
