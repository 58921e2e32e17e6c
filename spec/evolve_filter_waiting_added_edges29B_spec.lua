-- A filter's waiting rows (its function changed, no group since: the
-- DELETEs and INSERTs its new function gives wait in the state for the
-- next group) while its table gains a column with a default. The table's
-- stored rows get the default, and its note (`t: added "x" int = 5`) is how
-- a copy learns of it: what a filter over it passes on carries it. Until
-- 0.40 the waiting told rows were given in the new columns with the added
-- column null, so the filter's sinks were told `DELETE 2 … x=nil` where
-- the same change made with the function in the run that added the column
-- told `x=5`; and a map over the waiting filter made the rows its sinks
-- were told from the filter's rows now, the added column in them: its
-- function's new values for the rows that stay were never told.
local runnel = require "runnel"
local H = require "helper"

local BASE = { {"k","int"}, {"g","string"}, {"v","int"}, key = "k" }
local ADDED = { {"k","int"}, {"g","string"}, {"v","int"}, {"x","int", default = 5}, key = "k" }
local BASE_KEYLESS = { {"k","int"}, {"g","string"}, {"v","int"} }
local ADDED_KEYLESS = { {"k","int"}, {"g","string"}, {"v","int"}, {"x","int", default = 5} }

local function opener(dir, notes)
  return function() return runnel.open{ path = dir, notes = function(l) notes[#notes + 1] = l end } end
end

-- t -> [pass ->] fpos = v > th; what fpos's sink is told, as text.
local function declare(p, th, cols, told, through)
  local t = p:table("t", cols)
  local under = through and t:filter(function() return true end, "pass") or t
  local f = under:filter(function(r) return r.v > th end, "fpos")
  f:sink(function(verb, row, old, info)
    local r = row or old
    told[#told + 1] = ("%s %d g=%s v=%s x=%s"):format(verb, info.id, tostring(r.g), tostring(r.v), tostring(r.x))
  end)
  return t, f
end

-- Rows k = 1..4 (v = 0..3) under fpos = v > 0, then fpos = v > 2 declared
-- in a run of its own: ids 2 and 3 wait to leave it. Then ADDED, in the
-- run that declares fpos again (between = false) or in a run between
-- that declares only the table; a group; what fpos's sink was told.
local function waiting_then_added(between, base, added, through)
  local dir, notes, told = H.tmpdir(), {}, {}
  local open = opener(dir, notes)
  local p = open()
  local t = declare(p, 0, base, told, through)
  p:batch(function() for k = 1, 4 do t:insert{ k = k, g = "g" .. k, v = k - 1 } end end)
  p:close()
  p = open()
  declare(p, 2, base, told, through)
  p:close()
  if between then
    p = open()
    p:table("t", added)
    p:close()
  end
  H.clear(told)
  p = open()
  t = declare(p, 2, added, told, through)
  p:batch(function() t:insert{ k = 10, g = "y", v = 10 } end)
  p:close()
  return told, notes
end

-- The same change made at once: the function changed in the run that adds
-- the column, nothing waiting before.
local function changed_with_added(base, added)
  local dir, notes, told = H.tmpdir(), {}, {}
  local open = opener(dir, notes)
  local p = open()
  local t = declare(p, 0, base, told)
  p:batch(function() for k = 1, 4 do t:insert{ k = k, g = "g" .. k, v = k - 1 } end end)
  p:close()
  H.clear(told)
  p = open()
  t = declare(p, 2, added, told)
  p:batch(function() t:insert{ k = 10, g = "y", v = 10 } end)
  p:close()
  return told
end

local EXPECTED = { "DELETE 2 g=g2 v=1 x=5", "DELETE 3 g=g3 v=2 x=5", "INSERT 5 g=y v=10 x=5" }

describe("a filter's waiting rows when its table gains a column with a default", function()
  after_each(H.cleanup)

  it("are told with the default, as the change made in the run that adds the column tells them", function()
    assert.same(EXPECTED, changed_with_added(BASE, ADDED))
    local told, notes = waiting_then_added(false, BASE, ADDED)
    assert.same(EXPECTED, told, table.concat(notes, "\n"))
  end)

  it("are told with the default when the column was added in a run between", function()
    local told, notes = waiting_then_added(true, BASE, ADDED)
    assert.same(EXPECTED, told, table.concat(notes, "\n"))
  end)

  it("through a filter between, and over a keyless table", function()
    local told, notes = waiting_then_added(false, BASE, ADDED, true)
    assert.same(EXPECTED, told, table.concat(notes, "\n"))
    told, notes = waiting_then_added(true, BASE_KEYLESS, ADDED_KEYLESS)
    assert.same(EXPECTED, told, table.concat(notes, "\n"))
  end)

  it("keep null for a nullable column without a default", function()
    local told, notes = waiting_then_added(true, BASE, { {"k","int"}, {"g","string"}, {"v","int"}, {"x","int", null = true}, key = "k" })
    assert.same({ "DELETE 2 g=g2 v=1 x=nil", "DELETE 3 g=g3 v=2 x=nil", "INSERT 5 g=y v=10 x=nil" }, told,
                table.concat(notes, "\n"))
  end)
end)

describe("a map over a waiting filter whose table gains a column its function reads", function()
  after_each(H.cleanup)

  for _, keyed in ipairs{ false, true } do
    it(("tells what the column changed of the rows that stay, so a copy from its log equals its rows (%s)")
       :format(keyed and "keyed" or "without a key"), function()
      local dir, notes, told = H.tmpdir(), {}, {}
      local open = opener(dir, notes)
      local copy, keep = {}, nil
      local function decl(p, th, cols)
        local t = p:table("t", cols)
        local f = t:filter(function(r) return r.v > th end, "fpos")
        local mcols = { {"k","int"}, {"y","int", null = true}, key = keyed and "k" or nil }
        local m = f:map(function(r) return { k = r.k, y = r.x } end, mcols, "m")
        m:sink(function(verb, row, old, info)
          local r = row or old
          told[#told + 1] = ("%s %d y=%s"):format(verb, info.id, tostring(r.y))
          copy[info.id] = verb ~= "DELETE" and { k = row.k, y = row.y } or nil
        end)
        return t, m
      end
      local p = open()
      local t = decl(p, 0, BASE)
      p:batch(function() for k = 1, 4 do t:insert{ k = k, g = "g" .. k, v = k - 1 } end end)
      p:close()
      p = open()
      decl(p, 2, BASE) -- ids 2 and 3 wait to leave fpos, and m
      p:close()
      H.clear(told)
      p = open()
      local m
      t, m = decl(p, 2, ADDED)
      p:batch(function() t:insert{ k = 10, g = "y", v = 10 } end)
      local rows = {}
      for row, id in m:rows() do rows[id] = { k = row.k, y = row.y } end
      p:close()
      keep = table.concat(notes, "\n")
      assert.same({ "DELETE 2 y=nil", "DELETE 3 y=nil", "UPDATE 4 y=5", "INSERT 5 y=5" }, told, keep)
      assert.same(rows, copy, keep)
    end)
  end
end)
