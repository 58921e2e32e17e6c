-- writer.lua ROOT SEED sync|nosync CARRY SECONDS — the process the crash
-- test kills. Opens ROOT/state, declares the model's pipeline with its
-- sinks (ROOT/accounts.ndjson, ROOT/accounts.db, the store "cdc_log"),
-- and applies groups seq+1, seq+2 … of the seed's sequence until SECONDS
-- have passed (the driver's SIGKILL normally comes first).
--
-- ROOT/acks gets one line per group known durable: with sync after
-- p:commit returns, with nosync when p:on_durable reports it (CARRY > 0
-- bounds the carried transaction to that many groups). A line is flushed
-- before the next group starts; a SIGKILL cannot take back what write()
-- gave the kernel, so no fsync is needed for this test (no OS crash).
package.path = arg[0]:gsub("[^/]*$", "") .. "../?.lua;" .. package.path
local runnel = require "runnel"
local M = require "crash.model"

local root, seed, mode, carry, seconds = arg[1], math.tointeger(tonumber(arg[2])), arg[3], tonumber(arg[4]), tonumber(arg[5])
assert(root and seed and (mode == "sync" or mode == "nosync") and carry and seconds,
  "usage: writer.lua ROOT SEED sync|nosync CARRY SECONDS")

local acks = assert(io.open(root .. "/acks", "a"))
local function ack(seq)
  acks:write(seq, "\n")
  acks:flush()
end

local opts = { path = root .. "/state", sync = mode == "sync" }
if mode == "nosync" and carry > 0 then opts.carry = { groups = math.tointeger(carry) } end
local p = runnel.open(opts)
local rel = M.declare(p, runnel, { ndjson = root .. "/accounts.ndjson", sqlite = root .. "/accounts.db" })
if mode == "nosync" then p:on_durable(ack) end

local model = M.advance(M.new(false), seed, p:seq())
local stop = os.time() + seconds
while os.time() < stop do
  local k = p:seq() + 1
  M.apply(p, rel, M.gen(model, seed, k))
  assert(p:seq() == k, "the group did not get the next seq")
  if mode == "sync" then ack(k) end
end
p:close()
acks:close()
