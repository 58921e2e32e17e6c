-- scripts/model/run.lua — the model campaign (spec/model10_campaign.lua)
-- run longer: `make model N=groups SEED=s [SEEDS=k]` runs seeds s .. s+k-1
-- (default k = 1; MODEL_VERSION=10 for the generator before version 11),
-- N groups each, on a state directory of its own that is
-- closed and reopened every 40 groups. Prints one line per seed; on a
-- discrepancy, the seed, the group, the diff and the group's changes, and
-- exits 1.
package.path = "spec/?.lua;" .. package.path
local C = require "model10_campaign"

local groups = tonumber(arg[1]) or 2000
local seed = tonumber(arg[2]) or os.time()
local seeds = tonumber(arg[3]) or 1
local failed = 0
for s = seed, seed + seeds - 1 do
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "'"))
  local t0 = os.time()
  local err, stats = C.run{ seed = s, groups = groups, dir = dir, reopen_every = 40, version = tonumber(os.getenv("MODEL_VERSION")) or 11 }
  os.execute("rm -rf '" .. dir .. "'")
  if err then
    failed = failed + 1
    io.stderr:write(err, "\n")
  else
    print(("seed %d: %d groups agree (%d committed, %d refused, %d reopened; sync=%s) in %ds"):format(
      s, groups, stats.committed or 0, stats.refused or 0, stats.reopen or 0, stats.sync, os.time() - t0))
  end
end
print(("%d passed, %d failed"):format(seeds - failed, failed))
os.exit(failed == 0 and 0 or 1)
