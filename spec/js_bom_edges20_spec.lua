-- A JetStream message of NDJSON lines that starts with a UTF-8 byte order
-- mark (round 20), as some producers write a text: p:run over a file skips
-- one at the file's first byte, but the message, not starting with "{",
-- was read as msgpack and refused ("expected NDJSON lines or a msgpack
-- array of changes"), stopping the run on it. One at the message's first
-- byte is skipped; one after the start of a line is said as in a file.
local runnel = require "runnel"
local H = require "spec.helper"
local J = require "spec.js_helper"

local function insert(id) return ('{"rel":"t","op":"insert","row":{"id":%d}}'):format(id) end
local BOM = "\xEF\xBB\xBF"

local server, why = J.start()

describe("a jetstream message starting with a UTF-8 BOM", function()
  if not server then
    it("starts nats-server on 127.0.0.1", function() error(why) end)
    return
  end
  local url = server.url
  teardown(function() J.stop(server); H.cleanup() end)
  local stream = J.streams(url, "M")

  it("is read as NDJSON, the mark skipped", function()
    local name, subj = stream()
    J.publish_one(url, subj .. ".0", BOM .. insert(1) .. "\n" .. insert(2))
    J.publish_one(url, subj .. ".0", insert(3))
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, key = "id" })
    local stats = p:run(runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" }, batch = 10 })
    assert.equal(2, stats.messages)
    assert.equal(3, t:count())
    p:close()
  end)

  it("on a later line is said, naming the line", function()
    local name, subj = stream()
    J.publish_one(url, subj .. ".0", insert(1) .. "\n" .. BOM .. insert(2))
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, key = "id" })
    local ok, err = pcall(p.run, p, runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" } })
    assert.is_false(ok)
    assert.matches("line 2: a UTF-8 byte order mark (BOM) starts the line", err, 1, true)
    assert.equal(0, t:count())
    p:close()
  end)
end)
