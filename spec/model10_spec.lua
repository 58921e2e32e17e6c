-- A randomized differential test against a plain-Lua model (the campaign
-- is spec/model10_campaign.lua; `make model` runs it longer). Each seed
-- applies random groups of changes — some that must fail, rollbacks,
-- batches that raise, a sink that fails the group, close and reopen of the
-- state — and after every group compares each derived relation (tops,
-- indexes with range/rank/count, distincts, filter/map over joins, windowed
-- aggregates with grace), every sink's events (raw, consolidated, durable)
-- and every CDC image with the model's recomputation from its tables.
local H = require "helper"
local C = require "model10_campaign"

describe("model10: runnel against a model recomputed from scratch", function()
  teardown(H.cleanup)

  -- (version 11, `make model`'s: p:run of NDJSON, attach reads, second
  -- opens, drops, the joins' tables' columns and the maps' changing)
  for _, case in ipairs{ { seed = 1, sync = true }, { seed = 2, sync = false }, { seed = 3, groups = 150 },
                         { seed = 1, groups = 160, version = 11 } } do
    it(("agrees for seed %d (%d groups, sync=%s, version %d)"):format(case.seed, case.groups or 300, tostring(case.sync),
                                                                      case.version or 10), function()
      local err = C.run{ seed = case.seed, groups = case.groups or 300, dir = H.tmpdir(), reopen_every = 40, sync = case.sync,
                         version = case.version }
      assert(err == nil, err)
    end)
  end
end)
