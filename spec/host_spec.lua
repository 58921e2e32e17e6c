-- The example host (scripts/host/host.c): a C program that loads a Lua
-- pipeline, pushes msgpack changes each tick and reads results through C
-- subscriptions. Under make asan it is the sanitized build.
local H = require "helper"

local host = os.getenv("RUNNEL_HOST") or "build/host"

describe("the example host", function()
  it("runs ticks at a fixed rate and receives the join's and the CDC log's changes", function()
    local out, err, code = H.sh(host .. " 10 200 500 scripts/host/game.lua")
    assert.equal("", err)
    assert.equal(0, code)
    local players = tonumber(out:match("players: (%d+)"))
    local groups = tonumber(out:match("last group: (%d+)"))
    local inserts = tonumber(out:match("leaderboard: (%d+) inserts"))
    assert.equal(251, players)
    assert.equal(20 + 10, groups)        -- the guilds, then one group per tick
    assert.equal(players, inserts)       -- every player reaches the leaderboard once
    assert.matches("ticks: 10, changes per tick: 200, hz: 500", out, 1, true)
    assert.matches("leaderboard: 251 inserts, 1345 updates, 0 deletes; player log rows: 3597", out, 1, true)
    assert.matches("group_ms: p50 [%d.]+ p99 [%d.]+ max [%d.]+", out)
    assert.matches("commit_ms: p50 [%d.]+ p99 [%d.]+ max [%d.]+", out)
  end)

  it("hands its subscribers the same events, byte for byte, whatever the rate (write-back) and the carry", function()
    -- RUNNEL_HOST_HASH: a hash of every event (verb, id, seq, n, row and
    -- old bytes); the value is pinned, so a speed change that alters what
    -- subscribers receive fails here.
    local hashes = {}
    for _, args in ipairs({ "200 100 0", "200 100 500", "200 100 0 scripts/host/game.lua 1" }) do
      local out, err, code = H.sh("RUNNEL_HOST_HASH=1 " .. host .. " " .. args)
      assert.equal("", err)
      assert.equal(0, code)
      hashes[#hashes + 1] = out:match("events hash: (%x+)")
    end
    assert.same({ "46e16a73f32fe551", "46e16a73f32fe551", "46e16a73f32fe551" }, hashes)
  end)

  it("runs a control tick of arithmetic alone in each idle time when asked, and only at a tick rate", function()
    local out, err, code = H.sh("RUNNEL_HOST_CONTROL=1 " .. host .. " 20 10 100 scripts/host/game.lua")
    assert.equal("", err)
    assert.equal(0, code)
    local p50 = tonumber(out:match("control_ms: p50 ([%d.]+) p99 [%d.]+ max [%d.]+ over_1ms %d+"))
    assert.is_truthy(p50, out)
    assert.is_true(p50 > 0)
    out = H.sh("RUNNEL_HOST_CONTROL=1 " .. host .. " 20 10 0 scripts/host/game.lua") -- back to back: no idle time
    assert.is_falsy(out:find("control_ms", 1, true))
    out = H.sh(host .. " 20 10 100 scripts/host/game.lua") -- not asked
    assert.is_falsy(out:find("control_ms", 1, true))
  end)

  it("reports a script error and exits 1", function()
    local script = os.tmpname()
    local f = io.open(script, "w")
    f:write("error('no pipeline here')\n")
    f:close()
    local out, err, code = H.sh(host .. " 1 1 0 " .. script)
    os.remove(script)
    assert.equal("", out)
    assert.equal(1, code)
    assert.matches("no pipeline here", err, 1, true)
  end)
end)
