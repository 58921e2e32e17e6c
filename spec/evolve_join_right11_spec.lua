-- A join whose right table's columns changed in the same run (a column
-- gained, dropped, or renamed with was =) is rebuilt at its declaration
-- and tells its sinks what the rebuild changed, as one whose right table
-- stayed does. Its old rows are made from the left rows its index keeps
-- and the right table's rows, which the table rewrote in its new columns
-- before the join was declared: the join's reader reads each right row in
-- the columns the join was made with, by name (a rename followed), and
-- gives each old row in the join's new columns by where its columns come
-- from. A dropped column's values are gone, but no new column takes them.
-- Where the old rows still cannot be made (a column of another type), the
-- note that its sinks were not told stays (core/evolve_log.c). Until 0.21
-- every such change gave the note.
local H = require "helper"

local T = { {"id","int"}, {"team","int", null = true}, {"score","int"}, key = "id" }
local U = { {"id","int"}, {"name","string"}, {"city","string"}, key = "id" }

local UPD, INS = 1, 2 -- cdc$operation

local function noted(notes, pattern)
  for _, line in ipairs(notes) do if line:find(pattern) then return line end end
  return nil
end

local function untold(notes)
  return noted(notes, "not told")
end

local function seed(t, u)
  u:insert{ id = 1, name = "red", city = "rome" }
  u:insert{ id = 2, name = "blue", city = "oslo" }
  t:insert{ id = 1, team = 1, score = 10 }
  t:insert{ id = 2, team = 2, score = 20 }
  t:insert{ id = 3, team = 1, score = 30 }
  t:insert{ id = 4, team = 9, score = 40 } -- no team 9: only in a left join
end

local function verified(dir)
  local out, err, code = H.sh(H.runnel_bin .. " verify " .. dir)
  assert.equal(0, code, out .. err)
end

-- Opens dir with the join (kind) of t and u (ucols), a select over it when
-- sel (fused: its only reader), a cdc log of what sinks hear, and sinks
-- that keep copies by id (carried across the runs in copies).
local function declared(dir, kind, ucols, sel, copies, tcols)
  local p, notes = H.open_noting(dir)
  local t = p:table("t", tcols or T)
  local u = p:table("u", ucols)
  local j = t:join(u, { on = "team", kind = kind, name = "j" })
  local heard = j
  if sel then heard = j:select(sel, "s") end
  local copy, apply = copies.copy, copies.apply
  if not copy then
    copy, apply = H.id_applier()
    copies.copy, copies.apply = copy, apply
  end
  heard:sink(apply)
  local log = H.record(heard)
  local cdc = {}
  heard:cdc{}:sink(function(_, row) cdc[#cdc + 1] = row["cdc$operation"] end)
  return p, t, u, heard, log, cdc, notes
end

-- The first run, seeded; the second with u's new columns: what the first
-- group of the second run tells (after the rebuild, then k = 5's insert).
local function evolve(kind, new_u, sel1, sel2, tcols2, row5)
  local dir = H.tmpdir()
  local copies = {}
  local p, t, u = declared(dir, kind, U, sel1, copies)
  seed(t, u)
  p:close()
  local heard, log, cdc, notes
  p, t, u, heard, log, cdc, notes = declared(dir, kind, new_u, sel2 or sel1, copies, tcols2)
  H.clear(log)
  t:insert(row5 or { id = 5, team = 2, score = 50 })
  return { dir = dir, p = p, t = t, u = u, heard = heard, log = log, cdc = cdc, notes = notes, copy = copies.copy }
end

for _, kind in ipairs{ "inner", "left" } do
  describe("a " .. kind .. " join whose right table's columns changed", function()
    local NEW = "INSERT " .. (kind == "inner" and 4 or 5) -- the insert's result id (row 4 matches no team)
    after_each(H.cleanup)

    it("tells nothing for a column gained null: no row's values changed", function()
      local r = evolve(kind, { {"id","int"}, {"name","string"}, {"city","string"}, {"size","int", null = true},
                               key = "id" })
      assert.truthy(noted(r.notes, '^u: added "size"'))
      assert.truthy(noted(r.notes, "^j: its declaration changed: rebuilt from its inputs"))
      assert.is_nil(untold(r.notes), table.concat(r.notes, "\n"))
      assert.same({ NEW }, H.verbs(r.log))
      assert.same({ INS }, r.cdc)
      assert.same(H.rows_by_id(r.heard), r.copy)
      r.p:close()
      verified(r.dir)
    end)

    it("tells an UPDATE for each matched row of a column gained with a default", function()
      local r = evolve(kind, { {"id","int"}, {"name","string"}, {"city","string"}, {"tier","string", default = "a"},
                               key = "id" })
      assert.is_nil(untold(r.notes), table.concat(r.notes, "\n"))
      assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", NEW }, H.verbs(r.log))
      assert.same({ id = 1, team = 1, score = 10, ["u.id"] = 1, name = "red", city = "rome" }, r.log[1][4])
      assert.same({ id = 1, team = 1, score = 10, ["u.id"] = 1, name = "red", city = "rome", tier = "a" }, r.log[1][3])
      assert.same({ UPD, UPD, UPD, INS }, r.cdc)
      assert.same(H.rows_by_id(r.heard), r.copy)
      r.p:close()
      verified(r.dir)
    end)

    it("tells nothing for a column dropped: the copy drops it as the note says", function()
      local r = evolve(kind, { {"id","int"}, {"name","string"}, key = "id" })
      assert.truthy(noted(r.notes, '^u: dropped "city"'))
      assert.is_nil(untold(r.notes), table.concat(r.notes, "\n"))
      assert.same({ NEW }, H.verbs(r.log))
      assert.same({ INS }, r.cdc)
      for _, row in pairs(r.copy) do row.city = nil end
      assert.same(H.rows_by_id(r.heard), r.copy)
      r.p:close()
      verified(r.dir)
    end)

    it("tells nothing for a column renamed with was =: a rename is not a change of rows", function()
      local r = evolve(kind, { {"id","int"}, {"name","string"}, {"town","string", was = "city"}, key = "id" })
      assert.truthy(noted(r.notes, '^u: renamed "city" to "town"'))
      assert.is_nil(untold(r.notes), table.concat(r.notes, "\n"))
      assert.same({ NEW }, H.verbs(r.log))
      assert.same("oslo", r.log[1][3].town)
      assert.same({ INS }, r.cdc)
      for _, row in pairs(r.copy) do if row.city then row.town, row.city = row.city, nil end end
      assert.same(H.rows_by_id(r.heard), r.copy)
      r.p:close()
      verified(r.dir)
    end)

    it("tells only what changed when the right table gains, drops and renames at once", function()
      local r = evolve(kind, { {"id","int"}, {"label","string", was = "name"}, {"tier","string", default = "a"},
                               key = "id" })
      assert.is_nil(untold(r.notes), table.concat(r.notes, "\n"))
      assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", NEW }, H.verbs(r.log))
      assert.same({ id = 2, team = 2, score = 20, ["u.id"] = 2, label = "blue" }, r.log[2][4])
      assert.same({ id = 2, team = 2, score = 20, ["u.id"] = 2, label = "blue", tier = "a" }, r.log[2][3])
      for _, row in pairs(r.copy) do
        row.city = nil
        if row.name then row.label, row.name = row.name, nil end
      end
      assert.same(H.rows_by_id(r.heard), r.copy)
      r.p:close()
      verified(r.dir)
    end)

    it("through a select fused into it: the renamed column it selects is no change", function()
      local r = evolve(kind, { {"id","int"}, {"name","string"}, {"town","string", was = "city"},
                               {"tier","string", default = "a"}, key = "id" },
                       { "id", {"where","city"}, "score" }, { "id", {"where","town"}, "score" })
      assert.is_nil(untold(r.notes), table.concat(r.notes, "\n"))
      assert.same({ NEW }, H.verbs(r.log))
      assert.same({ id = 5, where = "oslo", score = 50 }, r.log[1][3])
      assert.same({ INS }, r.cdc)
      assert.same(H.rows_by_id(r.heard), r.copy)
      r.p:close()
      verified(r.dir)
    end)

    it("through a select fused into it that selects the gained column: an UPDATE per matched row", function()
      local r = evolve(kind, { {"id","int"}, {"name","string"}, {"city","string"}, {"tier","string", default = "a"},
                               key = "id" },
                       { "id", "name" }, { "id", "name", "tier" })
      assert.is_nil(untold(r.notes), table.concat(r.notes, "\n"))
      assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", NEW }, H.verbs(r.log))
      assert.same({ id = 3, name = "red" }, r.log[3][4])
      assert.same({ id = 3, name = "red", tier = "a" }, r.log[3][3])
      assert.same(H.rows_by_id(r.heard), r.copy)
      r.p:close()
      verified(r.dir)
    end)

    it("and the left table's columns changing with the right one's", function()
      local r = evolve(kind, { {"id","int"}, {"name","string"}, {"town","string", was = "city"}, key = "id" }, nil, nil,
                       { {"id","int"}, {"team","int", null = true}, {"points","int", was = "score"},
                         {"note","string", null = true}, key = "id" }, { id = 5, team = 2, points = 50 })
      assert.is_nil(untold(r.notes), table.concat(r.notes, "\n"))
      r.t:insert{ id = 6, team = 1, points = 60 }
      assert.same({ NEW, "INSERT " .. (kind == "inner" and 5 or 6) }, H.verbs(r.log))
      for _, row in pairs(r.copy) do
        if row.city then row.town, row.city = row.city, nil end
        if row.score then row.points, row.score = row.score, nil end
      end
      assert.same(H.rows_by_id(r.heard), r.copy)
      r.p:close()
      verified(r.dir)
    end)

    it("still says its sinks were not told when a column it keeps took its values from a right column dropped", function()
      local r = evolve(kind, { {"id","int"}, {"name","string"}, key = "id" }, nil, nil,
                       { {"id","int"}, {"team","int", null = true}, {"score","int"}, {"city","string", null = true},
                         key = "id" }) -- the join's "city" comes from t now: u's old values are gone
      assert.truthy(noted(r.notes, '^j: its sinks were not told what its rebuild changed %(its old rows held in column ' ..
                                   '"city" the values of column "city" of "u", which that table dropped'),
                    table.concat(r.notes, "\n"))
      assert.same({ NEW }, H.verbs(r.log))
      r.p:close()
      verified(r.dir)
    end)

    it("still says its sinks were not told when a right column's type changed", function()
      local dir = H.tmpdir()
      local copies = {}
      local U2 = { {"id","int"}, {"name","string"}, {"city","string"}, {"size","int"}, key = "id" }
      local p, t, u = declared(dir, kind, U2, nil, copies)
      u:insert{ id = 1, name = "red", city = "rome", size = 3 }
      t:insert{ id = 1, team = 1, score = 10 }
      p:close()
      local _, log, notes
      p, t, u, _, log, _, notes = declared(dir, kind, { {"id","int"}, {"name","string"}, {"city","string"},
                                                       {"size","float"}, key = "id" }, nil, copies)
      assert.truthy(noted(notes, '^u: widened "size" from int to float'))
      assert.truthy(noted(notes, '^j: its sinks were not told what its rebuild changed %(.*"size"'), table.concat(notes, "\n"))
      t:insert{ id = 5, team = 1, score = 50 }
      assert.same({ "INSERT 2" }, H.verbs(log))
      p:close()
      verified(dir)
    end)
  end)
end

describe("what reads a join whose right table's columns changed", function()
  after_each(H.cleanup)

  it("a keyed map over it is told nothing for a rename of the right table's column", function()
    local dir = H.tmpdir()
    local function decl(ucols)
      local p, notes = H.open_noting(dir)
      local t = p:table("t", T)
      local u = p:table("u", ucols)
      local j = t:join(u, { on = "team", name = "j" })
      local m = j:map(function(r) return { kk = -r.id, where = r.name } end,
                      { {"kk","int"}, {"where","string", null = true}, key = "kk" }, "m")
      return p, t, u, m, notes
    end
    local p, t, u = decl(U)
    seed(t, u)
    p:close()
    local m, notes
    p, t, u, m, notes = decl({ {"id","int"}, {"name","string"}, {"town","string", was = "city"}, key = "id" })
    assert.is_nil(untold(notes), table.concat(notes, "\n"))
    local log = H.record(m)
    t:insert{ id = 5, team = 2, score = 50 }
    assert.same({ { "INSERT", -5, "blue" } }, (function()
      local out = {}
      for i, e in ipairs(log) do out[i] = { e[1], e[3].kk, e[3].where } end
      return out
    end)())
    p:close()
    verified(dir)
  end)

  it("an outer join tells what changed for its rows with and without a left row", function()
    local dir = H.tmpdir()
    local function decl(ucols)
      local p, notes = H.open_noting(dir)
      local t = p:table("t", T)
      local u = p:table("u", ucols)
      local j = t:join(u, { on = "id", kind = "outer", name = "j" })
      return p, t, u, j, notes
    end
    local copy, apply = H.id_applier()
    local p, t, u, j = decl(U)
    j:sink(apply)
    u:insert{ id = 1, name = "red", city = "rome" }
    u:insert{ id = 2, name = "blue", city = "oslo" }
    t:insert{ id = 1, team = 1, score = 10 }
    t:insert{ id = 3, team = 1, score = 30 }
    p:close()
    local notes
    p, t, u, j, notes = decl({ {"id","int"}, {"label","string", was = "name"}, {"tier","string", default = "a"},
                               key = "id" })
    assert.is_nil(untold(notes), table.concat(notes, "\n"))
    local log = H.record(j)
    j:sink(apply)
    t:insert{ id = 4, team = 1, score = 40 }
    local verbs = H.verbs(log)
    assert.equal(3, #verbs, table.concat(verbs, ", ")) -- keys 1 and 2 gained tier (3 has no right row); then 4
    assert.equal("INSERT", log[3][1])
    for i = 1, 2 do
      assert.equal("UPDATE", log[i][1])
      assert.is_nil(log[i][4].tier)
      assert.equal("a", log[i][3].tier)
      assert.equal(log[i][4].label, log[i][3].label)
    end
    for _, row in pairs(copy) do
      row.city = nil
      if row.name then row.label, row.name = row.name, nil end
    end
    assert.same(H.rows_by_id(j), copy)
    p:close()
    verified(dir)
  end)
end)

describe("a join whose right table's columns changed twice before any group", function()
  after_each(H.cleanup)

  it("tells once what both changed, against what its sinks were told", function()
    local dir = H.tmpdir()
    local copies = {}
    local p, t, u = declared(dir, "left", U, nil, copies)
    seed(t, u)
    p:close()
    local notes, _
    p, t, u, _, _, _, notes = declared(dir, "left", { {"id","int"}, {"name","string"}, {"city","string"},
                                                     {"tier","string", default = "a"}, key = "id" }, nil, copies)
    assert.is_nil(untold(notes), table.concat(notes, "\n"))
    p:close()
    local heard, log
    p, t, u, heard, log, _, notes = declared(dir, "left", { {"id","int"}, {"label","string", was = "name"},
                                                           {"tier","string", default = "a"}, key = "id" }, nil, copies)
    assert.is_nil(untold(notes), table.concat(notes, "\n"))
    t:insert{ id = 5, team = 2, score = 50 }
    assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", "INSERT 5" }, H.verbs(log))
    assert.same({ id = 1, team = 1, score = 10, ["u.id"] = 1, label = "red" }, log[1][4])
    assert.same({ id = 1, team = 1, score = 10, ["u.id"] = 1, label = "red", tier = "a" }, log[1][3])
    for _, row in pairs(copies.copy) do
      row.city = nil
      if row.name then row.label, row.name = row.name, nil end
    end
    assert.same(H.rows_by_id(heard), copies.copy)
    p:close()
    verified(dir)
  end)
end)
