-- Review 27 probe: a filter's waiting told rows, its table's column renamed
-- with p:alter in a run between (the filter not declared there). The
-- rename is not in the next run's pipeline (p:alter holds for the run that
-- calls it): the told rows' column was taken for a new one and told null.
-- Nothing in the state says it was a rename and not a column dropped and
-- another added, so the rows are not told (their values would be guessed):
-- a note says so, naming both columns, and groups go on. With `was =`, the
-- rename is declared in every run and followed
-- (evolve_filter_waiting_edges27).
local runnel = require "runnel"
local H = require "helper"

local BASE = { {"k","int"}, {"g","string"}, {"v","int"}, key = "k" }
local RENAMED = { {"k","int"}, {"name","string"}, {"v","int"}, key = "k" }

describe("a filter's waiting rows after p:alter in a run between", function()
  after_each(H.cleanup)

  it("does not tell them, and a note names both columns", function()
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
    local said = table.concat(notes, "\n")
    assert.matches('f: its sinks were not told what its rebuild changed (its waiting changes hold column "g", '
                   .. 'which its columns no longer have, and column "name" is new to them: a rename made in '
                   .. 'another run is not known here)', said, 1, true)
    assert.same({ "INSERT 5 name=y" }, told, said)
  end)

  -- The same rows, with "g" dropped and "h" added: in the run that does it
  -- the table's declaration says "g" was dropped, so "h" is a new column
  -- (null in the told rows); in a run between, it is not known.
  local DROPPED = { {"k","int"}, {"h","string", null = true}, {"v","int"}, key = "k" }

  local function waiting(dir, notes, told)
    local function open() return runnel.open{ path = dir, notes = function(l) notes[#notes + 1] = l end } end
    local function decl(p, th, cols)
      local t = p:table("t", cols)
      local f = t:filter(function(r) return r.v > th end, "f")
      f:sink(function(verb, row, old, info)
        local r = row or old
        told[#told + 1] = ("%s %d g=%s h=%s"):format(verb, info.id, tostring(r.g), tostring(r.h))
      end)
      return t
    end
    local p = open()
    local t = decl(p, 0, BASE)
    p:batch(function() for k = 1, 4 do t:insert{ k = k, g = "g" .. k, v = k - 1 } end end)
    p:close()
    p = open()
    decl(p, 2, BASE)
    p:close()
    H.clear(told)
    return open, decl
  end

  it("tells them with the added column null when the drop is in the filter's run", function()
    local dir, notes, told = H.tmpdir(), {}, {}
    local open, decl = waiting(dir, notes, told)
    local p = open()
    local t = decl(p, 2, DROPPED)
    p:batch(function() t:insert{ k = 10, h = "y", v = 10 } end)
    p:close()
    local said = table.concat(notes, "\n")
    assert.is_nil(said:find("not told", 1, true), said)
    assert.same({ "DELETE 2 g=nil h=nil", "DELETE 3 g=nil h=nil", "INSERT 5 g=nil h=y" }, told, said)
  end)

  it("notes them when the drop was in a run between", function()
    local dir, notes, told = H.tmpdir(), {}, {}
    local open, decl = waiting(dir, notes, told)
    local p = open()
    p:table("t", DROPPED)
    p:close()
    p = open()
    local t = decl(p, 2, DROPPED)
    p:batch(function() t:insert{ k = 10, h = "y", v = 10 } end)
    p:close()
    local said = table.concat(notes, "\n")
    assert.matches('f: its sinks were not told what its rebuild changed (its waiting changes hold column "g"', said, 1, true)
    assert.same({ "INSERT 5 g=nil h=y" }, told, said)
  end)
end)
