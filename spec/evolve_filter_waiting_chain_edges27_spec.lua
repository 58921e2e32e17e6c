-- A filter's waiting told rows over two selects, both declared in the
-- filter's run with "h" in place of "g" (the table still has "g"): the drop
-- is known as it is under one select (evolve_filter_waiting_select_edges27),
-- yet dropped_now looks one relation down only: the lower select lacks "g"
-- and is no table, so renamed_unknown takes it for a rename made in another run.
local runnel = require "runnel"
local H = require "helper"

local TC = { {"k","int"}, {"g","string"}, {"h","string"}, {"v","int"}, key = "k" }

describe("a filter's waiting rows over a chain of selects that swapped a column in its run", function()
  after_each(H.cleanup)
  for _, mid in ipairs{ "select", "filter" } do
    it("select over " .. mid .. " over select", function()
      local dir, notes, told = H.tmpdir(), {}, {}
      local function open() return runnel.open{ path = dir, notes = function(l) notes[#notes + 1] = l end } end
      local function decl(p, th, sel)
        local t = p:table("t", TC)
        local s1 = t:select(sel, "s1")
        local m = mid == "select" and s1:select(sel, "s2") or s1:filter(function() return true end, "m")
        local s = mid == "select" and m or m:select(sel, "s2")
        local f = s:filter(function(r) return r.v > th end, "f")
        f:sink(function(verb, row, old, info)
          local r = row or old
          told[#told + 1] = ("%s %d v=%s g=%s h=%s"):format(verb, info.id, tostring(r.v), tostring(r.g), tostring(r.h))
        end)
        return t, f
      end
      local p = open()
      local t = decl(p, 0, { "k", "g", "v" })
      p:batch(function() for k = 1, 4 do t:insert{ k = k, g = "g" .. k, h = "h" .. k, v = k - 1 } end end)
      p:close()
      p = open(); decl(p, 2, { "k", "g", "v" }); p:close()
      p = open(); t = decl(p, 2, { "k", "h", "v" })
      p:batch(function() t:insert{ k = 10, g = "y", h = "z", v = 10 } end)
      p:close()
      local said = table.concat(told, "\n") .. "\nNOTES:\n" .. table.concat(notes, "\n")
      assert.is_nil(said:find("not told", 1, true), said)
      assert.same({ "DELETE 2 v=1 g=nil h=nil", "DELETE 3 v=2 g=nil h=nil" }, { told[4], told[5] }, said)
    end)
  end
end)
