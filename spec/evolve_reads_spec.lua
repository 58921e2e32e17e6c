-- A Lua function of a derived relation that reads another relation
-- (other:get(k) in a joiner, a filter or a mapper) depends on it though no
-- declaration says so (core/evolve_reads.c): the binding notes each read
-- made from inside a relation's function, the state keeps it (meta "rd:"),
-- and when the relation read changes its function or declaration, the
-- reader is treated as over a changed input: rebuilt when stateful, and
-- what is built over it rebuilt too.
local runnel = require "runnel"
local H = require "helper"

local T = { {"k","int"}, {"g","int"}, key = "k" }
local U = { {"id","int"}, {"name","string"}, key = "id" }
local NM = { {"id","int"}, {"label","string"}, key = "id" }

-- t, u, nm = u mapped by prefix, and j = t joined with u whose joiner reads nm.
local function declared(dir, prefix)
  local p, lines = H.open_noting(dir)
  local t = p:table("t", T)
  local u = p:table("u", U)
  local nm = u:map(function(r) return { id = r.id, label = prefix .. r.name } end, NM, "nm")
  local j = t:join(u, { on = "g", name = "j", columns = { {"k","int"}, {"label","string"}, key = "k" },
    joiner = function(l) local x = nm:get(l.g) return { k = l.k, label = x and x.label or "none" } end })
  return p, t, u, j, lines
end

describe("a joiner that reads another relation", function()
  after_each(H.cleanup)

  it("is rebuilt when that relation's function changes, and its sinks hear it", function()
    local dir = H.tmpdir()
    local p, t, u, j = declared(dir, "A:")
    u:insert{ id = 1, name = "one" }
    t:insert{ k = 1, g = 1 }
    assert.same({ k = 1, label = "A:one" }, j:get{ k = 1 })
    p:close()
    local lines
    p, t, u, j, lines = declared(dir, "B:")
    assert.same({ k = 1, label = "B:one" }, j:get{ k = 1 })
    assert.truthy(table.concat(lines, "\n"):find('j: rebuilt from its inputs ("nm" changed)', 1, true),
                  table.concat(lines, "\n"))
    local log = H.record(j)
    t:insert{ k = 2, g = 1 }
    assert.same({ "UPDATE 1", "INSERT 2" }, H.verbs(log))
    assert.same({ k = 1, label = "A:one" }, log[1][4])
    p:close()
  end)

  it("keeps the dependency through sessions that never call it", function()
    local dir = H.tmpdir()
    local p, t, u, j = declared(dir, "A:")
    u:insert{ id = 1, name = "one" }
    t:insert{ k = 1, g = 1 }
    p:close()
    p, t, u, j = declared(dir, "A:")
    u:insert{ id = 2, name = "two" } -- no left row refers to it: the joiner does not run
    p:close()
    p, t, u, j = declared(dir, "C:")
    assert.same({ k = 1, label = "C:one" }, j:get{ k = 1 })
    p:close()
  end)

  it("is not rebuilt when the relation it reads keeps its function", function()
    local dir = H.tmpdir()
    local p, t, u = declared(dir, "A:")
    u:insert{ id = 1, name = "one" }
    t:insert{ k = 1, g = 1 }
    p:close()
    local lines
    p, t, u, _, lines = declared(dir, "A:")
    assert.same({}, lines)
    p:close()
  end)
end)

describe("a filter that reads another relation", function()
  after_each(H.cleanup)

  -- An aggregate over a filter of t whose function asks the table allowed.
  local function counted(dir, threshold)
    local p, lines = H.open_noting(dir)
    local t = p:table("t", T)
    local allowed = p:table("allowed", { {"g","int"}, key = "g" })
    local big = allowed:filter(function(r) return r.g >= threshold end, "big")
    local f = t:filter(function(r) return big:get(r.g) ~= nil end, "f")
    local a = f:aggregate{ by = "g", n = runnel.count(), name = "a" }
    return p, t, allowed, a, lines
  end

  it("rebuilds what is built over the filter when the relation it reads changes", function()
    local dir = H.tmpdir()
    local p, t, allowed, a = counted(dir, 1)
    allowed:insert{ g = 1 }
    allowed:insert{ g = 2 }
    for k = 1, 4 do t:insert{ k = k, g = 1 + k % 2 } end
    assert.same({ g = 1, n = 2 }, a:get{ g = 1 })
    p:close()
    local lines
    p, t, allowed, a, lines = counted(dir, 2)
    assert.is_nil(a:get{ g = 1 })
    assert.same({ g = 2, n = 2 }, a:get{ g = 2 })
    assert.truthy(table.concat(lines, "\n"):find('a: rebuilt from its inputs ("big" changed)', 1, true),
                  table.concat(lines, "\n"))
    p:close()
  end)
end)
