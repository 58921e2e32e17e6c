-- A rebuild's changes reach the change logs (core/evolve_log.c): a stateful
-- relation rebuilt at declaration (its function or declaration changed, or
-- an input's) tells its sinks, in the next group and before that group's
-- own changes, what the rebuild changed — DELETE of rows gone, INSERT of new
-- rows, UPDATE (old and new) where the id stays — so a consumer that keeps
-- a copy from the log stays equal to the relation.
local runnel = require "runnel"
local H = require "helper"
local json = require "dkjson"

local T = { {"k","int"}, {"v","int"}, {"g","int"}, key = "k" }
local U = { {"id","int"}, {"name","string"}, key = "id" }

-- Declares t, u and j = t joined with u by mapper, on the state at dir.
local function joined(dir, mapper)
  local p = runnel.open(dir)
  local t = p:table("t", T)
  local u = p:table("u", U)
  local j = t:join(u, { mapper = mapper, name = "j" })
  return p, t, u, j
end

-- A copy of a relation kept from its change log: key k -> row.
local function applier()
  local copy = {}
  return copy, function(verb, row, old)
    if verb == "DELETE" then copy[old.k] = nil else copy[row.k] = row end
  end
end

local function rows_of(rel)
  local out = {}
  for row in rel:rows() do out[row.k] = row end
  return out
end

-- The copy an NDJSON log of j gives (DELETE lines carry the key).
local function from_ndjson(path)
  local copy = {}
  for line in io.lines(path) do
    local o = json.decode(line)
    local verb = o.verb
    o.verb = nil
    if verb == "DELETE" then copy[o.k] = nil else copy[o.k] = o end
  end
  return copy
end

local function seed(t, u)
  u:insert{ id = 0, name = "even" }
  u:insert{ id = 1, name = "odd" }
  u:insert{ id = 2, name = "two" }
  for k = 1, 4 do t:insert{ k = k, v = 10 * k, g = k % 2 } end
end

describe("a join rebuilt for a changed mapper", function()
  after_each(H.cleanup)

  it("tells a function sink and an NDJSON sink what changed, so a copy from the log equals its rows", function()
    local dir = H.tmpdir()
    local path = dir .. "/j.ndjson"
    local copy, apply = applier()
    local p, t, u, j = joined(dir, function(r) return r.g end)
    j:sink(apply)
    j:sink(runnel.ndjson(path))
    seed(t, u)
    p:close()

    p, t, u, j = joined(dir, function(r) if r.k ~= 4 then return r.k % 3 end end) -- k = 3 now matches 0, k = 4 nothing
    local log = H.record(j)
    j:sink(apply)
    j:sink(runnel.ndjson(path))
    t:insert{ k = 5, v = 50, g = 1 }
    assert.same({ "UPDATE 2", "UPDATE 3", "DELETE 4", "INSERT 5" }, H.verbs(log)) -- k = 1 stays as it was
    assert.same({ k = 3, v = 30, g = 1, id = 0, name = "even" }, log[2][3])
    assert.same({ k = 3, v = 30, g = 1, id = 1, name = "odd" }, log[2][4])
    assert.same({ k = 4, v = 40, g = 0, id = 0, name = "even" }, log[3][4])
    assert.same(rows_of(j), copy)
    p:close()
    assert.same({ [1] = { k = 1, v = 10, g = 1, id = 1, name = "odd" }, [2] = { k = 2, v = 20, g = 0, id = 2, name = "two" },
                  [3] = { k = 3, v = 30, g = 1, id = 0, name = "even" }, [5] = { k = 5, v = 50, g = 1, id = 2, name = "two" } },
                from_ndjson(path))
  end)

  it("tells them once: the group after gets only its own changes", function()
    local dir = H.tmpdir()
    local p, t, u = joined(dir, function(r) return r.g end)
    seed(t, u)
    p:close()
    local j
    p, t, u, j = joined(dir, function(r) return r.k % 3 end)
    local log = H.record(j)
    t:insert{ k = 6, v = 60, g = 0 }
    assert.same({ "UPDATE 2", "UPDATE 3", "UPDATE 4", "INSERT 5" }, H.verbs(log))
    H.clear(log)
    t:insert{ k = 7, v = 70, g = 1 }
    assert.same({ "INSERT 6" }, H.verbs(log))
    p:close()
    p, t, u, j = joined(dir, function(r) return r.k % 3 end) -- the same mapper: nothing to tell
    log = H.record(j)
    t:delete{ k = 7 }
    assert.same({ "DELETE 6" }, H.verbs(log))
    p:close()
  end)

  it("keeps them for the next group when the first one rolls back, and across a reopen before any group", function()
    local dir = H.tmpdir()
    local p, t, u = joined(dir, function(r) return r.g end)
    seed(t, u)
    p:close()
    p = select(1, joined(dir, function(r) return r.k % 3 end)) -- rebuilt, closed before any group
    p:close()
    local j
    p, t, u, j = joined(dir, function(r) return r.k % 3 end)
    local copy, apply = applier()
    for row in j:rows() do copy[row.k] = row end -- what a consumer held before: the rows before the rebuilds
    local log = H.record(j)
    p:begin()
    t:insert{ k = 9, v = 90, g = 1 }
    p:rollback()
    assert.same({}, log)
    t:insert{ k = 8, v = 80, g = 0 }
    assert.same({ "UPDATE 2", "UPDATE 3", "UPDATE 4", "INSERT 5" }, H.verbs(log))
    for _, e in ipairs(log) do apply(e[1], e[3], e[4]) end
    assert.same(rows_of(j), copy)
    p:close()
  end)

  it("tells what sinks were told before two rebuilds with no group between", function()
    local dir = H.tmpdir()
    local p, t, u, j = joined(dir, function(r) return r.g end)
    local copy, apply = applier()
    j:sink(apply)
    seed(t, u)
    p:close()
    p = select(1, joined(dir, function(r) return r.k % 3 end))
    p:close()
    p, t, u, j = joined(dir, function(r) return 2 end)
    j:sink(apply)
    t:update{ k = 1, v = 11 }
    assert.same(rows_of(j), copy)
    p:close()
  end)

  it("goes through the outbox to a durable sink, and into a cdc log of the relation", function()
    local dir = H.tmpdir()
    local p, t, u = joined(dir, function(r) return r.g end)
    seed(t, u)
    p:close()
    local j
    p, t, u, j = joined(dir, function(r) return r.k % 3 end)
    local cdc = {}
    j:cdc{}:sink(function(_, row) cdc[#cdc + 1] = row["cdc$operation"] .. " " .. row.k end)
    local durable = {}
    j:sink(function(verb, row, old, info) durable[#durable + 1] = verb .. " " .. info.id end, { durable = true, name = "d" })
    t:insert{ k = 6, v = 60, g = 0 }
    p:flush()
    assert.same({ "1 2", "1 3", "1 4", "2 6" }, cdc)
    assert.same({ "UPDATE 2", "UPDATE 3", "UPDATE 4", "INSERT 5" }, durable)
    p:close()
  end)
end)

describe("an aggregate rebuilt for a changed declaration", function()
  after_each(H.cleanup)

  it("tells its sinks each group whose row changed", function()
    local dir = H.tmpdir()
    local p = runnel.open(dir)
    local t = p:table("t", T)
    local a = t:aggregate{ by = "g", total = runnel.sum("v"), name = "a" }
    for k = 1, 4 do t:insert{ k = k, v = 10 * k, g = k % 2 } end
    p:close()
    p = runnel.open(dir)
    t = p:table("t", T)
    a = t:aggregate{ by = "g", total = runnel.sum("k"), name = "a" }
    local log = H.record(a)
    t:insert{ k = 6, v = 60, g = 0 }
    assert.same({ "UPDATE 1", "UPDATE 2", "UPDATE 2" }, H.verbs(log))
    assert.same({ g = 0, total = 60 }, log[2][4])
    assert.same({ g = 0, total = 6 }, log[2][3])
    assert.same({ g = 0, total = 12 }, log[3][3])
    p:close()
  end)
end)

describe("the relations over a rebuilt one", function()
  after_each(H.cleanup)

  -- t ⋈ u by mapper, a filter of the result, and a count per name over it.
  local function declared(dir, mapper)
    local p, t, u, j = joined(dir, mapper)
    local f = j:filter(function(r) return r.name ~= "two" end, "f")
    local a = j:aggregate{ by = "name", n = runnel.count(), name = "a" }
    return p, t, u, j, f, a
  end

  it("a filter's sinks hear what passes it; an aggregate, rebuilt too, counts nothing twice", function()
    local dir = H.tmpdir()
    local p, t, u, j, f, a = declared(dir, function(r) return r.g end)
    local copy, apply = applier()
    f:sink(apply)
    seed(t, u)
    assert.same({ name = "even", n = 2 }, a:get{ name = "even" })
    p:close()
    p, t, u, j, f, a = declared(dir, function(r) return r.k % 3 end)
    f:sink(apply)
    local log = H.record(f)
    local counts = H.record(a)
    t:insert{ k = 6, v = 60, g = 0 }
    assert.same({ "DELETE 2", "UPDATE 3", "UPDATE 4", "INSERT 5" }, H.verbs(log)) -- k = 2 now joins "two"
    assert.same(rows_of(f), copy)
    assert.same({ name = "even", n = 2 }, a:get{ name = "even" }) -- k = 3 and 6
    assert.same({ name = "odd", n = 2 }, a:get{ name = "odd" })
    assert.same({ name = "two", n = 1 }, a:get{ name = "two" })
    assert.same({ "UPDATE 2", "INSERT 3", "UPDATE 2" }, H.verbs(counts)) -- even 2 -> 1, two 1 (odd stays 2); then even 2
    p:close()
  end)
end)

describe("a distinct and an index rebuilt over a changed map", function()
  after_each(H.cleanup)

  local function declared(dir, fn)
    local p = runnel.open(dir)
    local t = p:table("t", T)
    local m = t:map(function(r) return { g = fn(r) } end, { {"g","int"} }, "m")
    local d = m:distinct("d")
    local x = t:filter(function(r) return fn(r) > 0 end, "big"):index{ "v", name = "x" }
    return p, t, d, x
  end

  it("tell their sinks what changed", function()
    local dir = H.tmpdir()
    local p, t = declared(dir, function(r) return r.g end)
    for k = 1, 4 do t:insert{ k = k, v = 10 * k, g = k % 2 } end
    p:close()
    local d, x
    p, t, d, x = declared(dir, function(r) return r.k % 3 end)
    local dl, xl = H.record(d), H.record(x)
    t:insert{ k = 6, v = 60, g = 0 } -- k % 3 = 0: nothing new in either
    assert.same({ "INSERT 3" }, H.verbs(dl)) -- the value 2 (k = 2) is new, under a new id; 0 and 1 were there
    assert.same({ g = 2 }, dl[1][3])
    assert.same({ "INSERT 2", "DELETE 3", "INSERT 4" }, H.verbs(xl)) -- k = 1, 2, 4 pass now, not k = 3
    p:close()
  end)
end)

describe("a rebuild whose changes outgrow the map", function()
  after_each(H.cleanup)

  it("grows it, and tells every change", function()
    local dir = H.tmpdir()
    local MAP = 1024 * 1024
    local function declare(mapper)
      local p = runnel.open{ path = dir, map_size = MAP, notes = false }
      local t = p:table("t", { {"k","int"}, {"s","string"}, key = "k" })
      local u = p:table("u", U)
      return p, t, u, t:join(u, { mapper = mapper, name = "j", kind = "left" })
    end
    local p, t, u = declare(function(r) return r.k % 2 end)
    local pad = string.rep("x", 100)
    u:insert{ id = 0, name = "even" }
    u:insert{ id = 1, name = "odd" }
    for b = 0, 3 do
      p:batch(function() for k = b * 1000 + 1, b * 1000 + 1000 do t:insert{ k = k, s = pad .. k } end end)
    end
    p:close()
    local j
    p, t, u, j = declare(function(r) return (r.k + 1) % 2 end)
    local n = 0
    j:sink(function(verb, row, old) if verb == "UPDATE" and row.name ~= old.name then n = n + 1 end end)
    t:insert{ k = 0, s = "zero" }
    assert.equal(4000, n)
    p:close()
  end)
end)
