-- What a redeclaration changed reaches the sinks of every relation it
-- changed (core/evolve_log.c): a keyed map rebuilt over an input whose
-- rows changed, a map whose columns and function both changed, and a
-- stateful relation whose columns changed tell their sinks DELETE, INSERT
-- and UPDATE by row id in the next group, first, as a rebuilt join does.
local runnel = require "runnel"
local H = require "helper"

local T = { {"k","int"}, {"v","int"}, {"g","int"}, key = "k" }
local U = { {"id","int"}, {"name","string"}, key = "id" }

local applier, rows_by_id = H.id_applier, H.rows_by_id -- spec/helper.lua

local function seed(t, u)
  if u then
    u:insert{ id = 0, name = "even" }
    u:insert{ id = 1, name = "odd" }
    u:insert{ id = 2, name = "two" }
  end
  for k = 1, 4 do t:insert{ k = k, v = 10 * k, g = k % 2 } end
end

describe("a keyed map rebuilt because its input changed", function()
  after_each(H.cleanup)

  -- t ⋈ u by mapper (j), and a keyed map of j.
  local function declared(dir, mapper)
    local p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", T)
    local u = p:table("u", U)
    local j = t:join(u, { mapper = mapper, name = "j" })
    local m = j:map(function(r) return { kk = r.k * 100, name = r.name } end,
                    { {"kk","int"}, {"name","string"}, key = "kk" }, "m")
    return p, t, u, j, m
  end

  it("tells its sinks what the input's rebuild changed, once, so a copy from the log equals its rows", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local p, t, u, _, m = declared(dir, function(r) return r.g end)
    m:sink(apply)
    seed(t, u)
    p:close()
    p, t, u, _, m = declared(dir, function(r) if r.k ~= 4 then return r.k % 3 end end)
    local log = H.record(m)
    m:sink(apply)
    t:insert{ k = 5, v = 50, g = 1 }
    assert.same({ "UPDATE 2", "UPDATE 3", "DELETE 4", "INSERT 5" }, H.verbs(log))
    assert.same({ kk = 300, name = "even" }, log[2][3])
    assert.same(rows_by_id(m), copy)
    H.clear(log)
    t:insert{ k = 6, v = 60, g = 0 }
    assert.same({ "INSERT 6" }, H.verbs(log))
    p:close()
  end)

  it("goes through the outbox to a durable sink, and into a cdc log of it", function()
    local dir = H.tmpdir()
    local p, t, u = declared(dir, function(r) return r.g end)
    seed(t, u)
    p:close()
    local m
    p, t, u, _, m = declared(dir, function(r) if r.k ~= 4 then return r.k % 3 end end)
    local cdc = {}
    m:cdc{}:sink(function(_, row) cdc[#cdc + 1] = row["cdc$operation"] .. " " .. row.kk end)
    local durable = {}
    m:sink(function(verb, _, _, info) durable[#durable + 1] = verb .. " " .. info.id end, { durable = true, name = "d" })
    t:insert{ k = 5, v = 50, g = 1 }
    p:flush()
    assert.same({ "UPDATE 2", "UPDATE 3", "DELETE 4", "INSERT 5" }, durable)
    assert.same({ "1 200", "1 300", "3 400", "2 500" }, cdc)
    p:close()
  end)

  it("over a filter whose function changed", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local function decl(pass)
      local p = runnel.open{ path = dir, notes = false }
      local t = p:table("t", T)
      local m = t:filter(pass, "f"):map(function(r) return { kk = r.k, v = r.v } end,
                                        { {"kk","int"}, {"v","int"}, key = "kk" }, "m")
      return p, t, m
    end
    local p, t, m = decl(function(r) return r.g == 1 end)
    m:sink(apply)
    seed(t)
    p:close()
    p, t, m = decl(function(r) return r.k >= 3 end)
    local log = H.record(m)
    m:sink(apply)
    t:insert{ k = 5, v = 50, g = 0 }
    assert.same({ "DELETE 1", "INSERT 4", "INSERT 5" }, H.verbs(log))
    assert.same(rows_by_id(m), copy)
    p:close()
  end)
end)

describe("a keyed map over a keyed map whose function changed", function()
  after_each(H.cleanup)

  it("tells its sinks what the change gave it", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local function decl(f1)
      local p = runnel.open{ path = dir, notes = false }
      local t = p:table("t", T)
      local m1 = t:map(f1, { {"a","int"}, {"v","int"}, key = "a" }, "m1")
      local m2 = m1:map(function(r) return { b = -r.a, v = r.v } end, { {"b","int"}, {"v","int"}, key = "b" }, "m2")
      return p, t, m2
    end
    local p, t, m2 = decl(function(r) return { a = r.k, v = r.v } end)
    m2:sink(apply)
    seed(t)
    p:close()
    p, t, m2 = decl(function(r) if r.k ~= 1 then return { a = r.k, v = r.k == 3 and 0 or r.v } end end)
    local log = H.record(m2)
    m2:sink(apply)
    t:insert{ k = 5, v = 50, g = 0 }
    assert.same({ "DELETE 1", "UPDATE 3", "INSERT 5" }, H.verbs(log))
    assert.same({ b = -3, v = 0 }, log[2][3])
    assert.same(rows_by_id(m2), copy)
    p:close()
  end)
end)

describe("a map whose columns and function both changed", function()
  after_each(H.cleanup)

  local function opened(dir, fn, cols)
    local p, notes = H.open_noting(dir)
    local t = p:table("t", T)
    return p, t, t:map(fn, cols, "m"), notes
  end

  local function noted(notes, pattern)
    for _, line in ipairs(notes) do if line:find(pattern) then return line end end
    return nil
  end

  it("tells its sinks what changed, its old rows given in the new columns by name", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local cols1 = { {"k","int"}, {"w","int"}, {"x","int"}, key = "k" }
    local p, t, m = opened(dir, function(r) return { k = r.k, w = r.v * 2, x = 0 } end, cols1)
    m:sink(apply)
    seed(t)
    p:close()
    local cols2 = { {"k","int"}, {"w","int"}, {"tag","string", null = true}, key = "k" }
    local notes
    p, t, m, notes = opened(dir, function(r)
      if r.k ~= 4 then return { k = r.k, w = r.k == 1 and 20 or r.v * 3, tag = r.k == 3 and "three" or nil } end
    end, cols2)
    assert.truthy(noted(notes, "^m: its function changed"))
    assert.is_nil(noted(notes, "not told"))
    local log = H.record(m)
    m:sink(apply)
    t:insert{ k = 5, v = 50, g = 0 }
    assert.same({ "UPDATE 2", "UPDATE 3", "DELETE 4", "INSERT 5" }, H.verbs(log)) -- k = 1 gives { k = 1, w = 20 } still
    assert.same({ k = 2, w = 60 }, log[1][3])
    assert.same({ k = 2, w = 40 }, log[1][4])                -- x is gone from its columns
    assert.same({ k = 3, w = 90, tag = "three" }, log[2][3])
    assert.same({ k = 4, w = 80 }, log[3][4])
    for _, row in pairs(copy) do row.x = nil end            -- a column dropped is not a change of rows
    assert.same(rows_by_id(m), copy)
    H.clear(log)
    t:insert{ k = 6, v = 60, g = 0 }
    assert.same({ "INSERT 6" }, H.verbs(log))               -- told once
    p:close()
  end)

  it("goes through the outbox to a durable sink, and into a cdc log of it", function()
    local dir = H.tmpdir()
    local p, t = opened(dir, function(r) return { k = r.k, w = r.v } end, { {"k","int"}, {"w","int"}, key = "k" })
    seed(t)
    p:close()
    local m
    p, t, m = opened(dir, function(r) return { k = r.k, w = r.v, half = r.v // 2 } end,
                     { {"k","int"}, {"w","int"}, {"half","int", null = true}, key = "k" })
    local cdc = {}
    m:cdc{}:sink(function(_, row) cdc[#cdc + 1] = row["cdc$operation"] .. " " .. row.k end)
    local durable = {}
    m:sink(function(verb, _, _, info) durable[#durable + 1] = verb .. " " .. info.id end, { durable = true, name = "d" })
    t:insert{ k = 5, v = 50, g = 0 }
    p:flush()
    assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", "UPDATE 4", "INSERT 5" }, durable)
    assert.same({ "1 1", "1 2", "1 3", "1 4", "2 5" }, cdc)
    p:close()
  end)

  it("with a key of its own: a new column is told in every row (its sinks were told no value of it), a changed value too", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local p, t, m = opened(dir, function(r) return { kk = r.k * 10, v = r.v } end,
                           { {"kk","int"}, {"v","int"}, key = "kk" })
    m:sink(apply)
    seed(t)
    p:close()
    local notes
    p, t, m, notes = opened(dir, function(r) return { kk = r.k * 10, v = r.v + (r.k == 3 and 1 or 0), odd = r.k % 2 == 1 } end,
                            { {"kk","int"}, {"v","int"}, {"odd","bool"}, key = "kk" })
    assert.is_nil(noted(notes, "not told"))
    local log = H.record(m)
    m:sink(apply)
    t:update{ k = 2, v = 21 }
    assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 3", "UPDATE 4", "UPDATE 2" }, H.verbs(log))
    assert.same({ kk = 30, v = 30 }, log[3][4]) -- odd: the sinks were told no value of it (0.21; it was true)
    assert.same({ kk = 30, v = 31, odd = true }, log[3][3])
    assert.same({ kk = 10, v = 10 }, log[1][4])
    assert.same({ kk = 10, v = 10, odd = true }, log[1][3])
    assert.same(rows_by_id(m), copy) -- the copy needs nothing of the declaration: it was told
    p:close()
  end)

  it("with its key renamed: tells by row id under the new name", function()
    local dir = H.tmpdir()
    local p, t = opened(dir, function(r) return { kk = r.k, v = r.v } end, { {"kk","int"}, {"v","int"}, key = "kk" })
    seed(t)
    p:close()
    local m, notes
    p, t, m, notes = opened(dir, function(r) return { id = r.k, v = r.k == 2 and 0 or r.v } end,
                            { {"id","int"}, {"v","int"}, key = "id" })
    assert.is_nil(noted(notes, "not told"))
    local log = H.record(m)
    t:insert{ k = 5, v = 50, g = 0 }
    assert.same({ "UPDATE 2", "INSERT 5" }, H.verbs(log))
    assert.same({ id = 2, v = 20 }, log[1][4])
    p:close()
  end)

  it("says its sinks were not told when its old rows do not fit the new columns (a column of another type)", function()
    local dir = H.tmpdir()
    local p, t = opened(dir, function(r) return { k = r.k, w = r.v } end, { {"k","int"}, {"w","int"}, key = "k" })
    seed(t)
    p:close()
    local m, notes
    p, t, m, notes = opened(dir, function(r) return { k = r.k, w = tostring(r.v) } end,
                            { {"k","int"}, {"w","string"}, key = "k" })
    assert.truthy(noted(notes, '^m: its sinks were not told what its new function changed %(its old rows do not fit ' ..
                               'its new columns: column "w" held int, is string now%)')) -- 0.22: says which column
    local log = H.record(m)
    t:insert{ k = 5, v = 50, g = 0 }
    assert.same({ "INSERT 5" }, H.verbs(log))
    p:close()
  end)
end)

describe("a keyed map declared again after groups ran without it", function()
  after_each(H.cleanup)

  it("has its durable sink told which groups it missed, as a map without a key does", function()
    local dir = H.tmpdir()
    local got = {}
    local function session(with_map, k)
      local p, notes = H.open_noting(dir)
      local t = p:table("t", T)
      if with_map then
        t:map(function(r) return { kk = r.k * 10, v = r.v } end, { {"kk","int"}, {"v","int"}, key = "kk" }, "m")
         :sink(function(v, row, _, info) got[#got + 1] = info.seq .. ":" .. v .. ":" .. row.kk end,
               { durable = true, name = "d" })
      end
      if k then t:insert{ k = k, v = k, g = 0 } end
      p:close()
      local out = {}
      for _, l in ipairs(notes) do if l:find(" missed ", 1, true) then out[#out + 1] = l end end
      return out
    end
    session(true, 1)
    session(false, 2)                       -- group 2 changes t, which m reads; m is not declared
    local notes = session(true, 3)
    assert.equal(1, #notes)                 -- before: none, and the row k = 2 never reached d
    assert.matches("m: durable sink d missed the changes of m in group 2: ", notes[1], 1, true)
    assert.same({ "1:INSERT:10", "3:INSERT:30" }, got)
  end)
end)
