-- A JetStream message of NDJSON lines skips blank lines as p:run over a
-- file does: a line of only spaces, tabs and CRs is no change. Before, a
-- line holding a tab was read as JSON and failed the message ("malformed
-- JSON"), its group rolled back and the run stopped on it, though the
-- same text from a file ran.
local runnel = require "runnel"
local H = require "spec.helper"
local J = require "spec.js_helper"

local function insert(id) return ('{"rel":"t","op":"insert","row":{"id":%d}}'):format(id) end

local server, why = J.start()

describe("a jetstream message's blank lines", function()
  if not server then
    it("starts nats-server on 127.0.0.1", function() error(why) end)
    return
  end
  local url = server.url
  teardown(function() J.stop(server); H.cleanup() end)
  local stream = J.streams(url, "B")

  it("with tabs and spaces are no change, as in a file", function()
    local name, subj = stream()
    J.publish_one(url, subj .. ".0", insert(1) .. "\n\t\n \t \r\n" .. insert(2))
    J.publish_one(url, subj .. ".0", "\t")
    J.publish_one(url, subj .. ".0", insert(3))
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, key = "id" })
    local stats = p:run(runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" }, batch = 10 })
    assert.equal(3, stats.messages)
    assert.equal(3, t:count())
    assert.equal(3, p:_js_position(name, subj .. ".0"))
    p:close()
  end)
end)
