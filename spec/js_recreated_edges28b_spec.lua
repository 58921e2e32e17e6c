-- js_recreated_edges28b_spec.lua — the creation time check of JSSRC-3
-- (core/js_source.c) against a stream that was never made again.
-- nats-server 2.9 keeps a file stream's creation time across a restart in
-- memory only: its store keeps the time of the restart, and writes it to
-- disk at the next change of the stream's config, so a restart, an edit
-- (`nats stream edit`) and a restart give the same stream a later creation
-- time. The source took that for a stream made again and asked to rebuild
-- the state. One nats-server on 127.0.0.1 of its own, always stopped.
local runnel = require "runnel"
local H = require "spec.helper"
local J = require "spec.js_helper"
local jsctl = J.jsctl

local insert = J.ev_insert

local server, why = J.start()

describe("a jetstream source's stream restarted, edited, restarted (28b)", function()
  if not server then
    it("starts nats-server on 127.0.0.1", function() error(why) end)
    return
  end
  local url = server.url
  teardown(function() J.stop(server); H.cleanup() end)
  local stream = J.streams(url, "E")

  local function open(dir)
    local p = runnel.open(dir)
    return p, J.events(p)
  end

  local function restart(name)
    local node = server.servers[1]
    node:kill(9)
    assert(node:start())
    jsctl(url, "wait", name, "10")
  end

  it("goes on: the server's new creation time is not a stream made again", function()
    local name, subj = stream()
    J.publish(url, subj .. ".0", { insert(1), insert(2) })
    local dir = H.tmpdir()
    local p = open(dir)
    assert.equal(2, p:run(runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" } }).messages)
    p:close()
    local made = jsctl(url, "created", name)
    os.execute("sleep 0.01")
    restart(name)
    jsctl(url, "edit", name, "maxmsgsize=100000")
    restart(name)
    assert.are_not.equal(made, jsctl(url, "created", name)) -- the server's doing, which this spec guards against
    J.publish(url, subj .. ".0", { insert(3) })
    local got
    p, got = open(dir)
    assert.equal(1, p:run(runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" } }).messages)
    assert.same({ 3 }, got)
    p:close()
    J.publish(url, subj .. ".0", { insert(4) }) -- and the next run too, from the time now kept
    p, got = open(dir)
    assert.equal(1, p:run(runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" } }).messages)
    assert.same({ 4 }, got)
    p:close()
  end)

  -- 1 and 2 applied from a stream, which is then deleted and made again
  -- with 11, 12 and 13: the stream's name, its subject and the state.
  local function made_again_past_the_position()
    local name, subj = stream()
    J.publish(url, subj .. ".0", { insert(1), insert(2) })
    local dir = H.tmpdir()
    local p = open(dir)
    p:run(runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" } })
    p:close()
    os.execute("sleep 0.01")
    jsctl(url, "delete", name)
    jsctl(url, "add", name, "'" .. subj .. ".>'")
    J.publish(url, subj .. ".0", { insert(11), insert(12), insert(13) })
    return name, subj, dir
  end

  -- its messages are no older than its creation time: the time is sure
  it("is still an error when the stream was made again, filled past the position and restarted", function()
    local name, subj, dir = made_again_past_the_position()
    restart(name)
    jsctl(url, "edit", name, "maxmsgsize=100000")
    local p = open(dir)
    assert.matches("is 2 of an earlier stream of that name", H.error_of(p.run, p,
      runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" } }), 1, true)
    p:close()
  end)

  -- 0.40 left this open: the restarts moved the new stream's creation
  -- time past its messages, so the time said nothing and the source read
  -- on from 3, passing over 11 and 12. The message at the position (the
  -- new stream's 12, not the 2 applied) tells it (29).
  it("is an error when the stream was made again, then restarted, edited and restarted (29)", function()
    local name, subj, dir = made_again_past_the_position()
    os.execute("sleep 0.01")
    restart(name)
    jsctl(url, "edit", name, "maxmsgsize=100000")
    restart(name)
    local p, got = open(dir)
    local err = H.error_of(p.run, p, runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" } })
    assert.equal(("%s/%s: stream %s: the state's position for %s.0 is 2 of an earlier stream of that name: the "
                  .. "stream was made again (its sequences start over: its message 2 is not the one applied), and "
                  .. "messages 1..2 would be passed over; rebuild the state"):format(url, name, name, subj), err)
    assert.same({}, got)
    assert.equal(2, p:_js_position(name, subj .. ".0"))
    p:close()
  end)
end)
