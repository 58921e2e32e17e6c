-- rows() of a derived relation in the pipeline that declares it comes in
-- the order a read from outside gives (runnel.attach, runnel query): key
-- order for a join, select, filter, keyed map or aggregate (DESIGN §12:
-- numbers by value, negatives first; strings bytewise; composite keys
-- column by column), an index's order, a top's group then rank, id order
-- without a key. Before, the pipeline's own rows() gave every derived
-- relation in id order, so the same relation listed in another order in
-- the script than through attach, and an index's rows() ignored its order.
local runnel = require "runnel"
local H = require "helper"

-- (row, id) pairs of an iterator, as "label:id" strings.
local function listed(it, label)
  local out = {}
  for row, id in it do out[#out + 1] = tostring(label(row)) .. ":" .. id end
  return out
end

describe("rows() of derived relations", function()
  local dir, state
  before_each(function() dir = H.tmpdir(); state = dir .. "/s" end)
  after_each(H.cleanup)

  -- t (keyed by id) with rows inserted out of key order; ids follow the
  -- inserts: 3 → 1, 1 → 2, 2 → 3, -4 → 4, 10 → 5.
  local function declare(p)
    local t = p:table("t", { {"id","int"}, {"g","int"}, {"s","string"}, key = "id" })
    local u = p:table("u", { {"g","int"}, {"name","string"}, key = "g" })
    local rels = {
      j = t:join(u, { on = "g", kind = "left", name = "j" }),
      a = t:aggregate{ by = "g", n = runnel.count(), name = "a" },
      ab = t:aggregate{ by = { "s", "g" }, n = runnel.count(), name = "ab" },
      ix = t:index{ "s", "desc", name = "ix" },
      top = t:top{ n = 2, by = "g", order = { {"s","asc"} }, name = "top" },
      d = t:distinct("d"),
    }
    rels.sel = rels.j:select({ {"pid","id"}, {"gname","name"} }, "sel")
    return t, u, rels
  end

  local function fill(t, u)
    u:insert{ g = 5, name = "five" }
    t:insert{ id = 3, g = 5, s = "b" }
    t:insert{ id = 1, g = -1, s = "a" }
    t:insert{ id = 2, g = 5, s = "c" }
    t:insert{ id = -4, g = 10, s = "A" }
    t:insert{ id = 10, g = -1, s = "é" }
  end

  local labels = {
    j = function(r) return r.id end, sel = function(r) return r.pid end,
    a = function(r) return r.g end, ab = function(r) return r.s .. "/" .. r.g end,
    ix = function(r) return r.s end, top = function(r) return r.g .. r.s end,
    d = function(r) return r.id end,
  }

  it("follow the key for joins, selects, filters, maps and aggregates", function()
    local p = runnel.open()
    local t, u, rels = declare(p)
    local f = t:filter(function(r) return r.g ~= 5 end, "f")
    local m = t:map(function(r) return { s = r.s, id = r.id } end, { {"s","string"}, {"id","int"}, key = "s" }, "m")
    fill(t, u)
    assert.same({ "-4:4", "1:2", "2:3", "3:1", "10:5" }, listed(rels.j:rows(), labels.j))
    assert.same({ "-4:4", "1:2", "2:3", "3:1", "10:5" }, listed(rels.sel:rows(), labels.sel))
    assert.same({ "-4:4", "1:2", "10:5" }, listed(f:rows(), function(r) return r.id end))
    -- bytewise: "A" < "a" < "b" < "c" < "é"
    assert.same({ "A:4", "a:2", "b:1", "c:3", "é:5" }, listed(m:rows(), function(r) return r.s end))
    assert.same({ "-1:2", "5:1", "10:3" }, listed(rels.a:rows(), labels.a))
    -- composite: s first, then g
    assert.same({ "A/10:4", "a/-1:2", "b/5:1", "c/5:3", "é/-1:5" }, listed(rels.ab:rows(), labels.ab))
    p:close()
  end)

  it("keep an index's order and a top's group then rank, and ids without a key", function()
    local p = runnel.open()
    local t, u, rels = declare(p)
    local m2 = t:map(function(r) return { s = r.s } end, { {"s","string"} }, "m2")
    fill(t, u)
    assert.same({ "é:5", "c:3", "b:1", "a:2", "A:4" }, listed(rels.ix:rows(), labels.ix))
    assert.same({ "-1a:2", "-1é:5", "5b:1", "5c:3", "10A:4" }, listed(rels.top:rows(), labels.top))
    assert.same({ "3:1", "1:2", "2:3", "-4:4", "10:5" }, listed(rels.d:rows(), labels.d))
    assert.same({ "b:1", "a:2", "c:3", "A:4", "é:5" }, listed(m2:rows(), function(r) return r.s end))
    p:close()
  end)

  it("list as runnel.attach lists them, inside a group too", function()
    local p = runnel.open{ path = state }
    local t, u, rels = declare(p)
    fill(t, u)
    p:begin()
    t:insert{ id = 0, g = 5, s = "B" }
    t:delete{ id = 1 }
    local inside = {}
    for name, rel in pairs(rels) do inside[name] = listed(rel:rows(), labels[name]) end
    assert.same({ "-4:4", "0:6", "2:3", "3:1", "10:5" }, inside.j)
    p:commit()
    for name, rel in pairs(rels) do
      local mine = listed(rel:rows(), labels[name])
      assert.same(inside[name], mine, name)
      local att = runnel.attach(state, name)
      assert.same(mine, listed(att:rows(), labels[name]), name)
      att:close()
    end
    p:close()
  end)
end)
