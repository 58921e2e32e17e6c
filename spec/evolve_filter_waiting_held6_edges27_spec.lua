local runnel = require "runnel"
local H = require "helper"

local function dump(rows, cols)
  local a = {}
  for id, r in pairs(rows) do
    local f = {}
    for _, c in ipairs(cols) do f[#f + 1] = c .. "=" .. tostring(r[c]) end
    a[#a + 1] = id .. ":" .. table.concat(f, ",")
  end
  table.sort(a)
  return a
end

local COLS = { "k", "g", "v" }
local function session()
  local s = { dir = H.tmpdir(), notes = {}, told = {}, copy = {} }
  function s.open() return runnel.open{ path = s.dir, notes = function(l) s.notes[#s.notes + 1] = l end } end
  function s.decl(p, th, cols, name)
    local t = p:table("t", cols)
    local f = t:filter(function(r) return r.v > th end, name or "f")
    f:sink(function(verb, row, old, info)
      local r = row or old
      s.told[#s.told + 1] = ("%s %d k=%s g=%s v=%s"):format(verb, info.id, tostring(r.k), tostring(r.g), tostring(r.v))
      if verb == "DELETE" then s.copy[info.id] = nil else s.copy[info.id] = { k = r.k, g = r.g, v = r.v } end
    end)
    return t, f
  end
  function s.check(f)
    assert.same(dump(H.rows_by_id(f), COLS), dump(s.copy, COLS), table.concat(s.told, "\n") .. "\nNOTES:\n" .. table.concat(s.notes, "\n"))
  end
  return s
end
local BASE = { {"k","int"}, {"g","string"}, {"v","int"}, key = "k" }
local MOVED = { {"k","int"}, {"v","int"}, {"g","string"}, key = "k" }

describe("rev27c review probes that held", function()
  after_each(H.cleanup)

  it("changed with columns moved, then unchanged in the next run", function()
    local s = session()
    local p = s.open(); local t = s.decl(p, 0, BASE)
    p:batch(function() for k = 1, 6 do t:insert{ k = k, g = "g" .. k, v = k - 1 } end end)
    p:close()
    p = s.open(); s.decl(p, 3, BASE); p:close()
    p = s.open(); s.decl(p, 1, MOVED); p:close()
    p = s.open(); local f; t, f = s.decl(p, 1, MOVED)
    p:batch(function() t:insert{ k = 10, g = "y", v = 10 } end)
    s.check(f); p:close()
  end)

  it("a group rolled back right after the declaration, another in the same run", function()
    local s = session()
    local p = s.open(); local t = s.decl(p, 0, BASE)
    p:batch(function() for k = 1, 6 do t:insert{ k = k, g = "g" .. k, v = k - 1 } end end)
    p:close()
    p = s.open(); s.decl(p, 3, BASE); p:close()
    p = s.open(); local f; t, f = s.decl(p, 1, MOVED)
    local before = {}
    for k, v in pairs(s.copy) do before[k] = v end
    local ok = pcall(p.batch, p, function() t:insert{ k = 11, g = "z", v = 11 }; error("boom") end)
    assert.is_false(ok)
    s.copy = before
    p:batch(function() t:insert{ k = 10, g = "y", v = 10 } end)
    s.check(f); p:close()
  end)

  it("chained filters, both waiting, a p:alter rename in a run between (notes)", function()
    local dir, notes, told = H.tmpdir(), {}, {}
    local function open() return runnel.open{ path = dir, notes = function(l) notes[#notes + 1] = l end } end
    local RENAMED = { {"k","int"}, {"name","string"}, {"v","int"}, key = "k" }
    local function decl(p, a, b, cols)
      local t = p:table("t", cols)
      local f1 = t:filter(function(r) return r.v > a end, "f1")
      local f2 = f1:filter(function(r) return r.v < b end, "f2")
      for _, f in ipairs{ f1, f2 } do
        f:sink(function(verb, row, old, info) told[#told + 1] = f:name() .. " " .. verb .. " " .. info.id end)
      end
      return t
    end
    local p = open(); local t = decl(p, 0, 100, BASE)
    p:batch(function() for k = 1, 6 do t:insert{ k = k, g = "g" .. k, v = k - 1 } end end)
    p:close()
    p = open(); decl(p, 2, 4, BASE); p:close()
    p = open(); p:alter("t", { rename = { g = "name" } }); p:table("t", RENAMED); p:close()
    H.clear(told); H.clear(notes)
    p = open(); t = decl(p, 2, 4, RENAMED)
    p:batch(function() t:insert{ k = 10, name = "y", v = 3 } end)
    p:close()
    local said = table.concat(notes, "\n")
    assert.same({ "f1 INSERT 7", "f2 INSERT 7" }, told, said)
    local _, n1 = said:gsub("f1: its sinks were not told", "")
    local _, n2 = said:gsub("f2: its sinks were not told", "")
    assert.equal(1, n1, said); assert.equal(1, n2, said)
  end)
end)
