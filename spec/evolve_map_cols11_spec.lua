-- A map declared again with other columns but the same function (0.22).
-- Its rows as its sinks were told are its function over its input's rows
-- as told, made in the columns it had (their defaults too), given in the
-- new columns by name, as a rebuild's are (core/evolve_log.c): a new
-- column is null in them (even with a default: its sinks were told no
-- value of it), a column given a default it did not have takes it now.
-- What differs is told at the start of the next group, by row id, keyed
-- or not, and passes through a filter or map over it. Before, nothing
-- was told: a copy kept from the log lacked every value the new
-- declaration gave (0.21).
local runnel = require "runnel"
local H = require "helper"

local T = { {"k","int"}, {"v","int"}, {"g","int"}, key = "k" }

local applier, rows_by_id = H.id_applier, H.rows_by_id -- spec/helper.lua

-- The state at dir opened, its table t declared with tcols and a map m
-- passing t's rows on as they are, declared with mcols keyed by key (or
-- not keyed for nil): p, t, m and the notes the open gave.
local function passing_map(dir, tcols, mcols, key)
  local p, notes = H.open_noting(dir)
  local t = p:table("t", tcols)
  mcols.key = key or mcols.key
  return p, t, t:map(function(r) return r end, mcols, "m"), notes
end

local function seed(t)
  for k = 1, 3 do t:insert{ k = k, v = 10 * k, g = k % 2 } end
end

local function noted(notes, pattern)
  for _, line in ipairs(notes) do if line:find(pattern) then return line end end
  return nil
end

local F = function(r) return { id = r.k, a = r.v } end -- the same function in every run
local AB = { {"id","int"}, {"a","int"}, key = "id" }
local ABD = { {"id","int"}, {"a","int"}, {"b","int", default = 7}, key = "id" }

local function opened(dir, cols, fn)
  local p, notes = H.open_noting(dir)
  local t = p:table("t", T)
  return p, t, t:map(fn or F, cols, "m"), notes
end

describe("a keyed map whose columns changed but its function did not", function()
  after_each(H.cleanup)

  it("tells its sinks the new column's values, so a copy from the log equals its rows", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local p, t, m = opened(dir, AB)
    m:sink(apply)
    seed(t)
    p:close()
    local notes
    p, t, m, notes = opened(dir, ABD)
    assert.truthy(noted(notes, "^m: its declaration changed"))
    assert.is_nil(noted(notes, "not told"))
    local log = H.record(m)
    m:sink(apply)
    t:insert{ k = 4, v = 40, g = 0 }
    assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", "INSERT 4" }, H.verbs(log))
    assert.same({ id = 1, a = 10 }, log[1][4])                 -- b: its sinks were told no value of it
    assert.same({ id = 1, a = 10, b = 7 }, log[1][3])
    assert.same(rows_by_id(m), copy)                           -- before: the copy lacked b = 7 (0.21)
    H.clear(log)
    t:insert{ k = 5, v = 50, g = 1 }
    assert.same({ "INSERT 5" }, H.verbs(log))                  -- told once
    p:close()
  end)

  it("goes through the outbox to a durable sink, and into a cdc log of it", function()
    local dir = H.tmpdir()
    local p, t = opened(dir, AB)
    seed(t)
    p:close()
    local m
    p, t, m = opened(dir, ABD)
    local cdc = {}
    m:cdc{}:sink(function(_, row) cdc[#cdc + 1] = row["cdc$operation"] .. " " .. row.id .. " " .. tostring(row.b) end)
    local durable = {}
    m:sink(function(verb, row, _, info) durable[#durable + 1] = verb .. " " .. info.id .. " " .. row.b end,
           { durable = true, name = "d" })
    t:insert{ k = 4, v = 40, g = 0 }
    p:flush()
    assert.same({ "UPDATE 1 7", "UPDATE 2 7", "UPDATE 3 7", "INSERT 4 7" }, durable)
    assert.same({ "1 1 7", "1 2 7", "1 3 7", "2 4 7" }, cdc)
    p:close()
  end)

  it("tells a default given to a column it had, and nothing for a column whose default stayed", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local fn = function(r) return { id = r.k, a = r.v, c = r.k == 2 and 5 or nil } end
    local p, t, m = opened(dir, { {"id","int"}, {"a","int"}, {"c","int", null = true}, {"d","int", default = 3},
                                  key = "id" }, fn)
    m:sink(apply)
    seed(t)
    p:close()
    local notes
    p, t, m, notes = opened(dir, { {"id","int"}, {"a","int"}, {"c","int", null = true, default = 9},
                                   {"d","int", default = 3}, key = "id" }, fn)
    assert.is_nil(noted(notes, "not told"))
    local log = H.record(m)
    m:sink(apply)
    t:insert{ k = 4, v = 40, g = 0 }
    assert.same({ "UPDATE 1", "UPDATE 3", "INSERT 4" }, H.verbs(log)) -- row 2 gives c = 5 itself; d kept its 3
    assert.same({ id = 1, a = 10, d = 3 }, log[1][4])
    assert.same({ id = 1, a = 10, c = 9, d = 3 }, log[1][3])
    assert.same(rows_by_id(m), copy)
    p:close()
  end)

  it("with another key: tells by row id what changed, nothing where a row stayed", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local p, t, m = opened(dir, AB)
    m:sink(apply)
    seed(t)
    p:close()
    local notes
    p, t, m, notes = opened(dir, { {"id","int"}, {"a","int"}, key = "a" })
    assert.is_nil(noted(notes, "not told"))
    local log = H.record(m)
    m:sink(apply)
    t:insert{ k = 4, v = 40, g = 0 }
    assert.same({ "INSERT 4" }, H.verbs(log))                  -- the rows are the same
    assert.same(rows_by_id(m), copy)
    p:close()
    p, t, m, notes = opened(dir, { {"id","int"}, {"a","int"}, {"b","int", default = 7}, key = "id" })
    assert.is_nil(noted(notes, "not told"))
    log = H.record(m)
    m:sink(apply)
    t:update{ k = 2, v = 21 }
    assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", "UPDATE 4", "UPDATE 2" }, H.verbs(log))
    assert.same(rows_by_id(m), copy)
    p:close()
  end)

  it("with a column made float: its values convert exactly, nothing is told", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local p, t, m = opened(dir, AB)
    m:sink(apply)
    seed(t)
    p:close()
    local notes
    p, t, m, notes = opened(dir, { {"id","int"}, {"a","float"}, key = "id" })
    assert.is_nil(noted(notes, "not told"))
    local log = H.record(m)
    m:sink(apply)
    t:insert{ k = 4, v = 40, g = 0 }
    assert.same({ "INSERT 4" }, H.verbs(log))
    assert.equal("float", math.type(log[1][3].a))
    p:close()
  end)

  it("a new column given a value only by its input's new column is told too", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local function decl(tcols, mcols) return passing_map(dir, tcols, mcols) end
    local p, t, m = decl(T, { {"k","int"}, {"v","int"}, {"g","int"}, key = "k" })
    m:sink(apply)
    seed(t)
    p:close()
    local TW = { {"k","int"}, {"v","int"}, {"g","int"}, {"w","int", default = 5}, key = "k" }
    local notes
    p, t, m, notes = decl(TW, { {"k","int"}, {"v","int"}, {"g","int"}, {"w","int", null = true}, key = "k" })
    assert.truthy(noted(notes, '^t: added "w" int = 5'))
    assert.is_nil(noted(notes, "not told"))
    local log = H.record(m)
    m:sink(apply)
    t:insert{ k = 4, v = 40, g = 0 }
    -- the table's new column is no change of its rows (a note gives it), but no note gives the map's
    assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", "INSERT 4" }, H.verbs(log))
    assert.same({ k = 1, v = 10, g = 1 }, log[1][4])
    assert.same({ k = 1, v = 10, g = 1, w = 5 }, log[1][3])
    assert.same(rows_by_id(m), copy)
    p:close()
  end)
end)

describe("a map passing its input's rows on, whose input renamed a column", function()
  after_each(H.cleanup)

  it("tells nothing when its own column follows the rename with was =: a rename is no change of rows", function()
    for _, key in ipairs{ "k", false } do
      local dir = H.tmpdir()
      local copy, apply = applier()
      local function decl(tcols, mcols) mcols.key = nil; return passing_map(dir, tcols, mcols, key) end
      local p, t, m = decl(T, { {"k","int"}, {"v","int"}, {"g","int"} })
      m:sink(apply)
      seed(t)
      p:close()
      local notes
      p, t, m, notes = decl({ {"k","int"}, {"w","int", was = "v"}, {"g","int"}, key = "k" },
                            { {"k","int"}, {"w","int", was = "v"}, {"g","int"} })
      assert.truthy(noted(notes, '^t: renamed "v" to "w"'))
      assert.is_nil(noted(notes, "not told"), tostring(key))
      local log = H.record(m)
      m:sink(apply)
      t:insert{ k = 4, w = 40, g = 0 }
      assert.same({ "INSERT 4" }, H.verbs(log))
      for _, row in pairs(copy) do if row.v then row.w, row.v = row.v, nil end end
      assert.same(rows_by_id(m), copy)
      p:close()
    end
  end)
end)

describe("a map passing its input's rows on, whose input dropped a column", function()
  after_each(H.cleanup)

  it("tells nothing when it drops the column too: a dropped column is no change of rows", function()
    for _, key in ipairs{ "k", false } do
      local dir = H.tmpdir()
      local copy, apply = applier()
      local function decl(tcols, mcols) mcols.key = nil; return passing_map(dir, tcols, mcols, key) end
      local p, t, m = decl(T, { {"k","int"}, {"v","int"}, {"g","int"} })
      m:sink(apply)
      seed(t)
      p:close()
      local notes
      p, t, m, notes = decl({ {"k","int"}, {"v","int"}, key = "k" }, { {"k","int"}, {"v","int"} })
      assert.truthy(noted(notes, '^t: dropped "g"'))
      assert.is_nil(noted(notes, "not told"), tostring(key))
      local log = H.record(m)
      m:sink(apply)
      t:insert{ k = 4, v = 40 }
      assert.same({ "INSERT 4" }, H.verbs(log))
      for _, row in pairs(copy) do row.g = nil end
      assert.same(rows_by_id(m), copy)
      p:close()
    end
  end)
end)

describe("a map without a key whose columns changed but its function did not", function()
  after_each(H.cleanup)

  it("tells its sinks the new column's values", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local p, t, m = opened(dir, { {"id","int"}, {"a","int"} })
    m:sink(apply)
    seed(t)
    p:close()
    local notes
    p, t, m, notes = opened(dir, { {"id","int"}, {"a","int"}, {"b","int", default = 7} })
    assert.truthy(noted(notes, "^m: its declaration changed"))
    assert.is_nil(noted(notes, "not told"))
    local log = H.record(m)
    m:sink(apply)
    t:insert{ k = 4, v = 40, g = 0 }
    assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", "INSERT 4" }, H.verbs(log))
    assert.same({ id = 2, a = 20 }, log[2][4])
    assert.same({ id = 2, a = 20, b = 7 }, log[2][3])
    assert.same(rows_by_id(m), copy)
    p:close()
  end)
end)

describe("a filter over a map whose columns changed but its function did not", function()
  after_each(H.cleanup)

  it("passes on what the map tells, of the rows it passes", function()
    for _, cols in ipairs{ { AB, ABD }, { { {"id","int"}, {"a","int"} }, { {"id","int"}, {"a","int"}, {"b","int", default = 7} } } } do
      -- a state of its own: t dropped and declared again would number its rows after the dropped one's
      local dir = H.tmpdir()
      local copy, apply = applier()
      local function decl(mcols)
        local p, notes = H.open_noting(dir)
        local t = p:table("t", T)
        return p, t, t:map(F, mcols, "m"):filter(function(r) return r.a >= 20 end, "f"), notes
      end
      local p, t, f = decl(cols[1])
      f:sink(apply)
      seed(t)
      p:close()
      local notes
      p, t, f, notes = decl(cols[2])
      assert.is_nil(noted(notes, "not told"))
      local log = H.record(f)
      f:sink(apply)
      t:insert{ k = 4, v = 40, g = 0 }
      assert.same({ "UPDATE 2", "UPDATE 3", "INSERT 4" }, H.verbs(log))
      assert.same({ id = 3, a = 30, b = 7 }, log[2][3])
      assert.same(rows_by_id(f), copy)
      p:close()
      p = runnel.open{ path = dir, notes = false }
      p:drop("f")
      p:drop("m")
      p:drop("t")
      p:close()
    end
  end)
end)

describe("a map whose function and columns did not change, over a map whose columns changed", function()
  after_each(H.cleanup)

  it("tells what its input's change gave it, keyed or not", function()
    for _, key in ipairs{ "x", false } do
      local dir = H.tmpdir()
      local copy, apply = applier()
      local function decl(m1cols)
        local p, notes = H.open_noting(dir)
        local t = p:table("t", T)
        local m1 = t:map(F, m1cols, "m1")
        local m2 = m1:map(function(r) return { x = -r.id, b = r.b } end,
                          { {"x","int"}, {"b","int", null = true}, key = key or nil }, "m2")
        return p, t, m2, notes
      end
      local p, t, m2 = decl(AB) -- r.b: nil
      m2:sink(apply)
      seed(t)
      p:close()
      local notes
      p, t, m2, notes = decl(ABD) -- m1 gains b = 7 in every row, and so m2
      assert.is_nil(noted(notes, "not told"))
      local log = H.record(m2)
      m2:sink(apply)
      t:insert{ k = 4, v = 40, g = 0 }
      assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", "INSERT 4" }, H.verbs(log), tostring(key))
      assert.same({ x = -1 }, log[1][4])
      assert.same({ x = -1, b = 7 }, log[1][3])
      assert.same(rows_by_id(m2), copy)
      p:close()
    end
  end)
end)

describe("a map whose columns changed but its function did not, its old rows not fitting", function()
  after_each(H.cleanup)

  it("says its sinks were not told (a null told in a column now not null)", function()
    local dir = H.tmpdir()
    local fn = function(r) return { id = r.k, c = r.k == 2 and 5 or nil } end
    local p, t = opened(dir, { {"id","int"}, {"c","int", null = true}, key = "id" }, fn)
    seed(t)
    p:close()
    local m, notes
    p, t, m, notes = opened(dir, { {"id","int"}, {"c","int", default = 9}, key = "id" }, fn)
    assert.truthy(noted(notes, '^m: its sinks were not told what its rebuild changed %(its old rows do not fit ' ..
                               'its new columns: row 1 holds null in column "c", which is not null now%)'))
    local log = H.record(m)
    t:insert{ k = 4, v = 40, g = 0 }
    assert.same({ "INSERT 4" }, H.verbs(log))
    p:close()
  end)
end)

-- A column with a default that a map's function does not give holds the
-- default in every row its sinks were told: its old function's rows, or
-- its rows over what its input told, are made with it (0.21 made them with
-- null there, and told every row as an UPDATE to the default).
describe("a map with a column its function leaves to its default", function()
  after_each(H.cleanup)

  local COLS = { {"k","int"}, {"w","int"}, {"d","int", default = 3} }

  it("tells only the rows its new function changed, keyed or not", function()
    for _, key in ipairs{ "k", false } do
      local dir = H.tmpdir()
      local copy, apply = applier()
      local function decl(fn)
        local p, notes = H.open_noting(dir)
        local t = p:table("t", T)
        COLS.key = key or nil
        return p, t, t:map(fn, COLS, "m"), notes
      end
      local p, t, m = decl(function(r) return { k = r.k, w = r.v } end)
      m:sink(apply)
      seed(t)
      p:close()
      local notes
      p, t, m, notes = decl(function(r) return { k = r.k, w = r.k == 1 and 99 or r.v } end)
      assert.is_nil(noted(notes, "not told"))
      local log = H.record(m)
      m:sink(apply)
      t:insert{ k = 4, v = 40, g = 0 }
      assert.same({ "UPDATE 1", "INSERT 4" }, H.verbs(log), tostring(key))
      assert.same({ k = 1, w = 10, d = 3 }, log[1][4])
      assert.same(rows_by_id(m), copy)
      p:close()
    end
  end)

  it("whose columns changed too: the default is in the rows its sinks were told", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local function decl(fn, cols)
      local p, notes = H.open_noting(dir)
      local t = p:table("t", T)
      return p, t, t:map(fn, cols, "m"), notes
    end
    local p, t, m = decl(function(r) return { k = r.k, w = r.v } end,
                         { {"k","int"}, {"w","int"}, {"d","int", default = 3}, key = "k" })
    m:sink(apply)
    seed(t)
    p:close()
    local notes
    p, t, m, notes = decl(function(r) return { k = r.k, w = r.k == 1 and 99 or r.v, e = r.k == 2 and 1 or nil } end,
                          { {"k","int"}, {"w","int"}, {"d","int", default = 3}, {"e","int", null = true}, key = "k" })
    assert.is_nil(noted(notes, "not told"))
    local log = H.record(m)
    m:sink(apply)
    t:insert{ k = 4, v = 40, g = 0 }
    assert.same({ "UPDATE 1", "UPDATE 2", "INSERT 4" }, H.verbs(log))
    assert.same({ k = 1, w = 10, d = 3 }, log[1][4])
    assert.same({ k = 2, w = 20, d = 3, e = 1 }, log[2][3])
    assert.same(rows_by_id(m), copy)
    p:close()
  end)

  it("keyed, rebuilt because its input changed: tells only the rows that changed", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local U = { {"id","int"}, {"name","string"}, key = "id" }
    local function decl(mapper)
      local p, notes = H.open_noting(dir)
      local t = p:table("t", T)
      local u = p:table("u", U)
      local j = t:join(u, { mapper = mapper, name = "j" })
      local m = j:map(function(r) return { kk = r.k * 100, name = r.name } end,
                      { {"kk","int"}, {"name","string"}, {"d","int", default = 3}, key = "kk" }, "m")
      return p, t, u, m, notes
    end
    local p, t, u, m = decl(function(r) return r.g end)
    m:sink(apply)
    u:insert{ id = 0, name = "even" }
    u:insert{ id = 1, name = "odd" }
    u:insert{ id = 2, name = "two" }
    seed(t)
    p:close()
    local notes
    p, t, u, m, notes = decl(function(r) if r.k ~= 3 then return r.k % 3 end end)
    assert.is_nil(noted(notes, "not told"))
    local log = H.record(m)
    m:sink(apply)
    t:insert{ k = 4, v = 40, g = 0 }
    -- k = 1 joins 1 still; k = 2 now 2 ("two"); k = 3 no longer joins
    assert.same({ "UPDATE 2", "DELETE 3", "INSERT 4" }, H.verbs(log))
    assert.same({ kk = 200, name = "even", d = 3 }, log[1][4])
    assert.same(rows_by_id(m), copy)
    p:close()
  end)
end)

describe("a map whose columns changed twice before any group, its function as it was", function()
  after_each(H.cleanup)

  it("tells once what both changed, against what its sinks were told, keyed or not", function()
    for _, key in ipairs{ "id", false } do
      local dir = H.tmpdir()
      local copy, apply = applier()
      local function cols(...)
        local c = { {"id","int"}, {"a","int"}, ... }
        c.key = key or nil
        return c
      end
      local p, t, m = opened(dir, cols())
      m:sink(apply)
      seed(t)
      p:close()
      p = opened(dir, cols({"b","int", default = 7})) -- closed before any group: nothing told yet
      p:close()
      local notes
      p, t, m, notes = opened(dir, cols({"b","int", default = 7}, {"c","int", default = 1}))
      assert.is_nil(noted(notes, "not told"))
      local log = H.record(m)
      m:sink(apply)
      t:insert{ k = 4, v = 40, g = 0 }
      assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", "INSERT 4" }, H.verbs(log), tostring(key))
      assert.same({ id = 1, a = 10 }, log[1][4])                 -- as its sinks were told: no b, no c
      assert.same({ id = 1, a = 10, b = 7, c = 1 }, log[1][3])
      assert.same(rows_by_id(m), copy)
      p:close()
    end
  end)
end)

describe("a keyed map whose columns changed, its function as it was, over a join rebuilt", function()
  after_each(H.cleanup)

  it("tells what both changed in one change per row", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local U = { {"id","int"}, {"name","string"}, key = "id" }
    local function decl(mapper, mcols)
      local p, notes = H.open_noting(dir)
      local t = p:table("t", T)
      local u = p:table("u", U)
      local j = t:join(u, { mapper = mapper, name = "j" })
      return p, t, u, j:map(function(r) return { kk = r.k * 100, name = r.name } end, mcols, "m"), notes
    end
    local p, t, u, m = decl(function(r) return r.g end, { {"kk","int"}, {"name","string"}, key = "kk" })
    m:sink(apply)
    u:insert{ id = 0, name = "even" }
    u:insert{ id = 1, name = "odd" }
    u:insert{ id = 2, name = "two" }
    seed(t)
    p:close()
    local notes
    p, t, u, m, notes = decl(function(r) if r.k ~= 3 then return r.k % 3 end end,
                             { {"kk","int"}, {"name","string"}, {"d","int", default = 3}, key = "kk" })
    assert.is_nil(noted(notes, "not told"))
    local log = H.record(m)
    m:sink(apply)
    t:insert{ k = 4, v = 40, g = 0 }
    assert.same({ "UPDATE 1", "UPDATE 2", "DELETE 3", "INSERT 4" }, H.verbs(log))
    assert.same({ kk = 200, name = "even" }, log[2][4])
    assert.same({ kk = 200, name = "two", d = 3 }, log[2][3])
    assert.same(rows_by_id(m), copy)
    p:close()
  end)
end)

describe("an aggregate whose columns changed twice before any group, gaining a column that holds no null", function()
  after_each(H.cleanup)

  it("tells once what both changed: the null its sinks were told of the first fits the column", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local function declared(list)
      local p, notes = H.open_noting(dir)
      local t = p:table("t", T)
      return p, t, t:aggregate{ by = "g", name = "a", table.unpack(list) }, notes
    end
    local p, t, a = declared({ {"hi", runnel.max("v")} })
    a:sink(apply)
    seed(t)
    p:close()
    p = declared({ {"hi", runnel.max("v")}, {"n", runnel.count()} }) -- n is told null: its sinks had no value
    p:close()
    local notes
    p, t, a, notes = declared({ {"hi", runnel.max("v")}, {"n", runnel.count()}, {"s", runnel.sum("v")} })
    assert.is_nil(noted(notes, "not told")) -- 0.21: row 1 holds null in column "n", which is not null now
    local log = H.record(a)
    a:sink(apply)
    t:insert{ k = 4, v = 40, g = 0 }
    assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 2" }, H.verbs(log))
    assert.same({ g = 1, hi = 30 }, log[1][4])
    assert.same({ g = 1, hi = 30, n = 2, s = 40 }, log[1][3])
    assert.same(rows_by_id(a), copy)
    p:close()
  end)
end)

describe("a keyed map told nothing yet of a change of columns, declared again with a function that cannot be run again", function()
  after_each(H.cleanup)

  it("says its sinks were not told, and tells nothing of the rows kept in the columns before", function()
    local dir = H.tmpdir()
    local scale = { 10 } -- a table upvalue: the function cannot be kept to run again
    local fn1 = function(r) return { kk = r.k, v = r.v * scale[1] } end
    local p, t = opened(dir, { {"kk","int"}, {"v","int"}, key = "kk" }, fn1)
    seed(t)
    p:close()
    p = opened(dir, { {"kk","int"}, {"v","int"}, {"b","int", default = 7}, key = "kk" }, fn1) -- no group follows
    p:close()
    local m, notes
    p, t, m, notes = opened(dir, { {"kk","int"}, {"w","string", null = true}, key = "kk" },
                            function(r) return { kk = r.k, w = tostring(r.v) } end)
    assert.truthy(noted(notes, "^m: its sinks were not told what its new function changed %(its old function held"))
    local log = H.record(m)
    t:insert{ k = 5, v = 50, g = 0 }
    assert.same({ "INSERT 4" }, H.verbs(log)) -- the rows kept in the columns before are not told in these
    p:close()
  end)
end)

-- A table's new column is no change of its rows (a note gives its values),
-- but what a map's function makes of it is a change of the map's rows, which
-- no note gives: told as a join's is (its joiner read the column), 0.22.
describe("a map whose declaration and function stayed, over a table that gained a column", function()
  after_each(H.cleanup)

  local T1 = { {"k","int"}, {"v","int"}, key = "k" }
  local T2 = { {"k","int"}, {"v","int"}, {"w","int", default = 5}, key = "k" }

  local function decl(dir, tcols, fn, mcols)
    local p, notes = H.open_noting(dir)
    local t = p:table("t", tcols)
    return p, t, t:map(fn, mcols, "m"), t:filter(function(r) return r.k ~= 2 end, "f"), notes
  end

  it("tells what its function makes of it, keyed or not; a filter over the table tells nothing", function()
    for _, key in ipairs{ "k", false } do
      local dir = H.tmpdir()
      local copy, apply = applier()
      local fn = function(r) return { k = r.k, w = r.w } end
      local cols = { {"k","int"}, {"w","int", null = true}, key = key or nil }
      local p, t, m = decl(dir, T1, fn, cols)
      m:sink(apply)
      for k = 1, 2 do t:insert{ k = k, v = 10 * k } end
      p:close()
      local f, notes
      p, t, m, f, notes = decl(dir, T2, fn, cols)
      assert.truthy(noted(notes, '^t: added "w" int = 5'))
      assert.is_nil(noted(notes, "not told"))
      local log, flog = H.record(m), H.record(f)
      m:sink(apply)
      t:insert{ k = 3, v = 30 }
      assert.same({ "UPDATE 1", "UPDATE 2", "INSERT 3" }, H.verbs(log), tostring(key))
      assert.same({ k = 1 }, log[1][4])
      assert.same({ k = 1, w = 5 }, log[1][3])
      assert.same({ "INSERT 3" }, H.verbs(flog))
      assert.same(rows_by_id(m), copy)
      p:close()
    end
  end)

  it("tells nothing when its function does not read it", function()
    for _, key in ipairs{ "k", false } do
      local dir = H.tmpdir()
      local fn = function(r) return { k = r.k, v = r.v } end
      local cols = { {"k","int"}, {"v","int"}, key = key or nil }
      local p, t = decl(dir, T1, fn, cols)
      for k = 1, 2 do t:insert{ k = k, v = 10 * k } end
      p:close()
      local m, notes
      p, t, m, _, notes = decl(dir, T2, fn, cols)
      assert.is_nil(noted(notes, "not told"))
      local log = H.record(m)
      t:insert{ k = 3, v = 30 }
      assert.same({ "INSERT 3" }, H.verbs(log), tostring(key))
      p:close()
    end
  end)
end)
