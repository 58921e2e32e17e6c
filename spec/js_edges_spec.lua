-- js_edges_spec.lua — JetStream at the edges of exactly once (JSSRC-n in
-- core/js_source.c, JS-n in core/jetstream.c; DESIGN §13): bad messages,
-- duplicates, a worker killed at each step of a group, the server killed
-- and started again mid-run. One nats-server on 127.0.0.1 of its own, on a
-- free port, always stopped; every wait is bounded.
local runnel = require "runnel"
local H = require "spec.helper"
package.path = "scripts/cluster/?.lua;" .. package.path
local N = require "nats"

local JSCTL = (os.getenv("RUNNEL_BIN") or "build/runnel"):gsub("runnel$", "jsctl")

local function jsctl(url, ...)
  local out, err, code = H.sh(("ASAN_OPTIONS=detect_leaks=0 %s '%s' %s"):format(JSCTL, url, table.concat({ ... }, " ")))
  assert(code == 0, err)
  return out
end

-- { {seq, id, data}, … } of a subject.
local function dump(url, stream, subject)
  local msgs = {}
  for line in jsctl(url, "dump", stream, subject):gmatch("[^\n]+") do
    local seq, id, data = line:match("^(%d+)\t([^\t]*)\t(.*)$")
    msgs[#msgs + 1] = { tonumber(seq), id, data }
  end
  return msgs
end

-- Publishes each text as one message (its lines joined), with ids
-- "<id>:<n>" when id is given.
local function publish(url, subject, texts, id)
  local dir = H.tmpdir()
  H.write(dir .. "/in", table.concat(texts, "\n") .. "\n")
  jsctl(url, "pub", subject, dir .. "/in", "lines=1", id and ("id=" .. id) or "")
end

local function insert(id) return ('{"rel":"scores","op":"insert","row":{"id":%d,"player":"p%d","points":%d}}'):format(id, id, id) end

local SCORES = '{ {"id","int"}, {"player","string"}, {"points","int"}, key = "id" }'
local function scores(p) return p:table("scores", load("return " .. SCORES)()) end

math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)"), 16) % 1000)
local home = os.tmpname()
os.remove(home)
local server, why = nil, nil
if N.available() then server, why = N.single(home) else why = "nats-server is not installed" end

describe("jetstream edges", function()
  if not server then
    it("needs nats-server", function() pending("skipped: nats-server cannot start: " .. tostring(why)) end)
    return
  end
  local url = server.url
  teardown(function() server.stop(); os.execute("rm -rf '" .. home .. "'"); H.cleanup() end)

  local streams = 0
  local function stream(opts)
    streams = streams + 1
    local name = "E" .. streams
    jsctl(url, "add", name, "'" .. name:lower() .. ".>'", opts or "")
    return name, name:lower()
  end

  local function source(name, subject, batch)
    return runnel.jetstream_source{ url = url, stream = name, subjects = { subject }, batch = batch or 10 }
  end

  -- Publishes text as one message (lines=99: the file's lines together).
  local function publish_one(subject, text)
    local dir = H.tmpdir()
    local f = assert(io.open(dir .. "/msg", "wb"))
    f:write(text, "\n")
    f:close()
    jsctl(url, "pub", subject, dir .. "/msg", "lines=99")
  end

  describe("a bad message", function()
    -- message 1 is committed alone; messages 2 (good) and 3 (bad) share a
    -- group, which rolls back whole: the position stays at 1, and every
    -- later run stops at message 3 again
    local cases = {
      { "malformed JSON", '{"rel":"scores", bad', 'line 1: malformed JSON at column 20' },
      { "an unknown relation", '{"rel":"nope","op":"insert","row":{"id":9}}', 'line 1: unknown relation "nope"' },
      { "an unknown column", '{"rel":"scores","op":"insert","row":{"id":9,"player":"x","points":1,"pts":2}}',
        'line 1: scores: unknown column "pts"' },
      { "a value of the wrong type", '{"rel":"scores","op":"insert","row":{"id":9,"player":"x","points":"many"}}',
        'line 1: scores: column "points": expected int, got string' },
      -- the relation went unnamed: NDJSON files said "scores: duplicate key", JetStream only "duplicate key"
      { "a key given twice", '{"rel":"scores","op":"insert","row":{"id":9,"id":8,"player":"x","points":1}}',
        'line 1: scores: duplicate key "id"' },
      { "a bad second line", insert(9) .. '\n{"rel":"scores","op":"upsert","row":{"player":"x"}}',
        'line 2: scores: ' },
      { "msgpack that is not an array of changes", '\x93\x01', 'expected NDJSON lines or a msgpack array of changes' },
    }
    for _, c in ipairs(cases) do
      it(("(%s) rolls its group back and names stream, subject, sequence, line, relation and column"):format(c[1]), function()
        local name, subj = stream()
        publish(url, subj .. ".0", { insert(1), insert(2) })
        publish_one(subj .. ".0", c[2])
        local p = runnel.open(H.tmpdir())
        local t = scores(p)
        local told = {}
        t:sink{ insert = function(row) told[#told + 1] = "insert " .. row.id end,
                rollback = function(seq) told[#told + 1] = "rollback " .. seq end }
        assert.equal(1, p:run(runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" }, limit = 1 }).messages)
        for _ = 1, 2 do
          local ok, err = pcall(p.run, p, source(name, subj .. ".0", 10))
          assert.is_false(ok)
          assert.matches(("/%s: %s.0 seq 3: %s"):format(name, subj, c[3]), err, 1, true)
        end
        assert.same({ "insert 1" }, told) -- sinks get a group's verbs at its commit: none of the failed ones
        assert.same({ 1 }, (function() local ids = {}; for r in t:rows() do ids[#ids + 1] = r.id end; return ids end)())
        assert.equal(1, p:seq())
        assert.equal(1, p:_js_position(name, subj .. ".0"))
        p:close()
      end)
    end

    it("that is empty (blank lines only) is no change: the position moves past it", function()
      local name, subj = stream()
      publish(url, subj .. ".0", { insert(1) })
      publish_one(subj .. ".0", "  \n\r\n")
      publish(url, subj .. ".0", { insert(2) })
      local p = runnel.open()
      local t = scores(p)
      assert.equal(3, p:run(source(name, subj .. ".0", 1)).messages)
      assert.equal(2, t:count())
      assert.equal(3, p:_js_position(name, subj .. ".0"))
      p:close()
    end)
  end)

  describe("duplicates", function()
    it("published again under the same message ids are applied once (the server drops them)", function()
      local name, subj = stream("dupe=60")
      publish(url, subj .. ".0", { insert(1), insert(2) }, "shard7")
      publish(url, subj .. ".0", { insert(1), insert(2) }, "shard7")
      publish(url, subj .. ".0", { insert(3) }, "shard8")
      local p = runnel.open()
      local t = scores(p)
      assert.equal(3, p:run(source(name, subj .. ".0")).messages)
      assert.equal(3, t:count())
      p:close()
    end)
  end)
end)
