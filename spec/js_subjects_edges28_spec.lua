-- js_subjects_edges28_spec.lua — a JetStream source given one subject
-- twice, or two subjects one message can match (JSSRC-5 in
-- core/js_source.c): each subject had its own consumer and both fed the
-- run, so every message was applied twice. One nats-server on 127.0.0.1
-- of its own, always stopped.
local runnel = require "runnel"
local H = require "spec.helper"
local J = require "spec.js_helper"

local insert = J.ev_insert

local server, why = J.start()

describe("a jetstream source's subjects (28)", function()
  if not server then
    it("starts nats-server on 127.0.0.1", function() error(why) end)
    return
  end
  local url = server.url
  teardown(function() J.stop(server); H.cleanup() end)
  local stream = J.streams(url, "S")

  local events = J.events

  -- applied 1,1,2,2,3,3: six messages of three
  local cases = {
    { "named twice", function(s) return { subjects = { s .. ".0", s .. ".0" } } end,
      "%s/%s: stream %s: subject %s.0 is named twice: its messages would be applied twice" },
    { "named twice by partitions", function(s) return { subject = s, partitions = { 0, 0 } } end,
      "%s/%s: stream %s: subject %s.0 is named twice: its messages would be applied twice" },
    { "matched by a wildcard", function(s) return { subjects = { s .. ".*", s .. ".0" } } end,
      "%s/%s: stream %s: subjects %s.* and %s.0 overlap: a message of both would be applied twice" },
    { "matched by a full wildcard", function(s) return { subjects = { s .. ".1", s .. ".>" } } end,
      "%s/%s: stream %s: subjects %s.1 and %s.> overlap: a message of both would be applied twice" },
  }
  for _, c in ipairs(cases) do
    it(("refuses a subject %s, applying nothing"):format(c[1]), function()
      local name, subj = stream()
      J.publish(url, subj .. ".0", { insert(1), insert(2), insert(3) })
      local p = runnel.open()
      local got = events(p)
      local opts = c[2](subj)
      opts.url, opts.stream = url, name
      local err = H.error_of(p.run, p, runnel.jetstream_source(opts))
      assert.equal(c[3]:format(url, name, name, subj, subj), err)
      assert.same({}, got)
      assert.equal(0, p:seq())
      p:close()
    end)
  end

  it("takes subjects no message matches twice: each message once", function()
    local name, subj = stream()
    J.publish(url, subj .. ".0", { insert(1), insert(2) })
    J.publish(url, subj .. ".1.x", { insert(3) })
    local p = runnel.open()
    local got = events(p)
    local st = p:run(runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0", subj .. ".1.*", subj .. ".2.>" } })
    assert.equal(3, st.messages)
    assert.same({ 1, 2, 3 }, got)
    p:close()
  end)
end)
