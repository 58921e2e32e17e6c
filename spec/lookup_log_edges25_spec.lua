-- The answer log of a lookup (lookup.c) is matched by key only: its entries
-- are |key|found|row|, and a change applied again takes the next one when
-- its key is the one asked. Suspected: another lookup's answer, or an
-- answer of a lookup declared again with another source, could be given
-- after a restart or a rollback. Not so: each lookup has its own log (in
-- its own rn_lookup, made at its declaration), it lives in memory only
-- while the LMDB transaction of the carried groups is open (committed,
-- or dropped with it, at a crash, a close, a flush or any declaration),
-- and the groups applied again ask in the order they asked the first
-- time. These pin it.
local runnel = require "runnel"
local H = require "helper"

local function verify(dir)
  local out, err, code = H.sh(("%s verify %s"):format(H.runnel_bin, dir))
  assert.same({ "", 0 }, { err, code }, out)
end

-- A lookup whose answers name it and count its calls: "<tag><key>:<call>".
local function counting(p, name, tag)
  local calls = 0
  local lk = p:lookup(name, { {"id","int"}, {"name","string"}, key = "id",
    source = function(k) calls = calls + 1 return { id = k, name = tag .. k .. ":" .. calls } end })
  return lk, function() return calls end
end

describe("a lookup's answer log, matched by key", function()
  local dir
  before_each(function() dir = H.tmpdir() .. "/st" end)
  after_each(H.cleanup)

  it("gives each of two lookups asked the same key its own answer when carried groups are applied again", function()
    local p = runnel.open{ path = dir, notes = false, sync = false }
    local a, a_calls = counting(p, "a", "a")
    local b, b_calls = counting(p, "b", "b")
    local t = p:table("t", { {"id","int"}, {"g","int"}, key = "id" })
    local ja = t:join(a, { on = "g", kind = "left" })
    local jb = t:join(b, { on = "g", kind = "left" })
    t:insert{ id = 1, g = 5 } -- carried: a and b each asked key 5
    t:insert{ id = 2, g = 5 }
    assert.is_false(pcall(t.insert, t, { id = 1, g = 5 })) -- fails: the two carried groups applied again
    assert.same({ "a5:1", "a5:2" }, { ja:get(1).name, ja:get(2).name })
    assert.same({ "b5:1", "b5:2" }, { jb:get(1).name, jb:get(2).name })
    assert.same({ 2, 2 }, { a_calls(), b_calls() })
    p:close()
    verify(dir)
  end)

  it("gives two joins on one lookup, asking in one change, each the answer it got", function()
    local p = runnel.open{ path = dir, notes = false, sync = false }
    local lk, calls = counting(p, "lk", "v")
    local t = p:table("t", { {"id","int"}, {"g","int"}, {"h","int"}, key = "id" })
    local jg = t:join(lk, { on = "g", kind = "left" })
    local jh = t:join(lk, { on = "h", kind = "left" })
    t:insert{ id = 1, g = 5, h = 5 } -- the same key asked twice in one change
    t:insert{ id = 2, g = 6, h = 5 }
    p:begin()
    t:insert{ id = 3, g = 5, h = 5 }
    p:rollback()
    assert.same({ "v5:1", "v6:3" }, { jg:get(1).name, jg:get(2).name })
    assert.same({ "v5:2", "v5:4" }, { jh:get(1).name, jh:get(2).name })
    p:close()
    verify(dir)
  end)

  it("never gives a lookup dropped and declared again (another source) the answers of the one before", function()
    local p = runnel.open{ path = dir, notes = false, sync = false }
    local lk = counting(p, "lk", "old")
    local t = p:table("t", { {"id","int"}, {"g","int"}, key = "id" })
    local j = t:join(lk, { on = "g", kind = "left" })
    t:insert{ id = 1, g = 5 } -- carried, answered "old5:1"
    local join_name = j:name()
    p:close()
    p = runnel.open{ path = dir, notes = false, sync = false }
    p:drop(join_name) p:drop("lk") -- a declaration: it commits carried groups first (none here)
    lk = counting(p, "lk", "new")
    t = p:table("t", { {"id","int"}, {"g","int"}, key = "id" })
    j = t:join(lk, { on = "g", kind = "left" }) -- built from t: asks the new source
    t:insert{ id = 2, g = 5 }                    -- carried
    assert.is_false(pcall(t.insert, t, { id = 2, g = 5 }))
    assert.same({ "new5:1", "new5:2" }, { j:get(1).name, j:get(2).name })
    p:close()
    verify(dir)
  end)

  it("after a restart, asks the lookup declared then: no answer outlives its process", function()
    local p = runnel.open{ path = dir, notes = false, sync = false }
    local lk = counting(p, "lk", "old")
    local t = p:table("t", { {"id","int"}, {"g","int"}, key = "id" })
    local j = t:join(lk, { on = "g", kind = "left" })
    t:insert{ id = 1, g = 5 }
    p:close()
    p = runnel.open{ path = dir, notes = false, sync = false }
    lk = counting(p, "lk", "new")
    t = p:table("t", { {"id","int"}, {"g","int"}, key = "id" })
    j = t:join(lk, { on = "g", kind = "left" })
    t:insert{ id = 2, g = 5 }
    assert.is_false(pcall(t.insert, t, { id = 2, g = 5 }))
    assert.equal("old5:1", j:get(1).name) -- the state's result, as its sinks were told
    assert.equal("new5:1", j:get(2).name)
    p:close()
    verify(dir)
  end)
end)
