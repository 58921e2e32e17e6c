-- js_recreated_edges28_spec.lua — a JetStream source whose stream was
-- deleted and made again between runs, and filled past the state's
-- position (JSSRC-3 in core/js_source.c). Only a position past the new
-- stream's last sequence was caught: with as many messages or more, the
-- run went on at position + 1 of the new stream, passing over its first
-- messages without a word. One nats-server on 127.0.0.1 of its own,
-- always stopped.
local runnel = require "runnel"
local H = require "spec.helper"
local J = require "spec.js_helper"
local jsctl = J.jsctl

local insert = J.ev_insert

local server, why = J.start()

describe("a jetstream source's stream made again (28)", function()
  if not server then
    it("starts nats-server on 127.0.0.1", function() error(why) end)
    return
  end
  local url = server.url
  teardown(function() J.stop(server); H.cleanup() end)
  local stream = J.streams(url, "R")

  local function open(dir)
    local p = runnel.open(dir)
    return p, J.events(p)
  end

  local function remake(name, subj, ids)
    jsctl(url, "delete", name)
    jsctl(url, "add", name, "'" .. subj .. ".>'")
    local lines = {}
    for i, id in ipairs(ids) do lines[i] = insert(id) end
    J.publish(url, subj .. ".0", lines)
  end

  for _, c in ipairs{ { "more", { 11, 12, 13 } }, { "no fewer", { 11, 12 } } } do
    it(("is an error when the new stream holds %s messages than the position, applying nothing"):format(c[1]), function()
      local name, subj = stream()
      J.publish(url, subj .. ".0", { insert(1), insert(2) })
      local dir = H.tmpdir()
      local p = open(dir)
      assert.equal(2, p:run(runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" } }).messages)
      p:close()
      os.execute("sleep 0.01") -- the new stream's creation time differs
      remake(name, subj, c[2])
      local got
      p, got = open(dir)
      local err = H.error_of(p.run, p, runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" } })
      assert.equal(("%s/%s: stream %s: the state's position for %s.0 is 2 of an earlier stream of that name: "
                    .. "the stream was made again (its sequences start over), and messages 1..2 would be passed "
                    .. "over; rebuild the state"):format(url, name, name, subj), err)
      assert.same({}, got)
      assert.equal(1, p:seq())
      assert.equal(2, p:_js_position(name, subj .. ".0"))
      p:close()
    end)
  end

  -- the stream's creation time is kept by the server: a restart (kill -9)
  -- is not a stream made again
  it("goes on after the server was killed and started again", function()
    local name, subj = stream()
    J.publish(url, subj .. ".0", { insert(1), insert(2) })
    local dir = H.tmpdir()
    local p = open(dir)
    p:run(runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" } })
    p:close()
    local node = server.servers[1]
    node:kill(9)
    assert(node:start())
    jsctl(url, "wait", name, "10")
    J.publish(url, subj .. ".0", { insert(3) })
    local got
    p, got = open(dir)
    assert.equal(1, p:run(runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" } }).messages)
    assert.same({ 3 }, got)
    p:close()
  end)

  it("goes on as before when the stream is only purged (its sequences go on)", function()
    local name, subj = stream()
    J.publish(url, subj .. ".0", { insert(1), insert(2) })
    local dir = H.tmpdir()
    local p = open(dir)
    p:run(runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" } })
    p:close()
    jsctl(url, "purge", name)
    J.publish(url, subj .. ".0", { insert(3) })
    local got
    p, got = open(dir)
    assert.equal(1, p:run(runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" } }).messages)
    assert.same({ 3 }, got)
    assert.equal(3, p:_js_position(name, subj .. ".0"))
    p:close()
  end)
end)
