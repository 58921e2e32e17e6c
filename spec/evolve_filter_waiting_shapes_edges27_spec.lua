-- Review 27 probes that held: a filter's waiting rows over a table without
-- a key, and over a keyed map, whose columns moved in a run between.
local runnel = require "runnel"
local H = require "helper"

local function same_copy(held, copy)
  local a, b = {}, {}
  for id, r in pairs(held) do a[#a + 1] = id .. ":" .. tostring(r.g) .. ":" .. tostring(r.v) end
  for id, r in pairs(copy) do b[#b + 1] = id .. ":" .. tostring(r.g) .. ":" .. tostring(r.v) end
  table.sort(a); table.sort(b)
  assert.same(a, b)
end

describe("a filter's waiting rows, other shapes", function()
  after_each(H.cleanup)

  local function run(decl, cols1, cols2)
    local dir, notes, told = H.tmpdir(), {}, {}
    local copy, apply = H.id_applier()
    local function open() return runnel.open{ path = dir, notes = function(l) notes[#notes + 1] = l end } end
    local function sink(f) f:sink(function(verb, row, old, info)
      local r = row or old
      told[#told + 1] = ("%s %d g=%s v=%s"):format(verb, info.id, tostring(r.g), tostring(r.v))
      apply(verb, row, old, info) end) end
    local p = open()
    local t, f = decl(p, 0, cols1); sink(f)
    p:batch(function() for k = 1, 4 do t:insert{ k = k, g = "g" .. k, v = k - 1 } end end)
    p:close()
    p = open(); t, f = decl(p, 2, cols1); sink(f); p:close()
    p = open(); p:table("t", cols2); p:close()
    H.clear(told)
    p = open(); t, f = decl(p, 2, cols2); sink(f)
    p:batch(function() t:insert{ k = 10, g = "y", v = 10 } end)
    local held = H.rows_by_id(f)
    p:close()
    return held, copy, told, notes
  end

  it("over a table without a key", function()
    local held, copy, told, notes = run(function(p, th, cols)
      local t = p:table("t", cols)
      return t, t:filter(function(r) return r.v > th end, "f")
    end, { {"k","int"}, {"g","string"}, {"v","int"} }, { {"v","int"}, {"k","int"}, {"g","string"} })
    assert.same({ "DELETE 2 g=g2 v=1", "DELETE 3 g=g3 v=2", "INSERT 5 g=y v=10" }, told, table.concat(notes, "\n"))
    same_copy(held, copy)
  end)

  it("over a keyed map", function()
    local held, copy, told, notes = run(function(p, th, cols)
      local t = p:table("t", cols)
      local m = t:map(function(r) return { k = r.k, g = r.g, v = r.v } end, { {"k","int"}, {"g","string"}, {"v","int"}, key = "k" }, "m")
      return t, m:filter(function(r) return r.v > th end, "f")
    end, { {"k","int"}, {"g","string"}, {"v","int"}, key = "k" }, { {"v","int"}, {"k","int"}, {"g","string"}, key = "k" })
    same_copy(held, copy)
  end)

  it("two chained filters over a select whose columns moved", function()
    local held, copy, told, notes = run(function(p, th, cols)
      local t = p:table("t", cols)
      local s = t:select(cols[1][1] == "v" and { "k", "g", "v" } or { "k", "v", "g" }, "s")
      local f1 = s:filter(function(r) return r.v > th end, "f1")
      return t, f1:filter(function(r) return r.v < 100 - th end, "f")
    end, { {"k","int"}, {"g","string"}, {"v","int"}, key = "k" }, { {"v","int"}, {"k","int"}, {"g","string"}, key = "k" })
    same_copy(held, copy)
    for _, l in ipairs(told) do assert.is_nil(l:match("g=%d"), l) end
  end)
end)
