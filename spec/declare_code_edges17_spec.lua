-- A derived relation's functions are recorded (p:_code, core/evolve_code.c)
-- before it is declared (p:_map, p:_filter, p:_join, p:_aggregate). The
-- record was committed on its own: a declaration that then failed (a bad
-- key), or was interrupted between the two steps (Ctrl-C, an error from a
-- debug hook), left the state holding the functions of a relation it never
-- declared. The next declaration under that name then said "its function
-- changed" (and rebuilt, and told its sinks) although nothing it was built
-- from had changed. The record is now written in the declaration's own
-- transaction: an interrupted declaration leaves the state as it was.
local runnel = require "runnel"
local H = require "helper"

local function cols(key) return { {"id","int"}, {"w","int"}, key = key or "id" } end
local f1 = function(r) return { id = r.id, w = r.v + 1 } end
local f2 = function(r) return { id = r.id, w = r.v + 2 } end

-- Runs fn(…) with an error raised when p:<name> is about to be called.
local function interrupted_at(name, fn, ...)
  debug.sethook(function()
    local info = debug.getinfo(2, "n")
    if info and info.name == name then debug.sethook(); error("interrupted", 0) end
  end, "c")
  local ok, err = pcall(fn, ...)
  debug.sethook()
  return ok, err
end

describe("a declaration failing after its functions were recorded", function()
  local p, dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function() if p then p:close() end p = nil H.cleanup() end)

  local function open()
    p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"id","int"}, {"v","int"}, key = "id" })
    return t
  end

  it("leaves no function behind for a relation never declared", function()
    local t = open()
    t:insert{ id = 1, v = 1 }
    assert.matches('key column "nope"', H.error_of(t.map, t, f1, cols("nope"), "m"))
    p:close()
    t = open()
    local m = t:map(f2, cols(), "m")
    assert.same({}, p:changes())
    assert.equal(3, m:get(1).w)
  end)

  it("interrupted between the record and the declaration, leaves the state as it was", function()
    local t = open()
    local m = t:map(f1, cols(), "m")
    local agg = m:aggregate{ by = "id", s = runnel.sum("w"), name = "a" }
    t:insert{ id = 1, v = 1 }
    assert.equal(2, agg:get(1).s)
    p:close()
    t = open()
    local ok, err = interrupted_at("_map", t.map, t, f2, cols(), "m")
    assert.is_false(ok)
    assert.equal("interrupted", err)
    assert.same({}, p:changes())
    p:close()
    t = open()                       -- the same functions as before the interrupt: nothing changed
    m = t:map(f1, cols(), "m")
    local log = H.record(m)
    assert.same({}, p:changes())
    assert.equal(2, m:get(1).w)
    p:close()
    assert.same({}, log)
  end)

  it("of a join's mapper or an aggregate's functions, interrupted, leaves the state as it was", function()
    local t = open()
    local u = p:table("u", { {"id","int"}, {"name","string"}, key = "id" })
    local mapper = function(r) return r.v end
    local agg = runnel.agg{ init = function() return 0 end, add = function(a, r) return a + r.v end,
                            remove = function(a, r) return a - r.v end, result = function(a) return a end }
    t:join(u, { mapper = mapper, name = "j" })
    t:aggregate{ total = agg, name = "g" }
    t:insert{ id = 1, v = 7 }
    u:insert{ id = 7, name = "seven" }
    p:close()
    t = open()
    u = p:table("u", { {"id","int"}, {"name","string"}, key = "id" })
    assert.is_false((interrupted_at("_join", t.join, t, u, { mapper = function(r) return r.v + 1 end, name = "j" })))
    assert.is_false((interrupted_at("_aggregate", t.aggregate, t, { total = runnel.agg{ init = function() return 1 end,
      add = function(a) return a end, remove = function(a) return a end, result = function(a) return a end },
      name = "g" })))
    p:close()
    t = open()
    u = p:table("u", { {"id","int"}, {"name","string"}, key = "id" })
    local j = t:join(u, { mapper = mapper, name = "j" })
    local g = t:aggregate{ total = agg, name = "g" }
    assert.same({}, p:changes())
    assert.equal("seven", j:get(1).name)
    for r in g:rows() do assert.equal(7, r.total) end
  end)

  it("interrupted, then declared in the same process, acts as if the interrupt never happened", function()
    local t = open()
    t:insert{ id = 1, v = 1 }
    assert.is_false((interrupted_at("_filter", t.filter, t, function(r) return r.v > 0 end, "f")))
    local f = t:filter(function(r) return r.v > 5 end, "f")
    assert.same({}, p:changes())
    assert.equal(0, f:count())
    p:close()
    t = open()
    t:filter(function(r) return r.v > 5 end, "f")
    assert.same({}, p:changes())
  end)
end)
