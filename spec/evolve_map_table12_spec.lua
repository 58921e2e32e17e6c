-- A map over a table that renamed (was =) or dropped a column in the same
-- reopen (0.23). The table's rows are rewritten first; a map's function
-- that reads the column by its old name then reads nil. Before, such a map
-- told nothing and said nothing, and one whose function followed the rename
-- (r.city to r.town) told every row as an UPDATE from null: its old
-- function, run again over the rewritten rows, read nil (0.22).
-- Now, while a map's sinks are told at its declaration, a name its table
-- had before this run reads, in the rows as its sinks were told them, the
-- value that column held (a rename followed); a dropped column's values are
-- gone, and a note says its sinks were not told. Its function reading a
-- name that is gone now gives a note naming the map, the column and what
-- became of it, and what that changed is told.
local H = require "helper"

local A = { {"k","int"}, {"city","string"}, {"n","int"}, key = "k" }
local RENAMED = { {"k","int"}, {"town","string", was = "city"}, {"n","int"}, key = "k" }
local DROPPED = { {"k","int"}, {"n","int"}, key = "k" }
local M = { {"k","int"}, {"c","string", null = true}, {"n","int"}, key = "k" }
local READS_CITY = function(r) return { k = r.k, c = r.city, n = r.n } end
local READS_TOWN = function(r) return { k = r.k, c = r.town, n = r.n } end

local function noted(notes, pattern)
  for _, line in ipairs(notes) do if line:find(pattern) then return line end end
  return nil
end

-- First run: t declared A, map m of t by fn1 (columns mcols), two rows.
-- Second: t declared tcols, m by fn2. p, t, m, notes, log, copy.
local function reopened(tcols, fn1, fn2, mcols)
  local dir = H.tmpdir()
  mcols = mcols or M
  local copy, apply = H.id_applier()
  local p, notes = H.open_noting(dir)
  local t = p:table("t", A)
  local m = t:map(fn1, mcols, "m")
  m:sink(apply)
  t:insert{ k = 1, city = "oslo", n = 1 }
  t:insert{ k = 2, city = "rome", n = 2 }
  p:close()
  p, notes = H.open_noting(dir)
  t = p:table("t", tcols)
  m = t:map(fn2, mcols, "m")
  local log = H.record(m)
  m:sink(apply)
  return p, t, m, notes, log, copy
end

describe("a map over a table that renamed a column", function()
  after_each(H.cleanup)

  it("whose function followed the rename tells nothing for a row whose output stayed", function()
    local p, t, m, notes, log, copy = reopened(RENAMED, READS_CITY, READS_TOWN)
    assert.truthy(noted(notes, '^m: its function changed'))
    assert.is_nil(noted(notes, "not told"), table.concat(notes, "\n"))
    assert.is_nil(noted(notes, "reads column"), table.concat(notes, "\n"))
    t:insert{ k = 3, town = "lima", n = 3 }
    assert.same({ "INSERT 3" }, H.verbs(log))                  -- before: UPDATE 1, UPDATE 2 from c = nil
    assert.same(H.rows_by_id(m), copy)
    p:close()
  end)

  it("whose function followed the rename and changed otherwise tells only that change", function()
    local p, t, m, notes, log, copy = reopened(RENAMED, READS_CITY,
                                               function(r) return { k = r.k, c = r.town, n = r.n * 10 } end)
    assert.is_nil(noted(notes, "not told"), table.concat(notes, "\n"))
    t:insert{ k = 3, town = "lima", n = 3 }
    assert.same({ "UPDATE 1", "UPDATE 2", "INSERT 3" }, H.verbs(log))
    assert.same({ k = 1, c = "oslo", n = 1 }, log[1][4])
    assert.same({ k = 1, c = "oslo", n = 10 }, log[1][3])
    assert.same(H.rows_by_id(m), copy)
    p:close()
  end)

  for _, keyed in ipairs{ true, false } do
    it((keyed and "keyed" or "without a key") .. ", whose function still reads the old name: a note names it, " ..
       "and the change is told", function()
      local cols = keyed and M or { {"k","int"}, {"c","string", null = true}, {"n","int"} }
      local p, t, m, notes, log, copy = reopened(RENAMED, READS_CITY, READS_CITY, cols)
      assert.truthy(noted(notes, '^m: its function reads column "city", which "t" renamed to "town"'),
                    table.concat(notes, "\n"))
      assert.is_nil(noted(notes, "not told"), table.concat(notes, "\n"))
      t:insert{ k = 3, town = "lima", n = 3 }
      assert.same({ "UPDATE 1", "UPDATE 2", "INSERT 3" }, H.verbs(log)) -- before: silence, the copy kept "oslo"
      assert.same({ k = 1, c = "oslo", n = 1 }, log[1][4])
      assert.same({ k = 1, n = 1 }, log[1][3])
      assert.same(H.rows_by_id(m), copy)
      p:close()
    end)
  end

  it("through a filter: the same", function()
    local dir = H.tmpdir()
    local copy, apply = H.id_applier()
    local function open(tcols, fn)
      local p, notes = H.open_noting(dir)
      local t = p:table("t", tcols)
      local m = t:filter(function(r) return r.n > 0 end, "f"):map(fn, M, "m")
      return p, t, m, notes
    end
    local p, t, m = open(A, READS_CITY)
    m:sink(apply)
    t:insert{ k = 1, city = "oslo", n = 1 }
    p:close()
    local notes
    p, t, m, notes = open(RENAMED, READS_TOWN)
    local log = H.record(m)
    m:sink(apply)
    assert.is_nil(noted(notes, "not told"), table.concat(notes, "\n"))
    t:insert{ k = 3, town = "lima", n = 3 }
    assert.same({ "INSERT 2" }, H.verbs(log))                  -- the second row through the filter
    assert.same(H.rows_by_id(m), copy)
    p:close()
  end)
end)

-- First run: t declared A, filter f of t by fn1, two rows (the second
-- in "rome"). Second: t renames city to town, f by fn2: p, t, f, notes,
-- log, copy (its rows by id, city read as town).
local function filter_reopened(fn1, fn2)
  local dir = H.tmpdir()
  local copy, apply = H.id_applier()
  local p = H.open_noting(dir)
  local t = p:table("t", A)
  t:filter(fn1, "f"):sink(apply)
  t:insert{ k = 1, city = "oslo", n = 1 }
  t:insert{ k = 2, city = "rome", n = 2 }
  p:close()
  local notes
  p, notes = H.open_noting(dir)
  t = p:table("t", RENAMED)
  local f = t:filter(fn2, "f")
  local log = H.record(f)
  f:sink(apply)
  return p, t, f, notes, log, copy
end

local function as_renamed(copy)
  for _, row in pairs(copy) do if row.city then row.town, row.city = row.city, nil end end
  return copy
end

describe("a filter over a table that renamed a column", function()
  after_each(H.cleanup)

  it("whose function followed the rename tells nothing for a row that still passes", function()
    local p, t, f, notes, log, copy = filter_reopened(function(r) return r.city ~= "rome" end,
                                                      function(r) return r.town ~= "rome" end)
    assert.truthy(noted(notes, '^f: its function changed'))
    assert.is_nil(noted(notes, "not told"), table.concat(notes, "\n"))
    t:insert{ k = 3, town = "lima", n = 3 }
    assert.same({ "INSERT 3" }, H.verbs(log))                  -- before: INSERT 2, row 2 passing the old one
    assert.same(H.rows_by_id(f), as_renamed(copy))
    p:close()
  end)

  it("whose function still reads the old name: a note names it, and the rows it stops passing are told", function()
    local fn = function(r) return r.city ~= "rome" end
    local p, t, f, notes, log, copy = filter_reopened(fn, fn)
    assert.truthy(noted(notes, '^f: its function reads column "city", which "t" renamed to "town"'),
                  table.concat(notes, "\n"))
    assert.is_nil(noted(notes, "not told"), table.concat(notes, "\n"))
    t:insert{ k = 3, town = "rome", n = 3 }
    assert.same({ "INSERT 2", "INSERT 3" }, H.verbs(log))      -- rome passes now (city is nil): before, silence
    assert.same(H.rows_by_id(f), as_renamed(copy))
    p:close()
  end)
end)

describe("a map over a table that dropped a column its function reads", function()
  after_each(H.cleanup)

  it("says its sinks were not told, naming the dropped column", function()
    local p, t, m, notes, log = reopened(DROPPED, READS_CITY, READS_CITY)
    local untold = noted(notes, "^m: its sinks were not told")
    assert.truthy(untold, table.concat(notes, "\n"))
    assert.truthy(untold:find('made from column "city", which "t" dropped', 1, true), untold)
    t:insert{ k = 3, n = 3 }
    assert.same({ "INSERT 3" }, H.verbs(log))
    p:close()
  end)

  it("whose function stopped reading it: its sinks were not told what it gave before", function()
    local p, t, m, notes, log = reopened(DROPPED, READS_CITY, function(r) return { k = r.k, n = r.n } end)
    local untold = noted(notes, "^m: its sinks were not told")
    assert.truthy(untold, table.concat(notes, "\n"))
    assert.truthy(untold:find('made from column "city", which "t" dropped', 1, true), untold)
    assert.is_nil(noted(notes, "^m: its function reads"), table.concat(notes, "\n"))
    t:insert{ k = 3, n = 3 }
    assert.same({ "INSERT 3" }, H.verbs(log))
    p:close()
  end)

  it("that it does not read: tells nothing, says nothing", function()
    local p, t, m, notes, log = reopened(DROPPED, function(r) return { k = r.k, n = r.n } end,
                                         function(r) return { k = r.k, n = r.n } end)
    assert.is_nil(noted(notes, "not told"), table.concat(notes, "\n"))
    assert.is_nil(noted(notes, "reads column"), table.concat(notes, "\n"))
    t:insert{ k = 3, n = 3 }
    assert.same({ "INSERT 3" }, H.verbs(log))
    p:close()
  end)
end)

-- A table's added columns (added_slots) are kept for the whole run, not
-- only until its first group: a map declared after a group its sinks did
-- not see still makes the rows they were told without the new column.
-- That is what they hold (run 1's rows), so the rows it tells are right:
-- forgetting the added columns at the first group would tell nothing for
-- rows 2 and 3 and leave its sinks without w's default. (A row a missed
-- group inserts is told as an UPDATE of a row they never had: a map
-- declared after a group misses that group whatever its columns.)
describe("a map declared after a group, over a table that gained a column its function reads", function()
  after_each(H.cleanup)

  for _, key in ipairs{ "k", false } do
    it(key and "keyed" or "without a key", function()
      local dir = H.tmpdir()
      local copy, apply = H.id_applier()
      local cols = { {"k","int"}, {"s","int"}, key = key or nil }
      local fn = function(r) return { k = r.k, s = r.v + (r.w or 0) } end
      local p = H.open_noting(dir)
      local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
      t:map(fn, cols, "m"):sink(apply)
      for k = 1, 3 do t:insert{ k = k, v = 10 * k } end
      p:close()
      p = H.open_noting(dir)
      t = p:table("t", { {"k","int"}, {"v","int"}, {"w","int", default = 5}, key = "k" })
      t:update{ k = 1, w = 9 }                                 -- a group m does not see
      local m = t:map(fn, cols, "m")
      local log = H.record(m)
      m:sink(apply)
      t:insert{ k = 5, v = 50 }
      assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", "INSERT 4" }, H.verbs(log))
      assert.same({ k = 1, s = 10 }, log[1][4])                -- as its sinks hold it
      assert.same({ k = 1, s = 19 }, log[1][3])                -- w = 9, which the group set: not read as null
      assert.same({ k = 2, s = 25 }, log[2][3])
      assert.same(H.rows_by_id(m), copy)
      p:close()
    end)
  end
end)
