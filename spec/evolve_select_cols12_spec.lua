-- A select declared again with other columns (0.23). Its rows as its
-- sinks were told are its old columns of its input's rows as told: the
-- state keeps which input columns it selected ("ad:" record), following
-- what its input table's own declaration moved in the same run (a rename,
-- a new or dropped column before it). They are given in the new columns by
-- name, as a map's are (core/evolve_log.c): a new column is null in them,
-- a dropped one left out. What differs is told at the start of the next
-- group, by row id, to its Lua sinks, cdc logs, durable sinks and the maps
-- over it. Before, its old told rows were dropped: nothing was told and no
-- note said so (0.22).
local H = require "helper"

local T = { {"k","int"}, {"v","int"}, {"g","int"}, key = "k" }

local function noted(notes, pattern)
  for _, line in ipairs(notes) do if line:find(pattern) then return line end end
  return nil
end

local function seed(t)
  for k = 1, 3 do t:insert{ k = k, v = 10 * k, g = k % 2 } end
end

-- The state at dir opened, table t declared with tcols (T when nil) and
-- select s of t with spec: p, t, s, notes.
local function opened(dir, spec, tcols)
  local p, notes = H.open_noting(dir)
  local t = p:table("t", tcols or T)
  return p, t, t:select(spec, "s"), notes
end

-- Runs the first declaration, seeds t and closes; then opens the second
-- with a copy kept from s's log since the first: p, t, s, notes, log, copy.
local function redeclared(first, second, tcols)
  local dir = H.tmpdir()
  local copy, apply = H.id_applier()
  local p, t, s = opened(dir, first)
  s:sink(apply)
  seed(t)
  p:close()
  local notes
  p, t, s, notes = opened(dir, second, tcols)
  local log = H.record(s)
  s:sink(apply)
  return p, t, s, notes, log, copy
end

describe("a select declared again with other columns", function()
  after_each(H.cleanup)

  it("tells each row's new column, so a copy from the log equals its rows", function()
    local p, t, s, notes, log, copy = redeclared({ "k", "v" }, { "k", "v", "g" })
    assert.is_nil(noted(notes, "not told"))
    t:insert{ k = 4, v = 40, g = 0 }
    assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", "INSERT 4" }, H.verbs(log))
    assert.same({ k = 1, v = 10 }, log[1][4])                  -- g: its sinks were told no value of it
    assert.same({ k = 1, v = 10, g = 1 }, log[1][3])
    assert.same(H.rows_by_id(s), copy)                         -- before: nothing told, the copy lacked g
    H.clear(log)
    t:insert{ k = 5, v = 50, g = 1 }
    assert.same({ "INSERT 5" }, H.verbs(log))                  -- told once
    p:close()
  end)

  it("that takes another input column under a name it had tells only the rows whose value changed", function()
    local p, t, s, notes, log, copy = redeclared({ "k", { "a", "v" } }, { "k", { "a", "g" } })
    assert.is_nil(noted(notes, "not told"))
    t:insert{ k = 4, v = 40, g = 0 }
    assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", "INSERT 4" }, H.verbs(log))
    assert.same({ k = 2, a = 20 }, log[2][4])
    assert.same({ k = 2, a = 0 }, log[2][3])
    assert.same(H.rows_by_id(s), copy)
    p:close()
  end)

  it("tells nothing for a column it dropped", function()
    local p, t, s, notes, log = redeclared({ "k", "v", "g" }, { "k", "v" })
    assert.is_nil(noted(notes, "not told"))
    t:insert{ k = 4, v = 40, g = 0 }
    assert.same({ "INSERT 4" }, H.verbs(log))
    p:close()
  end)

  it("without a key: tells by row id", function()
    local p, t, s, notes, log, copy = redeclared({ "v" }, { "v", "g" })
    assert.is_nil(noted(notes, "not told"))
    t:insert{ k = 4, v = 40, g = 0 }
    assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", "INSERT 4" }, H.verbs(log))
    assert.same({ v = 30, g = 1 }, log[3][3])
    assert.same(H.rows_by_id(s), copy)
    p:close()
  end)

  it("follows a rename and a new column of its table in the same run", function()
    -- t renames v to w and gains c before it; s keeps the name v for it, and takes g as well
    local tcols = { {"k","int"}, {"c","int", default = 5}, {"w","int", was = "v"}, {"g","int"}, key = "k" }
    local p, t, s, notes, log, copy = redeclared({ "k", "v" }, { "k", { "v", "w" }, "g" }, tcols)
    assert.is_nil(noted(notes, "not told"))
    t:insert{ k = 4, c = 1, w = 40, g = 0 }
    assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", "INSERT 4" }, H.verbs(log))
    assert.same({ k = 1, v = 10 }, log[1][4])                  -- v read through the rename
    assert.same({ k = 1, v = 10, g = 1 }, log[1][3])
    assert.same(H.rows_by_id(s), copy)
    p:close()
  end)

  it("tells nothing when only its table moved the columns it selects", function()
    local tcols = { {"k","int"}, {"c","int", default = 5}, {"v","int"}, {"g","int"}, key = "k" }
    local p, t, s, notes, log = redeclared({ "k", "v" }, { "k", "v" }, tcols)
    assert.is_nil(noted(notes, "not told"))
    t:insert{ k = 4, c = 1, v = 40, g = 0 }
    assert.same({ "INSERT 4" }, H.verbs(log))
    p:close()
  end)

  it("reaches a durable sink, a cdc log and a map over it", function()
    local dir = H.tmpdir()
    local M = { {"k","int"}, {"h","int", null = true}, key = "k" }
    local over = function(r) return { k = r.k, h = r.g } end
    local p, t, s = opened(dir, { "k", "v" })
    s:map(over, M, "m")
    seed(t)
    p:close()
    p, t, s = opened(dir, { "k", "v", "g" })
    local cdc = {}
    s:cdc{}:sink(function(_, row) cdc[#cdc + 1] = row["cdc$operation"] .. " " .. row.k .. " " .. tostring(row.g) end)
    local durable = {}
    s:sink(function(verb, row, _, info) durable[#durable + 1] = verb .. " " .. info.id .. " " .. row.g end,
           { durable = true, name = "d" })
    local m = s:map(over, M, "m")                            -- its function read g, which s lacked: h was null
    local mlog = H.record(m)
    t:insert{ k = 4, v = 40, g = 0 }
    p:flush()
    assert.same({ "UPDATE 1 1", "UPDATE 2 0", "UPDATE 3 1", "INSERT 4 0" }, durable)
    assert.same({ "1 1 1", "1 2 0", "1 3 1", "2 4 0" }, cdc)
    assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", "INSERT 4" }, H.verbs(mlog))
    p:close()
  end)

  it("whose column's type its table widened says its sinks were not told, naming the column and both types", function()
    local tcols = { {"k","int"}, {"v","float"}, {"g","int"}, key = "k" }
    local p, t, s, notes, log = redeclared({ "k", "v" }, { "k", "v", "g" }, tcols)
    local line = noted(notes, "^s: its sinks were not told")
    assert.truthy(line)
    assert.truthy(line:find('column "v"', 1, true) and line:find("int", 1, true) and line:find("float", 1, true))
    t:insert{ k = 4, v = 40, g = 0 }
    assert.same({ "INSERT 4" }, H.verbs(log))
    p:close()
  end)

  it("keyed by another of its columns: tells by row id what changed", function()
    local p, t, s, notes, log, copy = redeclared({ "v", "k", key = "v" }, { "v", "k", "g", key = "v" })
    assert.is_nil(noted(notes, "not told"))
    t:insert{ k = 4, v = 40, g = 0 }
    assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", "INSERT 4" }, H.verbs(log))
    assert.same({ v = 10, k = 1, g = 1 }, log[1][3])
    assert.same(H.rows_by_id(s), copy)
    p:close()
  end)
end)
