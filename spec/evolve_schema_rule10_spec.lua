-- What sinks hear of a column they were never told of (0.21). A source
-- table's new column is no change of rows: the declaration's note gives
-- it ("t: added "w" int = 5"), so a copy that applies the note holds the
-- table's rows, and the table, and a filter over it, tell nothing. A
-- derived relation's new column has no note giving its values: in the old
-- rows its rebuild tells it is null (even with a default, even where it
-- cannot be null), so each row where it holds a value is told as an UPDATE
-- (a join that gains the table's column, an aggregate that gains a sum).
-- Merged in 0.21, two rounds disagreed: the table told an UPDATE per row
-- while a join over it, whose columns gained the same column, told nothing.
local runnel = require "runnel"
local H = require "helper"

local function declare(dir, with_w)
  local p, notes = H.open_noting(dir)
  local cols = { {"id","int"}, {"v","string"}, {"u_id","int", null = true}, key = "id" }
  if with_w then cols[#cols + 1] = {"w","int", default = 5} end
  local t = p:table("t", cols)
  local u = p:table("u", { {"id","int"}, {"name","string"}, key = "id" })
  local j = t:join(u, { on = "u_id", kind = "left", name = "j" })
  local odd = t:filter(function(r) return r.id % 2 == 1 end, "odd")
  local agg_cols = { by = "u_id", name = "a", {"n", runnel.count()} }
  if with_w then agg_cols[#agg_cols + 1] = {"total_w", runnel.sum("w")} end
  local a = t:aggregate(agg_cols)
  return p, { t = t, u = u, j = j, odd = odd, a = a }, notes
end

describe("a column added with a default", function()
  after_each(H.cleanup)

  it("is no change of rows: the table, a join and a filter over it tell nothing; copies hold the rows once the note is applied", function()
    local dir = H.tmpdir()
    local p, r = declare(dir, false)
    local copies = {}
    for _, name in ipairs{ "t", "j", "odd" } do
      local copy, apply = H.id_applier()
      copies[name] = copy
      r[name]:sink(apply)
    end
    p:begin()
    r.t:insert{ id = 1, v = "a", u_id = 1 }
    r.t:insert{ id = 2, v = "b", u_id = 1 }
    r.t:insert{ id = 3, v = "c" }
    p:commit()
    p:close()

    local notes
    p, r, notes = declare(dir, true)
    local added
    for _, line in ipairs(notes) do if line:find('^t: added "w" int = 5') then added = line end end
    assert.truthy(added, table.concat(notes, "\n"))
    local logs = {}
    for _, name in ipairs{ "t", "j", "odd" } do logs[name] = H.record(r[name]) end
    p:begin()
    r.u:insert{ id = 1, name = "U1" } -- the join's rows change: told as this group's own changes
    p:commit()
    assert.same({}, logs.t)
    assert.same({}, logs.odd)
    -- the join's rows gained w from t: no note of the join's gives its value, so the rebuild tells it
    -- (the old row with w null), first; then the group's own changes (u 1 came)
    assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", "UPDATE 1", "UPDATE 2" }, H.verbs(logs.j))
    for i = 1, 3 do
      assert.is_nil(logs.j[i][4].w)
      assert.equal(5, logs.j[i][3].w)
      assert.is_nil(logs.j[i][3].name)
    end
    assert.equal("U1", logs.j[4][3].name)
    -- the copies, with the note applied to the table's (w = 5 where a row lacks it), hold the rows
    for _, name in ipairs{ "t", "odd", "j" } do
      for id, row in pairs(copies[name]) do
        if row.w == nil then row.w = 5 end
        copies[name][id] = row
      end
      local now = H.rows_by_id(r[name])
      for id, row in pairs(now) do
        assert.equal(row.w, copies[name][id].w, name .. " row " .. id)
        assert.equal(row.v, copies[name][id].v, name .. " row " .. id)
      end
    end
    p:close()
  end)

  it("is told where a derived column's values are new (an aggregate's added sum)", function()
    local dir = H.tmpdir()
    local p, r = declare(dir, false)
    p:begin()
    r.t:insert{ id = 1, v = "a", u_id = 1 }
    r.t:insert{ id = 2, v = "b", u_id = 1 }
    p:commit()
    p:close()
    p, r = declare(dir, true)
    local log = H.record(r.a)
    p:begin()
    r.u:insert{ id = 9, name = "nine" }
    p:commit()
    assert.equal(1, #log)
    assert.equal("UPDATE", log[1][1])
    assert.equal(10, log[1][3].total_w)
    assert.is_nil(log[1][4].total_w)
    p:close()
  end)
end)
