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
local BASE = { {"k","int"}, {"g","string"}, {"v","int"}, key = "k" }
describe("rev27c review probes that held", function()
  after_each(H.cleanup)
  for _, how in ipairs{ "index", "top", "distinct" } do
    it("a filter over a " .. how .. " redeclared differently while the filter waits", function()
      local dir, notes, told, copy = H.tmpdir(), {}, {}, {}
      local function open() return runnel.open{ path = dir, notes = function(l) notes[#notes + 1] = l end } end
      local function decl(p, th, alt)
        local t = p:table("t", BASE)
        local u
        if how == "index" then u = t:index(alt and { "g" } or { "v" }, "u")
        elseif how == "top" then u = t:top{ n = alt and 4 or 5, order = { {"v", "desc"} }, name = "u" }
        else u = t:select(alt and { "g", "v" } or { "k", "g", "v" }, "s"):distinct("u") end
        local f = u:filter(function(r) return r.v > th end, "f")
        f:sink(function(verb, row, old, info)
          local r = row or old
          told[#told + 1] = ("%s %d k=%s v=%s"):format(verb, info.id, tostring(r.k), tostring(r.v))
          if verb == "DELETE" then copy[info.id] = nil else copy[info.id] = { g = r.g, v = r.v } end
        end)
        return t, f
      end
      local p = open(); local t = decl(p, 0, false)
      p:batch(function() for k = 1, 6 do t:insert{ k = k, g = "g" .. k, v = k - 1 } end end)
      p:close()
      p = open(); decl(p, 2, false); p:close()
      p = open(); local f; t, f = decl(p, 2, true)
      p:batch(function() t:insert{ k = 10, g = "y", v = 10 } end)
      local held = H.rows_by_id(f)
      p:close()
      assert.same(dump(held, { "g", "v" }), dump(copy, { "g", "v" }), table.concat(told, "\n") .. "\nNOTES:\n" .. table.concat(notes, "\n"))
    end)
  end
end)
