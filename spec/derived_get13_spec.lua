-- get(key) and id_of(key) of a derived relation in its own pipeline read
-- as a table's do and as runnel.attach reads the relation: the key is
-- checked with a table's words (a missing key column, an unknown column, a
-- scalar for a composite key, a value of another type), and a top or an
-- index is read by its input's key (docs/api.md: idx:get(key)). Before, a
-- derived get ignored unknown columns, read a scalar as the first of
-- several key columns, said "expected int, got nothing" for a missing
-- column, refused tops and indexes, and id_of refused every derived relation;
-- att:get of a scalar for a key of several columns blamed a column's type.
local runnel = require "runnel"
local H = require "helper"

describe("get of a derived relation", function()
  local dir, state
  before_each(function() dir = H.tmpdir(); state = dir .. "/s" end)
  after_each(H.cleanup)

  local function setup(p)
    local t = p:table("t", { {"id","int"}, {"g","int"}, {"s","string"}, {"f","float"}, key = "id" })
    local u = p:table("u", { {"g","int"}, {"name","string"}, key = "g" })
    local rels = {
      j = t:join(u, { on = "g", kind = "left", name = "j" }),
      a = t:aggregate{ by = { "s", "g" }, n = runnel.count(), name = "a" },
      af = t:aggregate{ by = "f", n = runnel.count(), name = "af" },
      top = t:top{ n = 1, by = "g", order = { {"s","asc"} }, name = "top" },
      ix = t:index{ "s", name = "ix" },
    }
    u:insert{ g = 5, name = "five" }
    t:insert{ id = 3, g = 5, s = "b", f = 0.0 }
    t:insert{ id = 1, g = -1, s = "a", f = -1.5 }
    t:insert{ id = 2, g = 5, s = "c", f = 2.0 }
    return t, rels
  end

  it("checks its key with a table's words", function()
    local p = runnel.open()
    local t, rels = setup(p)
    local j, a = rels.j, rels.a
    -- the same mistakes on the table and on derived relations
    assert.equal("t: unknown column \"zz\"", H.error_of(t.get, t, { id = 3, zz = 1 }))
    assert.equal("j: unknown column \"zz\"", H.error_of(j.get, j, { id = 3, zz = 1 }))
    assert.equal("t: column \"id\": expected int, got number 3.5", H.error_of(t.get, t, 3.5))
    assert.equal("j: column \"id\": expected int, got number 3.5", H.error_of(j.get, j, 3.5))
    assert.equal("j: column \"id\": expected int, got string", H.error_of(j.get, j, "3"))
    assert.equal("a: column \"g\": key column is missing", H.error_of(a.get, a, { s = "b" }))
    assert.equal("a: a key is a table of its key columns, got string", H.error_of(a.get, a, "b"))
    assert.equal("top: unknown column \"zz\"", H.error_of(rels.top.get, rels.top, { zz = 1 }))
    local d = t:distinct("d")
    assert.equal("d: get needs a relation with a key", H.error_of(d.get, d, 3))
    p:close()
  end)

  it("finds rows by a normalized key, tops and indexes by their input's key, with their ids", function()
    local p = runnel.open()
    local _, rels = setup(p)
    assert.equal("five", rels.j:get(3.0).name)
    assert.equal(1, rels.j:id_of(3))
    assert.is_nil(rels.j:get(99))
    assert.equal(1, rels.a:get{ s = "c", g = 5 }.n)
    assert.equal(3, rels.a:id_of{ s = "c", g = 5 })
    assert.equal(1, rels.af:get(-0.0).n) -- the group of f = 0.0
    local b = rels.top:get(3)
    assert.equal("b", b.s)
    assert.equal(1, b.rank)
    assert.is_nil(rels.top:get(2)) -- "c" is second in group 5: not in the top
    assert.equal("c", rels.ix:get{ id = 2 }.s)
    assert.equal(1, rels.top:id_of(3))
    p:close()
  end)

  it("refuses a scalar for a key of several columns through runnel.attach too", function()
    local p = runnel.open{ path = state }
    setup(p)
    p:close()
    local att = runnel.attach(state, "a")
    assert.equal("attach a: get: a key is a table of its key columns, got string", H.error_of(att.get, att, "b"))
    assert.equal(1, att:get{ s = "b", g = 5 }.n)
    att:close()
  end)

  it("reads what runnel.attach reads, inside a group with its changes", function()
    local p = runnel.open{ path = state }
    local t, rels = setup(p)
    local keys = { j = { 1, 2, 3, 4 }, a = { { s = "a", g = -1 }, { s = "b", g = 5 }, { s = "x", g = 0 } },
                   af = { 0.0, -1.5, 7.0 }, top = { 1, 2, 3 }, ix = { 1, 2, 3, 4 } }
    local function row_text(r)
      if not r then return "nil" end
      local cols = {}
      for k, v in pairs(r) do cols[#cols + 1] = k .. "=" .. tostring(v) end
      table.sort(cols)
      return table.concat(cols, ",")
    end
    p:begin()
    t:insert{ id = 4, g = -1, s = "0", f = 7.0 }
    local inside = {}
    for name, list in pairs(keys) do
      for i, k in ipairs(list) do inside[name .. i] = row_text(rels[name]:get(k)) end
    end
    assert.equal("nil", inside.top2)
    assert.matches("s=0", inside.j4)
    assert.equal("nil", inside.top1) -- "0" leads group -1 now
    p:commit()
    for name, list in pairs(keys) do
      local att = runnel.attach(state, name)
      for i, k in ipairs(list) do
        assert.equal(inside[name .. i], row_text(rels[name]:get(k)), name .. i)
        assert.equal(inside[name .. i], row_text(att:get(k)), name .. i)
      end
      att:close()
    end
    p:close()
  end)
end)
