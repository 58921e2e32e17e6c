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

local function session(cols)
  local s = { dir = H.tmpdir(), notes = {}, told = {}, copies = {} }
  function s.open(extra)
    local o = { path = s.dir, notes = function(l) s.notes[#s.notes + 1] = l end }
    for k, v in pairs(extra or {}) do o[k] = v end
    return runnel.open(o)
  end
  function s.sink(rel, name)
    s.copies[name] = s.copies[name] or {}
    rel:sink(function(verb, row, old, info)
      local copy = s.copies[name]
      local r = row or old
      local c = {}
      for _, k in ipairs(cols) do c[k] = r[k] end
      s.told[#s.told + 1] = name .. " " .. verb .. " " .. info.id .. " " .. table.concat(dump({ [0] = c }, cols))
      if verb == "DELETE" then copy[info.id] = nil else copy[info.id] = c end
    end)
  end
  function s.check(rel, name)
    assert.same(dump(H.rows_by_id(rel), cols), dump(s.copies[name], cols), table.concat(s.told, "\n") .. "\nNOTES:\n" .. table.concat(s.notes, "\n"))
  end
  return s
end

local BASE = { {"k","int"}, {"g","string"}, {"v","int"}, key = "k" }
local MOVED = { {"k","int"}, {"v","int"}, {"g","string"}, key = "k" }

describe("rev27c review probes that held", function()
  after_each(H.cleanup)

  it("a filter over an aggregate whose columns change while the filter waits", function()
    local s = session{ "g", "n", "t" }
    local function decl(p, th, extra)
      local t = p:table("t", BASE)
      local spec = { by = "g", n = runnel.count(), name = "a" }
      if extra then spec.t = runnel.sum("v") end
      local a = t:aggregate(spec)
      local f = a:filter(function(r) return r.n > th end, "f")
      s.sink(f, "f")
      return t, f
    end
    local p = s.open()
    local t = decl(p, 0, false)
    p:batch(function() for k = 1, 9 do t:insert{ k = k, g = "g" .. (k % 4), v = k } end end)
    p:close()
    p = s.open(); decl(p, 2, false); p:close()
    p = s.open(); local f; t, f = decl(p, 2, true)
    p:batch(function() t:insert{ k = 10, g = "g1", v = 10 } end)
    s.check(f, "f")
    p:close()
  end)

  it("a filter over a distinct", function()
    local s = session{ "g" }
    local function decl(p, pat, cols)
      local t = p:table("t", cols)
      local d = t:select({ "g" }, "sel"):distinct("d")
      local f = d:filter(function(r) return r.g:match(pat) ~= nil end, "f")
      s.sink(f, "f")
      return t, f
    end
    local p = s.open()
    local t = decl(p, "g", BASE)
    p:batch(function() for k = 1, 9 do t:insert{ k = k, g = "g" .. (k % 4), v = k } end end)
    p:close()
    p = s.open(); decl(p, "[12]", BASE); p:close()
    p = s.open(); local f; t, f = decl(p, "[12]", MOVED)
    p:batch(function() t:insert{ k = 10, g = "g9", v = 10 } end)
    s.check(f, "f")
    p:close()
  end)

  it("a child killed right after the filter's declaration, then another run", function()
    local s = session{ "k", "g", "v" }
    local function decl(p, th, cols)
      local t = p:table("t", cols)
      local f = t:filter(function(r) return r.v > th end, "f")
      s.sink(f, "f")
      return t, f
    end
    local p = s.open()
    local t = decl(p, 0, BASE)
    p:batch(function() for k = 1, 6 do t:insert{ k = k, g = "g" .. k, v = k - 1 } end end)
    p:close()
    p = s.open(); decl(p, 3, BASE); p:close()
    H.run_script(s.dir .. "/child.lua", ([[
local runnel = require "runnel"
local p = runnel.open{ path = %q, notes = false }
local t = p:table("t", { {"k","int"}, {"v","int"}, {"g","string"}, key = "k" })
t:filter(function(r) return r.v > 1 end, "f")
os.exit(0, false)
]]):format(s.dir))
    p = s.open(); local f; t, f = decl(p, 1, MOVED)
    p:batch(function() t:insert{ k = 10, g = "y", v = 10 } end)
    s.check(f, "f")
    p:close()
  end)

  it("sync = false across the runs", function()
    local s = session{ "k", "g", "v" }
    local function decl(p, th, cols)
      local t = p:table("t", cols)
      local f = t:filter(function(r) return r.v > th end, "f")
      s.sink(f, "f")
      return t, f
    end
    local p = s.open{ sync = false }
    local t = decl(p, 0, BASE)
    p:batch(function() for k = 1, 6 do t:insert{ k = k, g = "g" .. k, v = k - 1 } end end)
    p:close()
    p = s.open{ sync = false }; decl(p, 3, BASE); p:close()
    p = s.open{ sync = false }; local f; t, f = decl(p, 1, MOVED)
    p:batch(function() t:insert{ k = 10, g = "y", v = 10 } end)
    p:batch(function() t:insert{ k = 11, g = "z", v = 0 } end)
    s.check(f, "f")
    p:close()
  end)

  it("a filter over a keyed map over a table, map columns change while the filter waits", function()
    local s = session{ "k", "g", "v" }
    local function decl(p, th, mcols)
      local t = p:table("t", BASE)
      local m = t:map(function(r) return { k = r.k, g = r.g, v = r.v } end, mcols, "m")
      local f = m:filter(function(r) return r.v > th end, "f")
      local f2 = f:filter(function(r) return true end, "f2")
      s.sink(f, "f"); s.sink(f2, "f2")
      return t, f, f2
    end
    local p = s.open()
    local t = decl(p, 0, BASE)
    p:batch(function() for k = 1, 6 do t:insert{ k = k, g = "g" .. k, v = k - 1 } end end)
    p:close()
    p = s.open(); decl(p, 3, BASE); p:close()
    p = s.open(); local f, f2; t, f, f2 = decl(p, 1, MOVED)
    p:batch(function() t:insert{ k = 10, g = "y", v = 10 } end)
    s.check(f, "f"); s.check(f2, "f2")
    p:close()
  end)
end)
