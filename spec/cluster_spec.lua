-- cluster_spec.lua — partitioned workers on JetStream (scripts/cluster):
-- W worker processes over P partitions, one runnel state per partition, a
-- global guilds table, equal key by key to one process applying the same
-- input with p:run (the oracle), through kill -9 of workers at random
-- points, of the stream leader and of a follower in a 3-node cluster, a
-- worker down longer than the duplicate window, and a partition moved by
-- snapshot. Bounded: about a minute; every server and worker is stopped.
local runnel = require "runnel"
package.path = "scripts/cluster/?.lua;" .. package.path
local N = require "nats"
local Hn = require "harness"

local RUNNEL = os.getenv("RUNNEL_BIN") or "build/runnel"
local bins = { runnel = RUNNEL, jsctl = (RUNNEL:gsub("runnel$", "jsctl")) }
local KILLS = tonumber(os.getenv("CLUSTER_KILLS") or 20)
math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)"), 16) % 1000)

local function scratch()
  local d = os.tmpname()
  os.remove(d)
  os.execute("mkdir -p '" .. d .. "'")
  return d
end

local function assert_same_lines(expected, got)
  assert.equal(#expected, #got)
  for i = 1, #expected do
    if expected[i] ~= got[i] then assert.equal(expected[i], got[i], "first difference at line " .. i) end
  end
end

local function check(h, what)
  local oracle = h:oracle_lines()
  assert_same_lines(oracle, h:cluster_lines())
  local events, twice, differ = h:check_sink()
  assert.same({}, twice, what .. ": board events published twice")
  assert.same({}, differ, what .. ": partitions whose published board differs from the state")
  assert.is_true(events > 0)
end

describe("cluster", function()
  if not N.available() then
    it("needs nats-server", function() pending("skipped: nats-server is not installed") end)
    return
  end

  it("W workers over P partitions equal one process through kill -9s at random points", function()
    local dir = scratch()
    local server, why = N.single(dir)
    if not server then pending("skipped: nats-server cannot start: " .. tostring(why)); return end
    local h = Hn.new(bins, server.url, dir)
    local ok, err = pcall(function()
      h:create_streams(1, 1) -- a duplicate window of 1 s on the board
      h:generate(4, 3000, math.random(1000), KILLS)
      local parts = { { 0, 1 }, { 2, 3 } }
      for w = 1, 2 do h:start(w, parts[w], { idle = 1 }) end
      local published = 0
      for k = 1, 3 * KILLS do -- input keeps coming while workers die
        if h.kills >= KILLS then break end
        if published < KILLS then published = published + 1; h:publish(published, 5, k % 2 == 0) end
        Hn.sleep(0.05 + math.random() * 0.25)
        local w = math.random(2)
        if not h:alive(w) then w = 3 - w end
        h:kill(w)
        if k == KILLS // 2 then Hn.sleep(1.3) end -- down longer than the duplicate window
        for v = 1, 2 do if not h:alive(v) then h:start(v, parts[v], { idle = 1 }) end end -- idled out too
      end
      for c = published + 1, KILLS do h:publish(c, 5) end -- the chunks left
      for v = 1, 2 do if not h:alive(v) then h:start(v, parts[v], { idle = 1 }) end end
      assert.is_true(h:wait(60), "workers did not finish")
      assert.is_true(h.kills >= KILLS, "kills of a running worker: " .. h.kills)
      check(h, "kills")
    end)
    h:stop_all()
    server.stop()
    os.execute("rm -rf '" .. dir .. "'")
    assert(ok, err)
  end)

  it("loses nothing and applies nothing twice when the leader and a follower die (3 nodes, R3)", function()
    local dir = scratch()
    local c, why = N.cluster(dir)
    if not c then pending("skipped: nats-server cannot start: " .. tostring(why)); return end
    local h = Hn.new(bins, c.url, dir)
    local byname = {}
    for _, s in ipairs(c.servers) do byname[s.name] = s end
    local ok, err = pcall(function()
      h:create_streams(3)
      h:generate(4, 2000, math.random(1000), 4)
      h:publish(1)
      local leader = byname[h:leader()] -- killed while publishing
      leader:kill()
      h:publish(2)
      assert(leader:start())
      local parts = { { 0, 1 }, { 2, 3 } }
      for w = 1, 2 do h:start(w, parts[w], { idle = 3 }) end
      h:publish(3)
      leader = byname[h:leader()] -- killed while consuming
      leader:kill()
      Hn.sleep(0.5)
      assert(leader:start())
      local follower
      for name, s in pairs(byname) do if name ~= h:leader() and name ~= leader.name then follower = s end end
      follower:kill()
      h:publish(4)
      assert(follower:start())
      assert.is_true(h:wait(90), "workers did not finish")
      for w = 1, 2 do h:start(w, parts[w], { idle = 1 }) end -- a worker that gave up while the cluster healed resumes
      assert.is_true(h:wait(30), "workers did not finish")
      check(h, "cluster")
    end)
    h:stop_all()
    c.stop()
    if ok or not os.getenv("CLUSTER_KEEP") then os.execute("rm -rf '" .. dir .. "'") else print("kept " .. dir) end
    assert(ok, err)
  end)

  it("moves a partition between workers by snapshot and resumes exactly once", function()
    local dir = scratch()
    local server, why = N.single(dir)
    if not server then pending("skipped: nats-server cannot start: " .. tostring(why)); return end
    local h = Hn.new(bins, server.url, dir)
    local ok, err = pcall(function()
      h:create_streams(1)
      h:generate(2, 1500, math.random(1000), 2)
      h:publish(1)
      h:start(1, { 0, 1 }, { idle = 0.5 })
      assert.is_true(h:wait(30))
      -- partition 1 moves: a copy taken from the running state elsewhere
      local moved = dir .. "/elsewhere"
      os.execute("mkdir -p '" .. moved .. "'")
      local okc, out = Hn.sh(("%s snapshot '%s/states/p1' '%s/p1'"):format(RUNNEL, dir, moved))
      assert(okc, out)
      os.execute(("rm -rf '%s/states/p1' && mv '%s/p1' '%s/states/p1'"):format(dir, moved, dir))
      h:publish(2)
      h:start(1, { 0 }, { idle = 0.5 })
      h:start(2, { 1 }, { idle = 0.5 })
      assert.is_true(h:wait(30))
      check(h, "snapshot")
    end)
    h:stop_all()
    server.stop()
    os.execute("rm -rf '" .. dir .. "'")
    assert(ok, err)
  end)
end)
