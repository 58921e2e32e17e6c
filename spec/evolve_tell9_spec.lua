-- What a redeclaration changed reaches the sinks of every relation it
-- changed (core/evolve_log.c): a keyed map rebuilt over an input whose
-- rows changed, a map whose columns and function both changed, and a
-- stateful relation whose columns changed tell their sinks DELETE, INSERT
-- and UPDATE by row id in the next group, first, as a rebuilt join does.
local runnel = require "runnel"
local H = require "helper"

local T = { {"k","int"}, {"v","int"}, {"g","int"}, key = "k" }
local U = { {"id","int"}, {"name","string"}, key = "id" }

-- A copy of a relation kept from its change log: id -> row.
local function applier()
  local copy = {}
  return copy, function(verb, row, _, info)
    if verb == "DELETE" then copy[info.id] = nil else copy[info.id] = row end
  end
end

local function rows_by_id(rel)
  local out = {}
  for row, id in rel:rows() do out[id] = row end
  return out
end

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
