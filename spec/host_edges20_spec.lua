-- The example host (scripts/host/host.c) given a script that lacks what it
-- uses (round 20): it names the relation, rather than passing a NULL on to
-- runnel ("rn_subscribe: the relation is NULL (did rn_relation find it?)").
local H = require "helper"

local host = os.getenv("RUNNEL_HOST") or "build/host"

describe("the example host", function()
  it("names a relation its script does not declare, and exits 1", function()
    local script = os.tmpname()
    H.write(script, [[
      local p = ...
      p:table("players", { {"id","int"}, {"name","string"}, {"guild","int", null = true},
                           {"score","int", default = 0}, key = "id" })
      p:table("guilds", { {"id","int"}, {"name","string"}, key = "id" })
      p:table("matches", { {"id","int"}, {"player","int"}, {"points","int"}, key = "id" })
    ]])
    local out, err, code = H.sh(host .. " 1 1 0 " .. script)
    os.remove(script)
    assert.equal("", out)
    assert.equal(1, code)
    assert.equal(("host: %s declares no relation \"leaderboard\"\n"):format(script), err)
  end)

  it("says every argument in its usage", function()
    local _, err, code = H.sh(host .. " 0")
    assert.equal(2, code)
    assert.equal("usage: host [ticks] [changes_per_tick] [hz] [script] [carry_groups]\n", err)
  end)
end)
