-- js_refused_edges28_spec.lua — a JetStream sink whose stream refuses
-- events (JS-4 in core/jetstream.c): full with discard = new, a message
-- over the stream's max message size, no stream left for the subject.
-- The error said "the server refused 2 events" and not why, so nothing
-- told the stream's limit from a deleted stream. The group stays in the
-- outbox and goes out once, under its ids, when the stream takes it. One
-- nats-server on 127.0.0.1 of its own, always stopped.
local runnel = require "runnel"
local H = require "spec.helper"
local J = require "spec.js_helper"
local jsctl, dump = J.jsctl, J.dump

local server, why = J.start()

describe("a jetstream sink the stream refuses (28)", function()
  if not server then
    it("starts nats-server on 127.0.0.1", function() error(why) end)
    return
  end
  local url = server.url
  teardown(function() J.stop(server); H.cleanup() end)
  local stream = J.streams(url, "F")

  local function table_of(p)
    return p:table("t", { {"id","int"}, {"s","string", null = true}, key = "id" })
  end

  it("says the server's reason when the stream is full (discard new); the rest goes out once after a purge", function()
    local name, subj = stream("maxmsgs=3 discard=new")
    local dir = H.tmpdir()
    local p = runnel.open(dir)
    local t = table_of(p)
    t:sink(runnel.jetstream{ url = url, subject = subj .. ".out", timeout = 5 })
    p:begin()
    for i = 1, 5 do t:insert{ id = i } end
    p:commit()
    local err = H.error_of(p.deliver, p)
    assert.equal(("t: jetstream %s.out: group 1: the server refused 2 events (maximum messages exceeded); they "
                  .. "wait in the outbox"):format(subj), err)
    assert.equal(3, #dump(url, name, subj .. ".out"))
    p:close()
    jsctl(url, "purge", name)
    p = runnel.open(dir)
    t = table_of(p)
    t:sink(runnel.jetstream{ url = url, subject = subj .. ".out", timeout = 5 })
    p:deliver()
    local msgs = dump(url, name, subj .. ".out")
    assert.equal(2, #msgs)
    assert.matches(":1:4$", msgs[1][2])
    assert.matches(":1:5$", msgs[2][2])
    p:close()
  end)

  it("says the server's reason when no stream holds the subject any more", function()
    local name, subj = stream()
    local p = runnel.open()
    local t = table_of(p)
    t:sink(runnel.jetstream{ url = url, subject = subj .. ".out", timeout = 5 })
    jsctl(url, "delete", name)
    t:insert{ id = 1 }
    local err = H.error_of(p.deliver, p)
    assert.equal(("t: jetstream %s.out: group 1: the server refused 1 event (No responders available for request: "
                  .. "no stream holds the subject); they wait in the outbox"):format(subj), err)
    jsctl(url, "add", name, "'" .. subj .. ".>'")
    p:deliver()
    assert.equal(1, #dump(url, name, subj .. ".out"))
    p:close()
  end)

  -- the stream refused change 1 (too large) and stored change 2; reopened,
  -- the sink read 1:2 as the subject's last message and skipped change 1
  -- as published (JS-3): it was never published, and nothing said so
  it("publishes nothing after an event over the stream's max message size, so a reopen skips none", function()
    local name, subj = stream("maxmsgsize=100")
    local dir = H.tmpdir()
    local p = runnel.open(dir)
    local t = table_of(p)
    t:sink(runnel.jetstream{ url = url, subject = subj .. ".out", timeout = 5 })
    p:begin()
    t:insert{ id = 1, s = ("x"):rep(200) }
    t:insert{ id = 2, s = "y" }
    p:commit()
    local err = H.error_of(p.deliver, p)
    assert.matches(("^t: jetstream %s.out: group 1 change 1 is %%d+ bytes with its header, over the max_msg_size of stream %s, 100: "
                    .. "it cannot be published and its group waits in the outbox"):format(subj, name), err)
    assert.equal(0, #dump(url, name, subj .. ".out"))
    p:close()
    p = runnel.open(dir)
    t = table_of(p)
    t:sink(runnel.jetstream{ url = url, subject = subj .. ".out", timeout = 5 })
    assert.equal(err, H.error_of(p.deliver, p)) -- still waiting, whole
    assert.equal(0, #dump(url, name, subj .. ".out"))
    p:close()
  end)
end)
