-- jetstream_spec.lua — the JetStream sink (JS-n, core/jetstream.c) and
-- source (JSSRC-n, core/js_source.c) against one nats-server on
-- 127.0.0.1, started on a free port with its data in a scratch directory
-- and always stopped.
local runnel = require "runnel"
local H = require "spec.helper"
local J = require "spec.js_helper"
local RUNNEL = os.getenv("RUNNEL_BIN") or "build/runnel"
local jsctl, dump, publish = J.jsctl, J.dump, J.publish

local function change(rel, op, row)
  local fields = {}
  for k, v in pairs(row) do fields[#fields + 1] = ("%q:%s"):format(k, type(v) == "string" and ("%q"):format(v) or tostring(v)) end
  table.sort(fields)
  return ('{"rel":%q,"op":%q,"row":{%s}}'):format(rel, op, table.concat(fields, ","))
end

local server, why = J.start()

describe("jetstream", function()
  if not server then
    it("starts nats-server on 127.0.0.1", function() error(why) end)
    return
  end
  local url = server.url
  teardown(function() J.stop(server); H.cleanup() end)
  -- A fresh stream with its own subjects: "<name>.>"; returns its name and subject prefix.
  local stream = J.streams(url, "S")

  local function scores(p)
    return p:table("scores", { {"id","int"}, {"player","string"}, {"points","int"}, key = "id" })
  end

  describe("sink (JS-1..3)", function()
    it("publishes each change of a durable group with the id <state id>:<seq>:<n>", function()
      local name, subj = stream()
      local p = runnel.open(H.tmpdir())
      local t = scores(p)
      t:sink(runnel.jetstream{ url = url, subject = subj .. ".out" })
      p:batch(function() t:insert{ id = 1, player = "ann", points = 3 }; t:insert{ id = 2, player = "bob", points = 1 } end)
      t:update{ id = 1, points = 5 }
      t:delete{ id = 2 }
      local sid = p:state_id()
      p:close()
      local msgs = dump(url, name, subj .. ".out")
      assert.same({ sid .. ":1:1", sid .. ":1:2", sid .. ":2:1", sid .. ":3:1" },
                  { msgs[1][2], msgs[2][2], msgs[3][2], msgs[4][2] })
      assert.equal('{"verb":"INSERT","id":1,"player":"ann","points":3}', msgs[1][3])
      assert.equal('{"verb":"UPDATE","id":1,"player":"ann","points":5}', msgs[3][3])
      assert.equal('{"verb":"DELETE","id":2}', msgs[4][3])
    end)

    it("publishes the debezium form of a relation's changes", function()
      local name, subj = stream()
      local p = runnel.open()
      local t = scores(p)
      t:sink(runnel.jetstream{ url = url, subject = subj .. ".cdc", format = "debezium" })
      t:insert{ id = 7, player = "cy", points = 2 }
      t:update{ id = 7, points = 4 }
      p:close()
      local msgs = dump(url, name, subj .. ".cdc")
      assert.equal(2, #msgs)
      local ev = runnel.json_decode(msgs[2][3])
      assert.equal("u", ev.op)
      assert.equal(2, ev.before.points)
      assert.equal(4, ev.after.points)
    end)

    -- A child commits groups and dies by SIGKILL after their delivery, before
    -- the marks reach the state: the next open delivers them again.
    local function crash_after_delivery(state, subj, dupe_wait)
      local script = state .. ".lua"
      H.write(script, ([[
        local runnel = require "runnel"
        local p = runnel.open(%q)
        local t = p:table("scores", { {"id","int"}, {"player","string"}, {"points","int"}, key = "id" })
        t:sink(runnel.jetstream{ url = %q, subject = %q })
        for i = 1, 5 do t:insert{ id = i, player = "p" .. i, points = i } end
        os.execute("kill -9 $PPID")
      ]]):format(state, url, subj))
      H.sh(RUNNEL .. " run " .. script)
      if dupe_wait then os.execute("sleep " .. dupe_wait) end
      local p = runnel.open(state)
      local t = scores(p)
      t:sink(runnel.jetstream{ url = url, subject = subj })
      t:insert{ id = 6, player = "p6", points = 6 }
      p:close()
    end

    it("publishes nothing twice after a crash: the server drops the re-sent ids", function()
      local name, subj = stream("dupe=60")
      local state = H.tmpdir() .. "/st"
      crash_after_delivery(state, subj .. ".out")
      local msgs = dump(url, name, subj .. ".out")
      assert.equal(6, #msgs)
    end)

    it("publishes nothing twice after an outage longer than the duplicate window (JS-3)", function()
      local name, subj = stream("dupe=0.5")
      local state = H.tmpdir() .. "/st"
      crash_after_delivery(state, subj .. ".out", 1.2)
      local msgs, ids = dump(url, name, subj .. ".out"), {}
      for _, m in ipairs(msgs) do assert.is_nil(ids[m[2]], "published twice: " .. m[2]); ids[m[2]] = true end
      assert.equal(6, #msgs)
    end)

    it("refuses a subject no stream holds", function()
      local p = runnel.open()
      local t = scores(p)
      local err = H.error_of(function() t:sink(runnel.jetstream{ url = url, subject = "nowhere.x" }) end)
      assert.matches("no stream holds subject nowhere.x", err, 1, true)
      p:close()
    end)
  end)

  describe("source (JSSRC-1..4)", function()
    it("applies NDJSON and msgpack messages as groups and keeps the positions in the state", function()
      local name, subj = stream()
      publish(url, subj .. ".0", { change("scores", "insert", { id = 1, player = "ann", points = 1 }),
                                   change("scores", "insert", { id = 2, player = "bob", points = 2 }),
                                   change("scores", "update", { id = 1, points = 10 }) }, 2)
      local dir = H.tmpdir()
      H.write(dir .. "/mp.ndjson", change("scores", "insert", { id = 3, player = "cy", points = 3 }) .. "\n"
                                  .. change("scores", "delete", { id = 2 }) .. "\n")
      jsctl(url, "pub", subj .. ".0", dir .. "/mp.ndjson", "lines=2", "mp=1")
      local state = H.tmpdir()
      local p = runnel.open(state)
      local t = scores(p)
      local src = runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" }, batch = 1 }
      local st = p:run(src)
      assert.same({ 3, 5, 3 }, { st.messages, st.applied, st.groups })
      assert.same({ 10, 3 }, { t:get(1).points, t:get(3).points })
      assert.is_nil(t:get(2))
      assert.equal(3, p:_js_position(name, subj .. ".0"))
      assert.equal(0, p:run(src).messages) -- nothing new
      p:close()
      p = runnel.open(state) -- the position comes from the state
      t = scores(p)
      publish(url, subj .. ".0", { change("scores", "upsert", { id = 4, player = "di", points = 4 }) })
      st = p:run(src)
      assert.same({ 1, 1 }, { st.messages, st.applied })
      assert.equal(3, t:count())
      assert.equal(4, p:_js_position(name, subj .. ".0"))
      p:close()
    end)

    it("rolls a bad message's group back, names subject and sequence, and keeps the position", function()
      local name, subj = stream()
      publish(url, subj .. ".0", { change("scores", "insert", { id = 1, player = "ann", points = 1 }),
                                   change("scores", "insert", { id = 1, player = "dup", points = 1 }) }, 1)
      local p = runnel.open()
      local t = scores(p)
      local src = runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" }, batch = 10 }
      local err = H.error_of(function() p:run(src) end)
      assert.matches(subj .. ".0 seq 2: line 1: ", err, 1, true)
      assert.matches("scores", err, 1, true)
      assert.equal(0, t:count())
      assert.equal(0, p:_js_position(name, subj .. ".0"))
      p:run(runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" }, batch = 1, limit = 1 })
      assert.equal(1, t:count())
      assert.equal(1, p:_js_position(name, subj .. ".0"))
      p:close()
    end)

    it("names the relation and column of a number a message's JSON cannot hold exactly (json_change.c)", function()
      local name, subj = stream()
      publish(url, subj .. ".0", { '{"rel":"scores","op":"insert","row":{"id":1,"player":"a","points":1e400}}' })
      publish(url, subj .. ".1", { '{"rel":"scores","op":"insert","row":{"id":2,"player":"b","points":9007199254740993.0}}' })
      local p = runnel.open()
      local t = scores(p)
      local function run(s) p:run(runnel.jetstream_source{ url = url, stream = name, subjects = { s }, batch = 1 }) end
      local err = H.error_of(run, subj .. ".0")
      -- before: malformed JSON at column 62: real number overflow near '1e400'
      assert.matches(subj .. '.0 seq 1: line 1: scores: column "points": the number 1e400 is beyond a float\'s range',
                     err, 1, true)
      err = H.error_of(run, subj .. ".1") -- before: stored 9007199254740992
      assert.matches('scores: column "points": expected int, got a number with a fraction part or an exponent', err, 1, true)
      assert.equal(0, t:count())
      p:close()
    end)

    it("is an error when retention discarded messages not yet applied", function()
      local name, subj = stream("maxmsgs=3")
      publish(url, subj .. ".0", { change("scores", "insert", { id = 1, player = "a", points = 1 }) })
      local p = runnel.open()
      scores(p)
      local src = runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" } }
      p:run(src)
      local lines = {}
      for i = 2, 6 do lines[#lines + 1] = change("scores", "insert", { id = i, player = "a", points = i }) end
      publish(url, subj .. ".0", lines)
      local err = H.error_of(function() p:run(src) end)
      assert.matches("the state's position for " .. subj .. ".0 is 1 but the stream starts at 4: messages 2..3 were discarded", err, 1, true)
      p:close()
      local fresh = runnel.open() -- no position yet: from the stream's first message
      local t = scores(fresh)
      assert.equal(3, fresh:run(src).messages)
      assert.same({ 4, 5, 6 }, { t:get(4).points, t:get(5).points, t:get(6).points })
      fresh:close()
    end)

    it("runs from the CLI with --input nats://…", function()
      local name, subj = stream()
      publish(url, subj .. ".7", { change("scores", "insert", { id = 9, player = "zed", points = 9 }) })
      local dir = H.tmpdir()
      H.write(dir .. "/p.lua", ([[
        local runnel = require "runnel"
        local p = runnel.open(%q)
        p:table("scores", { {"id","int"}, {"player","string"}, {"points","int"}, key = "id" })
        return p
      ]]):format(dir .. "/st"))
      local _, err, code = H.sh(("%s run %s/p.lua --input '%s/%s/%s.7'"):format(RUNNEL, dir, url, name, subj))
      assert.equal(0, code, err)
      assert.matches("1 lines, 1 applied, 0 rejected, 1 group", err, 1, true)
    end)

    it("writes what it applied while it waits, and stops at Ctrl-C with it committed, exiting 130", function()
      -- idle=-1: before, nothing stopped it but a second Ctrl-C, which
      -- killed the process (a Lua hook never fires in the run's C loop)
      local name, subj = stream()
      publish(url, subj .. ".7", { change("scores", "insert", { id = 9, player = "zed", points = 9 }) })
      local dir = H.tmpdir()
      H.write(dir .. "/p.lua", ([[
        local runnel = require "runnel"
        local p = runnel.open{ path = %q, sync = false }
        p:table("scores", { {"id","int"}, {"player","string"}, {"points","int"}, key = "id" })
        return p
      ]]):format(dir .. "/st"))
      -- (its pid from the shell, not pgrep: under make asan LD_PRELOAD reaches pgrep and it can hang)
      os.execute(("sh -c '%s run %s/p.lua --input \"%s/%s/%s.7?idle=-1\" >%s/out 2>%s/err & echo $! >%s/pid; " ..
                  "wait $!; echo $? >%s/status' >/dev/null 2>&1 </dev/null &"):format(RUNNEL, dir, url, name, subj, dir,
                                                                                    dir, dir, dir))
      local pid, seen
      for _ = 1, 600 do -- the row applied (up to 30 s on a loaded machine), then the signal
        local f = io.open(dir .. "/pid")
        pid = pid or f and f:read("n")
        if f then f:close() end
        local out = H.sh(("%s query %s/st scores --format ndjson 2>/dev/null"):format(RUNNEL, dir))
        seen = out:find('"zed"', 1, true)
        if pid and seen then break end
        os.execute("sleep 0.05")
      end
      -- caught up, it wrote its carried group before waiting (sync = false):
      -- before, the group waited in memory for the next message
      assert.is_truthy(seen, "the applied message never reached the state while the run waited")
      os.execute("kill -INT " .. assert(pid, "runnel is not running"))
      local status
      for _ = 1, 200 do -- within a second or so: it checks between waits of at most a second
        local f = io.open(dir .. "/status")
        status = f and f:read("n")
        if f then f:close() end
        if status then break end
        os.execute("sleep 0.05")
      end
      if not status then os.execute("kill -KILL " .. pid .. " 2>/dev/null") end -- idle=-1: never left running
      assert.equal(130, status)
      assert.matches("interrupted after 1 messages: the messages up to there are applied and committed",
                     H.read(dir .. "/err"), 1, true)
    end)
  end)

  describe("runnel snapshot", function()
    it("copies a state with its id and positions while its writer runs", function()
      local name, subj = stream()
      publish(url, subj .. ".0", { change("scores", "insert", { id = 1, player = "ann", points = 1 }) })
      local state = H.tmpdir()
      local p = runnel.open(state)
      scores(p)
      p:run(runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" } })
      local sid = p:state_id()
      local dest = H.tmpdir() .. "/copy"
      local _, err, code = H.sh(RUNNEL .. " snapshot " .. state .. " " .. dest)
      assert.equal(0, code, err)
      p:close()
      local q = runnel.open(dest)
      assert.equal(1, scores(q):count())
      assert.equal(sid, q:state_id())
      assert.equal(1, q:_js_position(name, subj .. ".0"))
      q:close()
      _, err, code = H.sh(RUNNEL .. " snapshot " .. state .. " " .. dest)
      assert.equal(1, code)
      assert.matches("holds a state already", err, 1, true)
    end)
  end)
end)
