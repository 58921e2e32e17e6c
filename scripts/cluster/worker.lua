-- worker.lua — one worker process owning a static set of partitions, one
-- runnel state per partition (so a partition moves with its state):
--
--   runnel run worker.lua URL STREAM STATES PARTS [IDLE] [BATCH] [OUT_PREFIX]
--
-- PARTS "0,2": the partitions it owns, state STATES/p<p> each. Every
-- partition state applies results.<p> and the whole guilds subject (the
-- global table), BATCH messages per group (default 20), until nothing new
-- came for IDLE seconds (default 1; < 0: for ever). OUT_PREFIX ("-": none):
-- the board's changes go to OUT_PREFIX.<p> in the debezium form (a durable
-- sink). RUNNEL_SYNC=0 opens the states with sync = false. PIPELINE (a
-- file like leaderboard.lua, default it), PART_SUBJECT (results) and
-- GLOBAL_SUBJECT (guilds) run another workload the same way.
--
-- A failure (the cluster electing a leader, a node gone) closes every
-- state and opens them again: the positions come from the states, so
-- nothing is applied twice. After RETRY seconds (default 60) of failures
-- in a row the worker gives up.
local runnel = require "runnel"
local here = arg[0]:match("^(.*)/[^/]*$") or "."
local declare = dofile(os.getenv("PIPELINE") or (here .. "/leaderboard.lua"))
local part_subject = os.getenv("PART_SUBJECT") or "results"
local global_subject = os.getenv("GLOBAL_SUBJECT") or "guilds"
local url, stream, states, parts = arg[1], arg[2], arg[3], arg[4]
local idle, batch, out = tonumber(arg[5] or 1), tonumber(arg[6] or 20), arg[7]
local sync = os.getenv("RUNNEL_SYNC") ~= "0"
local retry = tonumber(os.getenv("RETRY") or 60)
local now = runnel.now

local owned = {}
local function close_all()
  for _, o in ipairs(owned) do o.p:close() end
  owned = {}
end

local function open_all()
  os.execute("mkdir -p '" .. states .. "'")
  for part in parts:gmatch("%d+") do
    local p = runnel.open{ path = states .. "/p" .. part, sync = sync }
    owned[#owned + 1] = { p = p }
    local rels = declare(runnel, p)
    if out and out ~= "" and out ~= "-" then
      (rels.out or rels.board):sink(runnel.jetstream{ url = url, subject = out .. "." .. part, format = "debezium" })
    end
    owned[#owned].src = runnel.jetstream_source{ url = url, stream = stream, subjects = { part_subject .. "." .. part, global_subject },
                                                 batch = batch }
  end
end

-- Runs every owned partition until idle; returns the messages applied.
local function serve()
  local quiet_since, total = now(), 0
  while true do
    local applied = 0
    for _, o in ipairs(owned) do applied = applied + o.p:run(o.src).messages end
    if total == 0 and applied > 0 then io.stderr:write(("worker %s: applying\n"):format(parts)) end
    total = total + applied
    if applied > 0 then quiet_since = now()
    elseif idle >= 0 and now() - quiet_since >= idle then return total
    else os.execute("sleep 0.05") end
  end
end

local total, failing_since = 0, nil
while true do
  local ok, got = pcall(function() open_all(); return serve() end)
  pcall(close_all)
  if ok then total = total + got; break end
  failing_since = failing_since or now()
  io.stderr:write(("worker %s: %s (retrying)\n"):format(parts, tostring(got)))
  if now() - failing_since > retry then error("worker " .. parts .. ": giving up: " .. tostring(got), 0) end
  os.execute("sleep 0.5")
end
io.stderr:write(("worker %s: %d messages\n"):format(parts, total))
