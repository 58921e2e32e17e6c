-- js_refused_edges28b_spec.lua — JS-7 (core/jetstream.c) against a
-- stream whose max_msg_size is lowered after the sink attached, and the
-- size that counts (the data and the Nats-Msg-Id header, as the server
-- counts them). The sink read the limit at attach only: lowered later,
-- the server refused change 1 and stored change 2, and a reopen skipped
-- change 1 as published (JS-3) without a word. One nats-server on
-- 127.0.0.1 of its own, always stopped.
local runnel = require "runnel"
local H = require "spec.helper"
local J = require "spec.js_helper"
local jsctl, dump = J.jsctl, J.dump

local server, why = J.start()

describe("a jetstream sink and the stream's max_msg_size (28b)", function()
  if not server then
    it("starts nats-server on 127.0.0.1", function() error(why) end)
    return
  end
  local url = server.url
  teardown(function() J.stop(server); H.cleanup() end)
  local stream = J.streams(url, "M")

  local function open(dir, subj)
    local p = runnel.open(dir)
    local t = p:table("t", { {"id","int"}, {"s","string", null = true}, key = "id" })
    t:sink(runnel.jetstream{ url = url, subject = subj .. ".out", timeout = 5 })
    return p, t
  end

  it("publishes nothing after an event over a max_msg_size lowered since the sink attached", function()
    local name, subj = stream()
    local dir = H.tmpdir()
    local p, t = open(dir, subj)
    jsctl(url, "edit", name, "maxmsgsize=100")
    p:begin()
    t:insert{ id = 1, s = ("x"):rep(200) }
    t:insert{ id = 2, s = "y" }
    p:commit()
    local err = H.error_of(p.deliver, p)
    assert.matches(("^t: jetstream %s.out: group 1 change 1 is %%d+ bytes with its header, over the max_msg_size of stream %s, 100"):format(subj, name), err)
    assert.equal(0, #dump(url, name, subj .. ".out"))
    p:close()
    p = open(dir, subj) -- change 1 is not skipped as published
    assert.equal(err, H.error_of(p.deliver, p))
    p:close()
    jsctl(url, "edit", name, "maxmsgsize=100000")
    p = open(dir, subj)
    p:deliver()
    local msgs = dump(url, name, subj .. ".out")
    assert.equal(2, #msgs)
    assert.matches(":1:1$", msgs[1][2])
    p:close()
  end)

  -- the event's size, its id and 27 bytes of header ("NATS/1.0\r\n",
  -- "Nats-Msg-Id: ", "\r\n\r\n") make the message's size at the server
  it("takes an event the size of max_msg_size with its header and says one byte more, naming that size", function()
    local probe, psubj = stream()
    local p, t = open(nil, psubj)
    t:insert{ id = 1, s = "abc" }
    local m = dump(url, probe, psubj .. ".out")[1]
    p:close()
    local size = #m[3] + #m[2] + 27
    local name, subj = stream("maxmsgsize=" .. size)
    p, t = open(nil, subj)
    t:insert{ id = 1, s = "abc" }
    assert.equal(1, #dump(url, name, subj .. ".out"))
    p:close()
    name, subj = stream("maxmsgsize=" .. (size - 1))
    p, t = open(nil, subj)
    t:insert{ id = 1, s = "abc" }
    local err = H.error_of(p.deliver, p)
    assert.equal(("t: jetstream %s.out: group 1 change 1 is %d bytes with its header, over the max_msg_size of "
                  .. "stream %s, %d: it cannot be published and its group waits in the outbox (raise the stream's "
                  .. "max_msg_size)"):format(subj, size, name, size - 1), err)
    assert.equal(0, #dump(url, name, subj .. ".out"))
    p:close()
  end)
end)
