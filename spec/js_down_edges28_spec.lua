-- js_down_edges28_spec.lua — a JetStream sink delivering while its server
-- is gone (JS-2 in core/jetstream.c). The error was nats.c's word for
-- what filled up or timed out meanwhile ("publishing: Insufficient
-- Buffer", "no ack … (Timeout)"), with nothing saying the server could
-- not be reached. Nothing is lost or doubled: the run waits in the
-- outbox and goes out once the server is back. One nats-server on
-- 127.0.0.1 of its own, always stopped.
local runnel = require "runnel"
local H = require "spec.helper"
local J = require "spec.js_helper"
local jsctl, dump = J.jsctl, J.dump

local server, why = J.start()

describe("a jetstream sink while its server is gone (28)", function()
  if not server then
    it("starts nats-server on 127.0.0.1", function() error(why) end)
    return
  end
  local url = server.url
  local node = server.servers[1]
  after_each(function() if not node:pid() then node:start() end end) -- a failed test leaves the server up
  teardown(function() J.stop(server); H.cleanup() end)
  local stream = J.streams(url, "W")

  for _, c in ipairs{ { "a few events", 3, "no ack for some events within 500 ms" },
                      { "more events than the reconnect buffer holds", 200000, "publishing: Insufficient Buffer" } } do
    it(("says the server cannot be reached (%s), and publishes each once when it is back"):format(c[1]), function()
      local name, subj = stream()
      local p = runnel.open(H.tmpdir())
      local t = p:table("t", { {"id","int"}, key = "id" })
      t:sink(runnel.jetstream{ url = url, subject = subj .. ".out", timeout = 0.5 })
      node:kill(9)
      p:begin()
      for i = 1, c[2] do t:insert{ id = i } end
      p:commit()
      local err = H.error_of(p.deliver, p)
      assert.matches(("t: jetstream %s.out: group 1"):format(subj), err, 1, true)
      assert.matches(c[3], err, 1, true)
      assert.matches(("; the connection to the server is down (reconnecting to %s)"):format(url), err, 1, true)
      assert(node:start())
      jsctl(url, "wait", name, "10")
      local deadline, ok = os.time() + 10, false
      repeat -- the client reconnects within a second or so
        ok, err = pcall(p.deliver, p)
        if not ok then os.execute("sleep 0.1") end
      until ok or os.time() > deadline
      assert.is_true(ok, err)
      p:close()
      local msgs, seen = dump(url, name, subj .. ".out"), {}
      for _, m in ipairs(msgs) do
        assert.is_nil(seen[m[2]], "published twice: " .. m[2])
        seen[m[2]] = true
      end
      assert.equal(c[2], #msgs)
    end)
  end
end)
