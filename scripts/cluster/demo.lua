-- demo.lua — make cluster-demo: game shards publish match results into a
-- 3-node JetStream cluster on 127.0.0.1 (data under BUILD/cluster-demo); W
-- workers keep per-guild leaderboards over P partitions and a global guilds
-- table, and publish the boards' changes (debezium) back to JetStream. Mid
-- run a worker is killed with SIGKILL and a NATS node (the stream leader)
-- dies; both come back. The last line compares the workers' tables, key by
-- key, with one process applying the same input:
--     cluster: W workers, N changes, equal to one process: yes|no
-- Everything started here is stopped, on failure too.
--   lua5.4 scripts/cluster/demo.lua BUILD [W] [P] [CHANGES]
local runnel = require "runnel"
local here = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local N = require "nats"
local Hn = require "harness"

local build = arg[1] or "build"
local W, P, CHANGES = tonumber(arg[2] or 3), tonumber(arg[3] or 6), tonumber(arg[4] or 20000)
local dir = build .. "/cluster-demo"
math.randomseed(os.time())
os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "'")
local function say(fmt, ...) io.stderr:write(("cluster-demo: " .. fmt .. "\n"):format(...)) end

local c, why = N.cluster(dir)
if not c then
  say("nats-server cannot start: %s", tostring(why))
  os.exit(1)
end
local h = Hn.new({ runnel = build .. "/runnel", jsctl = build .. "/jsctl" }, c.url, dir)
local byname = {}
for _, s in ipairs(c.servers) do byname[s.name] = s end

local ok, err = pcall(function()
  say("3 nodes on %s", c.url)
  h:create_streams(3)
  local CHUNKS = 6
  h:generate(P, CHANGES, os.time() % 1000, CHUNKS)
  local parts = {}
  for p = 0, P - 1 do
    local w = p % W + 1
    parts[w] = parts[w] or {}
    parts[w][#parts[w] + 1] = p
  end
  for w = 1, W do h:start(w, parts[w], { idle = 4 }) end
  say("%d workers own partitions %s", W, (function()
    local t = {}
    for w = 1, W do t[w] = "{" .. table.concat(parts[w], ",") .. "}" end
    return table.concat(t, " ")
  end)())
  for k = 1, CHUNKS do
    h:publish(k, 10, k % 2 == 0) -- the shards' results: 10 changes a message, NDJSON or msgpack
    say("shards published part %d of %d", k, CHUNKS)
    if k == 2 then
      h:kill(2)
      say("worker 2 killed (SIGKILL)")
      Hn.sleep(1)
      h:start(2, parts[2], { idle = 4 })
      say("worker 2 restarted")
    elseif k == 4 then
      local name = h:leader()
      local node = byname[name] or c.servers[1]
      node:kill()
      say("NATS node %s (the stream leader) killed", node.name)
      Hn.sleep(1)
      assert(node:start())
      say("NATS node %s back", node.name)
    end
  end
  assert(h:wait(120), "workers did not finish")
  local oracle, changes = h:oracle_lines()
  local cluster = h:cluster_lines()
  local equal = #oracle == #cluster
  for i = 1, #oracle do equal = equal and oracle[i] == cluster[i] end
  local events, twice, differ = h:check_sink()
  say("board events published: %d, ids published twice: %d, partitions whose events differ from their board: %d",
      events, #twice, #differ)
  print(("cluster: %d workers, %d changes, equal to one process: %s"):format(W, changes,
        equal and #twice == 0 and #differ == 0 and "yes" or "no"))
end)
h:stop_all()
c.stop()
if not ok then
  say("failed: %s", tostring(err))
  print(("cluster: %d workers, %d changes, equal to one process: no"):format(W, CHANGES))
  os.exit(1)
end
