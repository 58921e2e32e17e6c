-- A sink that keeps a relation's rows (a SQLite mirror, runnel.store) and
-- is written again from the relation at its declaration (the relation was
-- rebuilt, its columns changed, the sink is new) already holds the rows
-- the rebuild made. The rebuild's changes are told at the start of the
-- next group (core/evolve_log.c); netted per row id with that group's own
-- changes, a row the rebuild inserted and the group deleted came to
-- nothing, and the sink kept the row for good. Each such sink takes only
-- the group's own changes after the changes it holds already.
local runnel = require "runnel"
local H = require "helper"

local A = { {"id","int"}, {"b","int", null = true}, {"c","int", null = true}, key = "id" }
local B = { {"bid","int"}, {"name","string"}, key = "bid" }

local function rows_of(rel)
  local out = {}
  for row, id in rel:rows() do out[#out + 1] = ("%d:%s"):format(id, tostring(row.id or row.x)) end
  return table.concat(out, " ")
end

describe("a sink written again at a rebuild's declaration", function()
  after_each(H.cleanup)

  local function declared(dir, on)
    local p = runnel.open{ path = dir .. "/st", notes = false }
    local a = p:table("A", A)
    local b = p:table("B", B)
    local j = a:join(b, { on = on, name = "j" })
    j:sink(runnel.sqlite(dir .. "/o.db", "j"))
    j:sink(runnel.store("js"))
    local f = j:filter(function() return true end, "jf")
    f:sink(runnel.sqlite(dir .. "/o.db", "jf"))
    return p, a, b, j
  end

  it("does not keep a row the rebuild added and the next group deleted (join on changed)", function()
    local dir = H.tmpdir()
    local p, a, b = declared(dir, "b")
    p:begin()
    a:insert{ id = 1, b = 10, c = 10 }
    a:insert{ id = 2, b = 99, c = 10 }  -- joins only on c
    b:insert{ bid = 10, name = "x" }
    p:commit()
    p:close()
    local j
    p, a, b, j = declared(dir, "c")
    p:begin(); a:delete(2); p:commit()
    assert.are.equal("1", H.sql(dir .. "/o.db", "SELECT group_concat(id) FROM (SELECT id FROM j ORDER BY id)"):gsub("\n$", ""))
    assert.are.equal("1", H.sql(dir .. "/o.db", "SELECT group_concat(id) FROM (SELECT id FROM jf ORDER BY id)"):gsub("\n$", ""))
    assert.are.equal("1:1", rows_of(j))
    p:close()
    local st = runnel.attach(dir .. "/st", "js")
    local ids = {}
    for row in st:rows() do ids[#ids + 1] = row.id end
    st:close()
    assert.are.same({ 1 }, ids)
  end)

  it("takes the next group's own changes whole, rolled back once first", function()
    local dir = H.tmpdir()
    local p, a, b = declared(dir, "b")
    p:begin()
    a:insert{ id = 1, b = 10, c = 10 }
    a:insert{ id = 2, b = 99, c = 10 }
    a:insert{ id = 3, b = 99, c = 10 }
    b:insert{ bid = 10, name = "x" }
    p:commit()
    p:close()
    p, a, b = declared(dir, "c")
    p:begin(); a:delete(2); p:rollback()
    p:begin(); a:delete(3); a:update{ id = 2, b = 10 }; p:commit()
    p:close()
    assert.are.equal("1|10\n2|10\n", H.sql(dir .. "/o.db", "SELECT id, b FROM j ORDER BY id"))
    assert.are.equal("1|10\n2|10\n", H.sql(dir .. "/o.db", "SELECT id, b FROM jf ORDER BY id"))
  end)

  it("keeps a keyless distinct's mirror whole when its table gained a column", function()
    local dir = H.tmpdir()
    local function decl(z)
      local p = runnel.open{ path = dir .. "/st", notes = false }
      local cols = { {"x","int"}, {"y","float", null = true} }
      if z then table.insert(cols, 1, { "z", "string", null = true }) end
      local k = p:table("K", cols)
      local d = k:distinct("kd")
      d:sink(runnel.sqlite(dir .. "/o.db", "kd"))
      return p, k, d
    end
    local p, k = decl(false)
    p:begin(); k:insert{ x = 4, y = runnel.null }; k:insert{ x = 1, y = 2.0 }; p:commit()
    p:close()
    local d
    p, k, d = decl(true)
    p:begin(); k:delete{ x = 1, y = 2.0 }; p:commit()
    local want = {}
    for row, id in d:rows() do want[#want + 1] = ("%d|%d"):format(id, row.x) end
    p:close()
    assert.are.equal(table.concat(want, "\n") .. "\n", H.sql(dir .. "/o.db", "SELECT runnel_id, x FROM kd ORDER BY runnel_id"))
  end)
end)
