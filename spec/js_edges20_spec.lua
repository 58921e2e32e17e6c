-- js_edges20_spec.lua — JetStream sink and source at more edges (JS-n in
-- core/jetstream.c, JSSRC-n in core/js_source.c): acks that came too late
-- and a re-send past the duplicate window in the same process, an event
-- the server cannot take, ids no header can hold, messages that are not
-- one change list. One nats-server on 127.0.0.1 of its own, always
-- stopped (teardown), and resumed when a test stopped it (SIGSTOP).
local runnel = require "runnel"
local H = require "spec.helper"
local J = require "spec.js_helper"
local jsctl, dump = J.jsctl, J.dump

local function scores(p) return p:table("scores", { {"id","int"}, {"player","string"}, {"points","int"}, key = "id" }) end

local server, why = J.start()

describe("jetstream edges (20)", function()
  if not server then
    it("starts nats-server on 127.0.0.1", function() error(why) end)
    return
  end
  local url = server.url
  local node = server.servers[1]
  local stopped = false
  local function pause() os.execute("kill -STOP " .. node:pid()); stopped = true end
  local function resume() os.execute("kill -CONT " .. node:pid()); stopped = false end
  after_each(function() if stopped then resume() end end) -- a failed test leaves no server paused
  teardown(function() if stopped then resume() end; J.stop(server); H.cleanup() end)
  local stream = J.streams(url, "X")

  -- Publishes the bytes of text as one message.
  local function publish_raw(subject, text)
    local dir = H.tmpdir()
    local f = assert(io.open(dir .. "/msg", "wb"))
    f:write(text)
    f:close()
    jsctl(url, "pub", subject, dir .. "/msg", "lines=99")
  end

  local function ids_of(msgs)
    local ids, seen = {}, {}
    for i, m in ipairs(msgs) do
      assert.is_nil(seen[m[2]], "published twice: " .. m[2])
      seen[m[2]] = true
      ids[i] = m[2]
    end
    return ids
  end

  describe("the sink", function()
    -- the server stalled past the timeout, then stored what it had been
    -- sent; the sink sent it again after the duplicate window, from the
    -- same process: the subject held the event twice (the skip of JS-3
    -- ran only at attach)
    it("re-sends nothing the server stored late, after the duplicate window, in the same process", function()
      local name, subj = stream("dupe=1")
      local p = runnel.open(H.tmpdir())
      local t = scores(p)
      t:sink(runnel.jetstream{ url = url, subject = subj .. ".out", timeout = 0.2 })
      t:insert{ id = 1, player = "p1", points = 1 }
      pause()
      t:insert{ id = 2, player = "p2", points = 2 } -- sent; the ack does not come in time
      local err = H.error_of(p.deliver, p)
      assert.matches(("^scores: jetstream %s.out: group 2: no ack for some events within 200 ms"):format(subj), err)
      resume()
      os.execute("sleep 1.5") -- the server stored group 2; its duplicate window passes
      p:deliver()
      t:insert{ id = 3, player = "p3", points = 3 }
      p:close()
      local msgs = dump(url, name, subj .. ".out")
      assert.equal(3, #ids_of(msgs))
      assert.matches('"id":2', msgs[2][3], 1, true)
      assert.matches('"id":3', msgs[3][3], 1, true)
    end)

    -- "jetstream s.out: publishing: Maximum Payload Exceeded": which
    -- relation, group and event, and how large, went unsaid; the group
    -- waits in the outbox for good
    it("says which relation, group and change is over the server's max payload", function()
      local name, subj = stream()
      local p = runnel.open(H.tmpdir())
      local t = scores(p)
      t:sink(runnel.jetstream{ url = url, subject = subj .. ".out", timeout = 2 })
      t:insert{ id = 1, player = "p1", points = 1 }
      t:insert{ id = 2, player = ("x"):rep(1100000), points = 2 }
      local err = H.error_of(p.deliver, p)
      assert.matches(("^scores: jetstream %s.out: group 2 change 1 is 1100%%d+ bytes, over the server's max_payload "
                      .. "of 1048576: "):format(subj), err)
      assert.equal(1, #dump(url, name, subj .. ".out"))
      p:close()
    end)

    -- the id went into the Nats-Msg-Id header as it was: "a\r\nX-Evil: 1"
    -- injected a header line, and the message id became something else
    it("refuses an id holding a control character, naming the relation", function()
      local _, subj = stream()
      local p = runnel.open()
      local t = scores(p)
      for bad, shown in pairs{ ["a\r\nX-Evil: 1"] = [["a\r\nX-Evil: 1"]], ["a\tb"] = [["a\tb"]], ["a\127"] = [["a\u007f"]] } do
        local err = H.error_of(function() t:sink(runnel.jetstream{ url = url, subject = subj .. ".out", id = bad }) end)
        assert.equal(("scores: jetstream %s.out: the id %s holds a control character; message ids go in a header"):format(
          subj, shown), err)
      end
      p:close()
    end)
  end)

  describe("the source", function()
    local M = string.char
    -- {rel = "scores", op = "insert", row = {id = i, player = "p", points = i}} as msgpack (i < 128)
    local function change(i)
      return M(0x83, 0xa3) .. "rel" .. M(0xa6) .. "scores" .. M(0xa2) .. "op" .. M(0xa6) .. "insert" .. M(0xa3) .. "row"
        .. M(0x83, 0xa2) .. "id" .. M(i) .. M(0xa6) .. "player" .. M(0xa1) .. "p" .. M(0xa6) .. "points" .. M(i)
    end

    local function run(name, subj)
      return runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" }, batch = 10 }
    end

    -- the retention check ran at the start of a run only: messages
    -- discarded during the run, before it read them, were passed over
    -- without a word (the consumer went on at the stream's next message)
    it("is an error when messages not yet applied are discarded during the run", function()
      local name, subj = stream()
      local lines = {}
      for i = 1, 5 do lines[i] = ('{"rel":"scores","op":"insert","row":{"id":%d,"player":"p","points":%d}}'):format(i, i) end
      J.publish(url, subj .. ".0", lines)
      local p = runnel.open()
      local t = scores(p)
      t:sink(function(_, row) -- inside message 2's group: 3..5 go, 6 comes
        if row.id == 2 then
          jsctl(url, "purge", name)
          J.publish(url, subj .. ".0", { '{"rel":"scores","op":"insert","row":{"id":6,"player":"p","points":6}}' })
        end
      end)
      local err = H.error_of(p.run, p, runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" },
                                                                batch = 1 })
      assert.matches(("%s: stream %s: the state's position for %s.0 is 2 but the stream starts at 6: messages 3..5 "
                      .. "were discarded before they were applied"):format(name, name, subj), err, 1, true)
      assert.equal(2, t:count())
      assert.equal(2, p:_js_position(name, subj .. ".0"))
      p:close()
    end)

    -- "subscribing to other.0: Error ((jsm.c:2867): consumer filter
    -- subject is not a valid subset of the interest subjects)": nats.c's
    -- words, with the stream unnamed
    it("says the stream holds no such subject, naming both", function()
      local name, subj = stream()
      local p = runnel.open()
      local t = scores(p)
      local err = H.error_of(p.run, p, runnel.jetstream_source{ url = url, stream = name, subjects = { "elsewhere.0" } })
      assert.matches(("%s: stream %s holds no subject elsewhere.0 (its subjects: %s.>)"):format(name, name, subj), err, 1, true)
      assert.equal(0, t:count())
      p:close()
    end)

    -- refused, but as "expected NDJSON lines or a msgpack array of
    -- changes": it was one, and what was wrong went unsaid
    it("says a message has bytes after its msgpack array, applying nothing of it", function()
      local name, subj = stream()
      publish_raw(subj .. ".0", M(0x91) .. change(1) .. M(0x91) .. change(2))
      local p = runnel.open()
      local t = scores(p)
      local err = H.error_of(p.run, p, run(name, subj))
      assert.matches(("%s: %s.0 seq 1: a msgpack array of 1 change, then 49 bytes that are not part of it"):format(name, subj), err, 1, true)
      assert.equal(0, t:count())
      assert.equal(0, p:_js_position(name, subj .. ".0"))
      p:close()
    end)

    -- "expected NDJSON lines or a msgpack array of changes": the byte "["
    -- was read as the msgpack number 91
    it("says a JSON array is not NDJSON", function()
      local name, subj = stream()
      publish_raw(subj .. ".0", '[{"rel":"scores","op":"insert","row":{"id":1,"player":"p","points":1}}]\n')
      local p = runnel.open()
      scores(p)
      local err = H.error_of(p.run, p, run(name, subj))
      assert.matches(("%s: %s.0 seq 1: a JSON array: a message holds NDJSON lines, one change object each, or a "
                      .. "msgpack array of changes"):format(name, subj), err, 1, true)
      p:close()
    end)
  end)
end)
