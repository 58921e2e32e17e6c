-- Review 27 probe: a filter's waiting told rows, its table's column renamed
-- with p:alter in a run between (the filter not declared there). The
-- rename is not in the next run's pipeline: the told rows' column is taken
-- for a new one and told null.
local runnel = require "runnel"
local H = require "helper"

local BASE = { {"k","int"}, {"g","string"}, {"v","int"}, key = "k" }
local RENAMED = { {"k","int"}, {"name","string"}, {"v","int"}, key = "k" }

describe("a filter's waiting rows after p:alter in a run between", function()
  after_each(H.cleanup)

  it("tells them with the renamed column's values", function()
    local dir, notes, told = H.tmpdir(), {}, {}
    local function open() return runnel.open{ path = dir, notes = function(l) notes[#notes + 1] = l end } end
    local function decl(p, th, cols, col)
      local t = p:table("t", cols)
      local f = t:filter(function(r) return r.v > th end, "f")
      f:sink(function(verb, row, old, info)
        local r = row or old
        told[#told + 1] = ("%s %d %s=%s"):format(verb, info.id, col, tostring(r[col]))
      end)
      return t
    end
    local p = open()
    local t = decl(p, 0, BASE, "g")
    p:batch(function() for k = 1, 4 do t:insert{ k = k, g = "g" .. k, v = k - 1 } end end)
    p:close()
    p = open()
    decl(p, 2, BASE, "g") -- rows 2 and 3 wait to leave f
    p:close()
    p = open()
    p:alter("t", { rename = { g = "name" } })
    p:table("t", RENAMED)
    p:close()
    H.clear(told)
    p = open()
    t = decl(p, 2, RENAMED, "name")
    p:batch(function() t:insert{ k = 10, name = "y", v = 10 } end)
    p:close()
    assert.same({ "DELETE 2 name=g2", "DELETE 3 name=g3", "INSERT 5 name=y" }, told, table.concat(notes, "\n"))
  end)
end)
