-- A store whose relation's columns changed (schema evolution, core/
-- store_sink.c): declared again, it is written again from its relation
-- with the new columns, so readers see the relation's rows as they are
-- now. Before, the declaration was refused ("store \"ts\": the state holds
-- it with another schema") and the store kept the old columns and rows,
-- stale for good. A stream's store (no rows to write it from) is refused,
-- naming the relation and the store.
local runnel = require "runnel"
local H = require "helper"

describe("a store whose relation's columns changed", function()
  local dir, state
  before_each(function() dir = H.tmpdir(); state = dir .. "/st" end)
  after_each(H.cleanup)

  local function stored(name)
    local att = runnel.attach(state, name)
    local cols = {}
    for _, c in ipairs(att:columns()) do cols[#cols + 1] = c[1] or c.name end
    local rows = {}
    for row in att:rows() do
      local v = {}
      for _, c in ipairs(cols) do v[#v + 1] = tostring(row[c]) end
      rows[#rows + 1] = table.concat(v, ",")
    end
    att:close()
    return table.concat(cols, ","), table.concat(rows, ";")
  end

  it("is written again with the new columns and goes on", function()
    local p = runnel.open{ path = state, notes = function() end }
    local t = p:table("t", { {"k","int"}, {"a","string"}, {"b","int"}, key = "k" })
    t:sink(runnel.store("ts"))
    t:insert{ k = 1, a = "x", b = 10 }
    t:insert{ k = 2, a = "y", b = 20 }
    p:close()
    p = runnel.open{ path = state, notes = function() end }
    t = p:table("t", { {"k","int"}, {"b","int"}, {"c","string", null = true}, {"a2","string", was = "a"}, key = "k" })
    t:sink(runnel.store("ts"))
    local cols, rows = stored("ts")
    assert.equal("k,b,c,a2", cols)
    assert.equal("1,10,nil,x;2,20,nil,y", rows)
    t:insert{ k = 3, b = 30, c = "z", a2 = "w" }
    t:delete{ k = 1 }
    p:close()
    cols, rows = stored("ts")
    assert.equal("k,b,c,a2", cols)
    assert.equal("2,20,nil,y;3,30,z,w", rows)
  end)

  it("of a map whose columns changed follows the map", function()
    local function declare(p, with_c)
      local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
      local cols = { {"k","int"}, {"twice","int"}, key = "k" }
      if with_c then table.insert(cols, 2, {"neg","int"}) end
      local m = t:map(function(r) return { k = r.k, twice = 2 * r.v, neg = with_c and -r.v or nil } end, cols)
      m:sink(runnel.store("ms"))
      return t
    end
    local p = runnel.open{ path = state, notes = function() end }
    local t = declare(p, false)
    t:insert{ k = 1, v = 5 }
    p:close()
    p = runnel.open{ path = state, notes = function() end }
    t = declare(p, true)
    assert.same({ "k,neg,twice", "1,-5,10" }, { stored("ms") })
    t:insert{ k = 2, v = 7 }
    p:close()
    assert.same({ "k,neg,twice", "1,-5,10;2,-7,14" }, { stored("ms") })
  end)

  it("of a stream is refused, naming the relation and the store", function()
    local p = runnel.open{ path = state, notes = function() end }
    local s = p:stream("s", { {"k","int"} })
    s:sink(runnel.store("ss"))
    s:insert{ k = 1 }
    p:close()
    p = runnel.open{ path = state, notes = function() end }
    s = p:stream("s", { {"k","int"}, {"c","string", null = true} })
    local err = H.error_of(s.sink, s, runnel.store("ss"))
    assert.matches('^s: store "ss" holds the rows of s with other columns', err)
    assert.matches('p:drop("ss")', err, 1, true)
    p:close()
  end)
end)
