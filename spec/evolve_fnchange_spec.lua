-- A filter or map whose own function changed tells its sinks what the new
-- function changes (core/derive.c, rn_derive_tell_old): the state keeps the
-- function to run it again (core/evolve_code.h "fc:"), runs the old and the
-- new one over the input's rows at the declaration, and the next group
-- tells the differences first (DELETE, INSERT, UPDATE by row id), as a
-- rebuilt stateful relation does (core/evolve_log.c).
local runnel = require "runnel"
local H = require "helper"

local T = { {"k","int"}, {"v","int"}, {"g","int"}, key = "k" }

local applier, rows_by_id = H.id_applier, H.rows_by_id -- spec/helper.lua

local function seed(t)
  for k = 1, 4 do t:insert{ k = k, v = 10 * k, g = k % 2 } end
end

-- Opens dir with t and derive(t) (a filter or map of it), collecting notes.
local function opened(dir, derive)
  local p, notes = H.open_noting(dir)
  local t = p:table("t", T)
  return p, t, derive(t), notes
end

local function noted(notes, pattern)
  for _, line in ipairs(notes) do if line:find(pattern) then return line end end
  return nil
end

describe("a filter whose function changed", function()
  after_each(H.cleanup)

  it("tells its sinks the rows it no longer passes and the rows it now passes, in the next group, first", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local p, t, f = opened(dir, function(t) return t:filter(function(r) return r.g == 1 end, "f") end)
    f:sink(apply)
    seed(t)
    p:close()
    local notes
    p, t, f, notes = opened(dir, function(t) return t:filter(function(r) return r.k >= 3 end, "f") end)
    assert.truthy(noted(notes, "^f: its function changed"))
    assert.is_nil(noted(notes, "not told"))
    local log = H.record(f)
    f:sink(apply)
    t:insert{ k = 5, v = 50, g = 0 }
    assert.same({ "DELETE 1", "INSERT 4", "INSERT 5" }, H.verbs(log))
    assert.same({ k = 1, v = 10, g = 1 }, log[1][4])
    assert.same(rows_by_id(f), copy)
    H.clear(log)
    t:insert{ k = 6, v = 60, g = 0 } -- told once
    assert.same({ "INSERT 6" }, H.verbs(log))
    p:close()
    p, t, f = opened(dir, function(t) return t:filter(function(r) return r.k >= 3 end, "f") end)
    log = H.record(f)
    t:delete{ k = 6 }
    assert.same({ "DELETE 6" }, H.verbs(log)) -- the same function: nothing to tell
    p:close()
  end)

  it("keeps them for the next group when the first rolls back, and across a reopen before any group", function()
    local dir = H.tmpdir()
    local p, t = opened(dir, function(t) return t:filter(function(r) return r.g == 1 end, "f") end)
    seed(t)
    p:close()
    p = opened(dir, function(t) return t:filter(function(r) return r.k >= 3 end, "f") end)
    p:close()
    local f
    p, t, f = opened(dir, function(t) return t:filter(function(r) return r.k >= 3 end, "f") end)
    local log = H.record(f)
    p:begin()
    t:insert{ k = 9, v = 90, g = 1 }
    p:rollback()
    assert.same({}, log)
    t:insert{ k = 8, v = 80, g = 0 }
    assert.same({ "DELETE 1", "INSERT 4", "INSERT 5" }, H.verbs(log))
    p:close()
  end)

  it("tells what its sinks were told before two changes with no group between", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local p, t, f = opened(dir, function(t) return t:filter(function(r) return r.g == 1 end, "f") end)
    f:sink(apply)
    seed(t)
    p:close()
    p = opened(dir, function(t) return t:filter(function(r) return r.k >= 3 end, "f") end)
    p:close()
    p, t, f = opened(dir, function(t) return t:filter(function(r) return r.k % 2 == 0 end, "f") end)
    f:sink(apply)
    t:update{ k = 1, v = 11 }
    assert.same(rows_by_id(f), copy)
    assert.same({ [2] = { k = 2, v = 20, g = 0 }, [4] = { k = 4, v = 40, g = 0 } }, copy)
    p:close()
  end)

  it("reads scalar upvalues as they were, and globals as they are now", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local limit = 25
    local p, t, f = opened(dir, function(t) return t:filter(function(r) return r.v > limit end, "f") end)
    f:sink(apply)
    seed(t)
    p:close()
    limit = 15 -- another value: another function; the old one kept 25
    local notes
    p, t, f, notes = opened(dir, function(t) return t:filter(function(r) return r.v > limit end, "f") end)
    assert.truthy(noted(notes, "^f: its function changed"))
    local log = H.record(f)
    f:sink(apply)
    t:insert{ k = 5, v = 50, g = 0 }
    assert.same({ "INSERT 2", "INSERT 5" }, H.verbs(log))
    assert.same(rows_by_id(f), copy)
    p:close()
  end)

  it("does not tell, and says so, when its old function held a table", function()
    local dir = H.tmpdir()
    local conf = { g = 1 }
    local p, t = opened(dir, function(t) return t:filter(function(r) return r.g == conf.g end, "f") end)
    seed(t)
    p:close()
    local f, notes
    p, t, f, notes = opened(dir, function(t) return t:filter(function(r) return r.k >= 3 end, "f") end)
    assert.truthy(noted(notes, "^f: its sinks were not told what its new function changed %(its old function held a table"))
    local log = H.record(f)
    t:insert{ k = 5, v = 50, g = 0 }
    assert.same({ "INSERT 5" }, H.verbs(log))
    p:close()
  end)

  it("does not tell, and says so, over a state that kept no copy of its old function (0.18)", function()
    local dir = H.tmpdir()
    local p, notes = H.open_noting(dir)
    local t = p:table("t", T)
    assert(p:_code("f", "a fingerprint of 0.18")) -- as 0.18 recorded it: the hash only
    assert(p:_filter(t, "f", function(r) return r.g == 1 end))
    seed(t)
    p:close()
    local f
    p, t, f, notes = opened(dir, function(t) return t:filter(function(r) return r.k >= 3 end, "f") end)
    assert.truthy(noted(notes, "^f: its sinks were not told what its new function changed %(the state holds no copy"))
    local log = H.record(f)
    t:insert{ k = 5, v = 50, g = 0 }
    assert.same({ "INSERT 5" }, H.verbs(log))
    p:close()
    p, t, f, notes = opened(dir, function(t) return t:filter(function(r) return r.k >= 4 end, "f") end)
    assert.is_nil(noted(notes, "not told")) -- kept now: the next change is told
    log = H.record(f)
    t:insert{ k = 6, v = 60, g = 0 }
    assert.same({ "DELETE 3", "INSERT 6" }, H.verbs(log))
    p:close()
  end)

  it("does not tell, and says so, when its old function fails on a row", function()
    local dir = H.tmpdir()
    _G.fnchange_spec_pass = function(r) return r.g == 1 end
    local p, t = opened(dir, function(t) return t:filter(function(r) return fnchange_spec_pass(r) end, "f") end)
    seed(t)
    p:close()
    _G.fnchange_spec_pass = nil -- the old function, run now, fails: a global it calls is gone
    local f, notes
    p, t, f, notes = opened(dir, function(t) return t:filter(function(r) return r.k >= 3 end, "f") end)
    assert.truthy(noted(notes, "^f: its sinks were not told what its new function changed %(its old function failed: "))
    local log = H.record(f)
    t:insert{ k = 5, v = 50, g = 0 }
    assert.same({ "INSERT 5" }, H.verbs(log))
    p:close()
  end)

  it("fails the declaration, naming it, when its new function fails on a row; the change is told once it is fixed", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local p, t, f = opened(dir, function(t) return t:filter(function(r) return r.g == 1 end, "f") end)
    f:sink(apply)
    seed(t)
    p:close()
    p = H.open_noting(dir)
    t = p:table("t", T)
    local err = H.error_of(function() t:filter(function(r) if r.k == 2 then error("no two") end return true end, "f") end)
    assert.matches("^f: ", err)
    assert.matches("no two", err)
    p:close()
    p, t, f = opened(dir, function(t) return t:filter(function(r) return r.k >= 3 end, "f") end)
    local log = H.record(f)
    f:sink(apply)
    t:insert{ k = 5, v = 50, g = 0 }
    assert.same({ "DELETE 1", "INSERT 4", "INSERT 5" }, H.verbs(log))
    assert.same(rows_by_id(f), copy)
    p:close()
  end)

  it("tells them in its input's new layout when the input gained a column at the same time", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local p, t, f = opened(dir, function(t) return t:filter(function(r) return r.g == 1 end, "f") end)
    f:sink(apply)
    seed(t)
    p:close()
    p = runnel.open(dir)
    t = p:table("t", { {"k","int"}, {"v","int"}, {"g","int"}, {"c","string", default = "x"}, key = "k" })
    f = t:filter(function(r) return r.k >= 3 and r.c == "x" end, "f")
    local log = H.record(f)
    f:sink(apply)
    t:insert{ k = 5, v = 50, g = 0, c = "y" }
    assert.same({ "DELETE 1", "INSERT 4" }, H.verbs(log)) -- a schema change is not a change of rows: 3 stays
    assert.same({ k = 4, v = 40, g = 0, c = "x" }, log[2][3])
    local ids, held = {}, {}
    for id in pairs(rows_by_id(f)) do ids[#ids + 1] = id end
    for id in pairs(copy) do held[#held + 1] = id end
    table.sort(ids)
    table.sort(held)
    assert.same({ 3, 4 }, ids)
    assert.same(ids, held)
    p:close()
  end)

  it("goes through the outbox to a durable sink, and into a cdc log of it", function()
    local dir = H.tmpdir()
    local p, t = opened(dir, function(t) return t:filter(function(r) return r.g == 1 end, "f") end)
    seed(t)
    p:close()
    local f
    p, t, f = opened(dir, function(t) return t:filter(function(r) return r.k >= 3 end, "f") end)
    local cdc = {}
    f:cdc{}:sink(function(_, row) cdc[#cdc + 1] = row["cdc$operation"] .. " " .. row.k end)
    local durable = {}
    f:sink(function(verb, _, _, info) durable[#durable + 1] = verb .. " " .. info.id end, { durable = true, name = "d" })
    t:insert{ k = 5, v = 50, g = 0 }
    p:flush()
    assert.same({ "DELETE 1", "INSERT 4", "INSERT 5" }, durable)
    assert.same(3, #cdc)
    p:close()
  end)

  it("a store of it holds its rows after the group that tells them", function()
    local dir = H.tmpdir()
    local p, t, f = opened(dir, function(t) return t:filter(function(r) return r.g == 1 end, "f") end)
    f:sink(runnel.store("fs"))
    seed(t)
    p:close()
    p, t, f = opened(dir, function(t) return t:filter(function(r) return r.k >= 3 end, "f") end)
    f:sink(runnel.store("fs"))
    t:insert{ k = 5, v = 50, g = 0 }
    local keys = {}
    for row in runnel.attach(dir, "fs"):rows() do keys[#keys + 1] = row.k end
    table.sort(keys)
    assert.same({ 3, 4, 5 }, keys)
    p:close()
  end)

  it("over a stream tells nothing: its outputs were events", function()
    local dir = H.tmpdir()
    local p = runnel.open(dir)
    local s = p:stream("s", { {"k","int"} })
    s:filter(function(r) return r.k > 1 end, "f")
    s:insert{ k = 1 }
    s:insert{ k = 2 }
    p:close()
    local notes
    p, notes = H.open_noting(dir)
    s = p:stream("s", { {"k","int"} })
    local f = s:filter(function(r) return r.k > 2 end, "f")
    assert.truthy(noted(notes, "^f: its function changed"))
    assert.is_nil(noted(notes, "not told"))
    local log = H.record(f)
    s:insert{ k = 3 }
    assert.same({ "INSERT 3" }, H.verbs(log))
    p:close()
  end)

  it("is told once to a stateful relation over it: the join rebuilt from it tells its own changes", function()
    local dir = H.tmpdir()
    local function decl(pass)
      local p = runnel.open(dir)
      local t = p:table("t", T)
      local u = p:table("u", { {"g","int"}, {"name","string"}, key = "g" })
      local f = t:filter(pass, "f")
      local j = f:join(u, { on = { "g" }, name = "j" })
      return p, t, u, f, j
    end
    local fcopy, fapply = applier()
    local jcopy, japply = applier()
    local p, t, u, f, j = decl(function(r) return r.g == 1 end)
    f:sink(fapply)
    j:sink(japply)
    u:insert{ g = 0, name = "even" }
    u:insert{ g = 1, name = "odd" }
    seed(t)
    p:close()
    p, t, u, f, j = decl(function(r) return r.k >= 3 end)
    local jlog = H.record(j)
    f:sink(fapply)
    j:sink(japply)
    t:insert{ k = 5, v = 50, g = 1 }
    assert.same(rows_by_id(f), fcopy)
    assert.same(rows_by_id(j), jcopy)
    local seen = {}
    for _, e in ipairs(jlog) do
      local at = e[1] .. " " .. e[2]
      assert.is_nil(seen[at], "told twice: " .. at)
      seen[at] = true
    end
    p:close()
  end)
end)

describe("a map whose function changed", function()
  after_each(H.cleanup)

  it("tells its sinks the rows the new function gives otherwise, and the rows it drops or adds", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local cols = { {"k","int"}, {"w","int"}, key = "k" }
    local p, t, m = opened(dir, function(t) return t:map(function(r) return { k = r.k, w = r.v * 2 } end, cols, "m") end)
    m:sink(apply)
    seed(t)
    p:close()
    p, t, m = opened(dir, function(t)
      return t:map(function(r) if r.k ~= 4 then return { k = r.k, w = r.k == 1 and 20 or r.v * 3 } end end, cols, "m")
    end)
    local log = H.record(m)
    m:sink(apply)
    t:insert{ k = 5, v = 50, g = 0 }
    assert.same({ "UPDATE 2", "UPDATE 3", "DELETE 4", "INSERT 5" }, H.verbs(log)) -- k = 1 gives 20 still
    assert.same({ k = 2, w = 60 }, log[1][3])
    assert.same({ k = 2, w = 40 }, log[1][4])
    assert.same(rows_by_id(m), copy)
    p:close()
  end)

  it("with a key of its own, tells a moved key as a DELETE and an INSERT", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local cols = { {"kk","int"}, {"v","int"}, key = "kk" }
    local p, t, m = opened(dir, function(t) return t:map(function(r) return { kk = r.k, v = r.v } end, cols, "m") end)
    m:sink(apply)
    seed(t)
    p:close()
    p, t, m = opened(dir, function(t)
      return t:map(function(r) return { kk = r.k == 2 and 102 or r.k, v = r.v + (r.k == 3 and 1 or 0) } end, cols, "m")
    end)
    local log = H.record(m)
    m:sink(apply)
    t:insert{ k = 5, v = 50, g = 0 }
    assert.same({ "DELETE 2", "INSERT 2", "UPDATE 3", "INSERT 5" }, H.verbs(log))
    assert.same({ kk = 102, v = 20 }, log[2][3])
    assert.same(rows_by_id(m), copy)
    local keys = {}
    for row in m:rows() do keys[#keys + 1] = row.kk end
    table.sort(keys)
    assert.same({ 1, 3, 4, 5, 102 }, keys)
    p:close()
  end)

  it("over a map whose function changed too: its sinks get what the two changes did together", function()
    local dir = H.tmpdir()
    local copy, apply = applier()
    local cols = { {"k","int"}, {"w","int"}, key = "k" }
    local function decl(mf, ff)
      local p = runnel.open(dir)
      local t = p:table("t", T)
      local m = t:map(mf, cols, "m")
      return p, t, m:filter(ff, "f")
    end
    local p, t, f = decl(function(r) return { k = r.k, w = r.v } end, function(r) return r.w >= 20 end)
    f:sink(apply)
    seed(t)
    p:close()
    p, t, f = decl(function(r) return { k = r.k, w = r.v + 5 } end, function(r) return r.w <= 35 end)
    local log = H.record(f)
    f:sink(apply)
    t:insert{ k = 5, v = 0, g = 0 }
    assert.same(rows_by_id(f), copy)
    assert.same({ [1] = { k = 1, w = 15 }, [2] = { k = 2, w = 25 }, [3] = { k = 3, w = 35 }, [5] = { k = 5, w = 5 } }, copy)
    assert.same({ "INSERT 1", "UPDATE 2", "UPDATE 3", "DELETE 4", "INSERT 5" }, H.verbs(log))
    p:close()
  end)
end)
