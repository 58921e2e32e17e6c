-- Edges of p:drop and runnel drop a deploy meets (helper round 21): each
-- defect found has its regression test here, named after what it guards.
local runnel = require "runnel"
local H = require "helper"

local open = H.open_noting

describe("a join whose right table was dropped", function()
  after_each(H.cleanup)

  local function state()
    local dir = H.tmpdir()
    local p = open(dir)
    local t = p:table("t", { {"id","int"}, {"k","int"}, key = "id" })
    local u = p:table("u", { {"k","int"}, {"v","string"}, key = "k" })
    t:join(u, { on = "k", name = "j" })
    u:insert{ k = 1, v = "one" }
    t:insert{ id = 1, k = 1 }
    p:close()
    p = open(dir)
    p:drop("u") -- the join is not declared: nothing refuses it
    p:close()
    return dir
  end

  -- Regression: reading it said 'table "u" has another schema than when
  -- the join was last declared', of a table the state no longer holds.
  it("is refused saying the table was dropped, from runnel.attach", function()
    local dir = state()
    local ok, err = pcall(function()
      local a = runnel.attach(dir, "j")
      return a:count()
    end)
    assert.is_false(ok)
    assert.matches('join "j": table "u" it reads was dropped since the join was last declared', tostring(err), 1, true)
  end)

  it("is refused saying so when it was dropped after the attach", function()
    local dir = H.tmpdir()
    local p = open(dir)
    local t = p:table("t", { {"id","int"}, {"k","int"}, key = "id" })
    local u = p:table("u", { {"k","int"}, {"v","string"}, key = "k" })
    t:join(u, { on = "k", name = "j" })
    u:insert{ k = 1, v = "one" }
    t:insert{ id = 1, k = 1 }
    p:close()
    local a = runnel.attach(dir, "j")
    assert.equal(1, a:count())
    local _, err, code = H.sh(("%s drop '%s' u"):format(H.runnel_bin, dir))
    assert.equal(0, code, err)
    local ok, msg = pcall(a.count, a)
    a:close()
    assert.is_false(ok)
    assert.matches('join "j": table "u" it reads was dropped since the join was last declared', tostring(msg), 1, true)
  end)

  it("and from runnel query", function()
    local dir = state()
    local _, err, code = H.sh(("%s query '%s' j"):format(H.runnel_bin, dir))
    assert.equal(1, code)
    assert.matches('join "j": table "u" it reads was dropped since the join was last declared', err, 1, true)
  end)
end)

describe("an attach of a relation dropped and declared again with another key", function()
  after_each(H.cleanup)

  -- Regression: get with a key of the new declaration was refused against
  -- the attach's old columns ('attach t: get: column "id": expected int,
  -- got string'), as if the key were wrong, not the attach stale.
  it("says it was declared again, whatever key get is given", function()
    local dir = H.tmpdir()
    local p = open(dir)
    p:table("t", { {"id","int"}, {"v","string"}, key = "id" }):insert{ id = 1, v = "a" }
    p:close()
    local a = runnel.attach(dir, "t")
    assert.equal("a", a:get(1).v)
    local script = dir .. "/v2.lua"
    local f = assert(io.open(script, "w"))
    f:write(([[
      local runnel = require "runnel"
      local p = runnel.open{ path = %q, notes = false }
      p:drop("t")
      p:table("t", { {"k","string"}, {"w","int"}, key = "k" }):insert{ k = "z", w = 3 }
      p:close()
    ]]):format(dir))
    f:close()
    local _, err, code = H.sh(("%s run '%s'"):format(H.runnel_bin, script))
    assert.equal(0, code, err)
    local stale = 'attach t: "t" was declared again with other columns or another kind since it was attached'
    for _, key in ipairs{ "z", { k = "z" }, { id = "z" }, 1, { "z", 2 } } do
      local ok, msg = pcall(a.get, a, key)
      assert.is_false(ok)
      assert.matches(stale, tostring(msg), 1, true)
    end
    a:close()
    a = runnel.attach(dir, "t")
    assert.same({ k = "z", w = 3 }, a:get("z"))
    a:close()
  end)
end)
