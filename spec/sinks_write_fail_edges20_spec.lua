-- A durable NDJSON sink whose write fails (a full disk, a file size limit):
-- p:deliver() raises the failure naming the relation and, for a path sink,
-- its file (before: "ndjson: writing: File too large", naming neither, so
-- a pipeline with several sinks could not tell which one was stuck).
local runnel = require "runnel"
local H = require "helper"

describe("a durable NDJSON sink whose write fails", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  it("names the relation and the file of a path sink", function()
    local script, log = dir .. "/full.lua", dir .. "/out.ndjson"
    H.write(script, ([[
local runnel = require "runnel"
local p = runnel.open{ path = %q }
local s = p:stream("s", { {"k","int"}, {"pad","string"} })
s:sink(runnel.ndjson(%q, { verb = false }))
for k = 1, 60 do
  s:insert{ k = k, pad = string.rep("x", 3000) }
  local ok, err = pcall(p.deliver, p)
  if not ok then io.write(err); break end
end
p:close()
]]):format(dir .. "/st", log))
    local out, err, code = H.sh(("sh -c \"trap '' XFSZ; ulimit -f 200; exec lua5.4 %s\""):format(script))
    assert.equal("", err)
    assert.equal(0, code)
    assert.equal(("s: ndjson: %s: writing: File too large"):format(log), (out:gsub("^[^:]*:%d+: ", "")))
  end)

  it("names the relation of a sink on an open file, and a close says it once", function()
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, key = "k" })
    local full = assert(io.open("/dev/full", "w"))
    t:sink(runnel.ndjson(full))
    t:insert{ k = 1 }
    assert.equal("t: ndjson: writing: No space left on device", H.error_of(p.deliver, p))
    local ok, err = pcall(p.close, p)
    assert.is_false(ok)
    assert.equal("close: t: groups 1 to 1 waiting for its NDJSON sink on an open file were not delivered "
                 .. "and are lost (it keeps them in memory only): ndjson: writing: No space left on device", err)
    full:close()
  end)
end)
