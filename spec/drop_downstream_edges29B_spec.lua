-- The filters, maps and selects left over a table that p:drop removed
-- (or runnel drop), declared again over the table declared again. The
-- joins, aggregates, distincts, tops and indexes over it are rebuilt and
-- tell their sinks every row that left; until 0.40 a filter, a map (keyed
-- or not) or a select told nothing, so a copy of one kept from its log
-- held the dropped table's rows for good, and a filter whose function
-- change waited to be told told the rows that function took out but not
-- the ones it kept (the README: it "tells what it holds now against what
-- its sinks were told"). The dropped table's rows are now kept with the
-- drop until a group ends with the table declared again: what those
-- relations' sinks were told is made from them, and what left is told at
-- the start of that group, as a rebuild's changes are.
local runnel = require "runnel"
local H = require "helper"

local COLS = { {"k","int"}, {"g","string"}, {"v","int"}, key = "k" }

describe("a table dropped and declared again, as the filters, maps and selects over it tell it", function()
  local dir, state
  before_each(function() dir = H.tmpdir(); state = dir .. "/s" end)
  after_each(H.cleanup)

  local function open(notes, opts)
    local o = { path = state, notes = notes and function(l) notes[#notes + 1] = l end or false }
    for k, v in pairs(opts or {}) do o[k] = v end
    return runnel.open(o)
  end

  -- t and what is over it; each derived relation's changes go into told
  -- ("name VERB id") and into a copy by row id (copies[name]).
  local function declare(p, told, copies, cols, th)
    local t = p:table("t", cols or COLS)
    local rels = {
      f = t:filter(function(r) return r.v > (th or 0) end, "f"),
      s = t:select({ "k", "v" }, "s"),
      m = t:map(function(r) return { k = r.k, w = r.v * 10 } end, { {"k","int"}, {"w","int"}, key = "k" }, "m"),
      um = t:map(function(r) return { w = r.v * 10 } end, { {"w","int"} }, "um"),
    }
    rels.ff = rels.f:filter(function(r) return r.v < 3 end, "ff")
    rels.a = t:aggregate{ by = "g", n = runnel.count(), name = "a" } -- rebuilt: told before 0.40 too
    for name, rel in pairs(rels) do
      copies[name] = copies[name] or {}
      rel:sink(function(verb, row, _, info)
        told[#told + 1] = ("%s %s %d"):format(name, verb, info.id)
        copies[name][info.id] = verb ~= "DELETE" and true or nil
      end)
    end
    return t, rels
  end

  local function fill(p, t)
    p:batch(function() for k = 1, 4 do t:insert{ k = k, g = "g" .. k, v = k - 1 } end end)
  end

  -- A run that declares t (setup(p) returns it) and fills it, then one that drops it.
  local function filled_then_dropped(setup)
    local p = open()
    fill(p, setup(p))
    p:close()
    p = open()
    p:drop("t")
    p:close()
  end

  -- Every relation's copy holds the ids it holds.
  local function assert_copies(rels, copies, why)
    for name, rel in pairs(rels) do
      local ids = {}
      for _, id in rel:rows() do ids[id] = true end
      assert.same(ids, copies[name], name .. "\n" .. (why or ""))
    end
  end

  local function of(told, name)
    local out = {}
    for _, l in ipairs(told) do
      if l:sub(1, #name + 1) == name .. " " then out[#out + 1] = l:sub(#name + 2) end
    end
    return out
  end

  it("tells each one's sinks the rows that left, then the new table's rows", function()
    local told, copies, notes = {}, {}, {}
    filled_then_dropped(function(p) return (declare(p, told, copies)) end)
    H.clear(told)
    local p = open(notes)
    local t, rels = declare(p, told, copies)
    p:batch(function() t:insert{ k = 10, g = "g1", v = 2 } end)
    local why = table.concat(notes, "\n")
    assert.same({ "DELETE 2", "DELETE 3", "DELETE 4", "INSERT 5" }, of(told, "f"), why)
    assert.same({ "DELETE 2", "DELETE 3", "INSERT 5" }, of(told, "ff"), why)
    for _, name in ipairs{ "s", "m", "um" } do
      assert.same({ "DELETE 1", "DELETE 2", "DELETE 3", "DELETE 4", "INSERT 5" }, of(told, name), name .. "\n" .. why)
    end
    assert_copies(rels, copies, why)
    p:close()
    -- told once: the group forgot the dropped rows
    H.clear(told)
    p = open()
    t, rels = declare(p, told, copies)
    p:batch(function() t:insert{ k = 11, g = "g2", v = 3 } end)
    assert.same({ "INSERT 6" }, of(told, "f"))
    assert.same({ "INSERT 6" }, of(told, "s"))
    assert_copies(rels, copies)
    p:close()
    local out, _, code = H.sh(("%s verify %s"):format(H.runnel_bin, state))
    assert.equal(0, code, out)
  end)

  it("dropped and declared again in one run, or by runnel drop", function()
    for _, how in ipairs{ "same run", "cli" } do
      H.cleanup(); dir = H.tmpdir(); state = dir .. "/s"
      local told, copies = {}, {}
      local p = open()
      local t = declare(p, told, copies)
      fill(p, t)
      p:close()
      if how == "cli" then
        local out, err, code = H.sh(("%s drop %s t"):format(H.runnel_bin, state))
        assert.equal(0, code, out .. err)
      end
      H.clear(told)
      p = open()
      if how == "same run" then p:drop("t") end
      local rels
      t, rels = declare(p, told, copies)
      p:batch(function() t:insert{ k = 10, g = "g1", v = 2 } end)
      assert.same({ "DELETE 2", "DELETE 3", "DELETE 4", "INSERT 5" }, of(told, "f"), how)
      assert_copies(rels, copies, how)
      p:close()
    end
  end)

  it("gives the rows that left in the columns of the table declared again, by name", function()
    local told, notes = {}, {}
    local function sink(f)
      f:sink(function(verb, row, old, info)
        local r = row or old
        told[#told + 1] = ("%s %d k=%s v=%s name=%s x=%s"):format(verb, info.id, tostring(r.k), tostring(r.v),
                                                                  tostring(r.name), tostring(r.x))
      end)
    end
    filled_then_dropped(function(p)
      local t = p:table("t", COLS)
      sink(t:filter(function(r) return r.v > 1 end, "f"))
      return t
    end)
    H.clear(told)
    local p = open(notes)
    local t = p:table("t", { {"k","int"}, {"v","float"}, {"name","string", was = "g"}, {"x","int", default = 7}, key = "k" })
    sink(t:filter(function(r) return r.v > 1 end, "f"))
    p:batch(function() t:insert{ k = 10, name = "y", v = 2.5 } end)
    p:close()
    assert.same({ "DELETE 3 k=3 v=2.0 name=g3 x=nil", "DELETE 4 k=4 v=3.0 name=g4 x=nil",
                  "INSERT 5 k=10 v=2.5 name=y x=7" }, told, table.concat(notes, "\n"))
  end)

  it("says its sinks were not told when the rows do not fit the new columns", function()
    local told, notes = {}, {}
    local function sink(f) f:sink(function(verb, _, _, info) told[#told + 1] = verb .. " " .. info.id end) end
    filled_then_dropped(function(p)
      local t = p:table("t", COLS)
      sink(t:filter(function(r) return r.v > 1 end, "f"))
      return t
    end)
    H.clear(told)
    local p = open(notes)
    local t = p:table("t", { {"k","int"}, {"g","int"}, {"v","int"}, key = "k" }) -- g a string before
    sink(t:filter(function(r) return r.v > 1 end, "f"))
    p:batch(function() t:insert{ k = 10, g = 1, v = 2 } end)
    p:close()
    assert.same({ "INSERT 5" }, told)
    local said = table.concat(notes, "\n")
    assert.truthy(said:find("f: its sinks were not told", 1, true), said)
  end)

  it("keeps them while the table is not declared, and through a group that rolls back", function()
    local told, copies, notes = {}, {}, {}
    local p = open()
    local t = declare(p, told, copies)
    local other = p:table("o", { {"k","int"}, key = "k" })
    fill(p, t)
    p:close()
    p = open()
    p:drop("t")
    other = p:table("o", { {"k","int"}, key = "k" })
    other:insert{ k = 1 } -- a group without t: nothing of t is forgotten
    p:close()
    H.clear(told)
    p = open(notes)
    local rels
    t, rels = declare(p, told, copies)
    local durable = {}
    rels.f:sink(function(verb, _, _, info) durable[#durable + 1] = ("%d %s %d"):format(info.seq, verb, info.id) end,
                { durable = true, name = "d" })
    local fail = true
    rels.s:sink(function() if fail then error("no") end end)
    local ok = pcall(p.batch, p, function() t:insert{ k = 10, g = "g1", v = 2 } end)
    assert.is_false(ok)
    fail = false
    H.clear(told)
    for name in pairs(copies) do copies[name] = {} end -- the plain sinks saw the group that rolled back
    p:batch(function() t:insert{ k = 10, g = "g1", v = 2 } end)
    assert.same({ "DELETE 2", "DELETE 3", "DELETE 4", "INSERT 5" }, of(told, "f"), table.concat(notes, "\n"))
    p:close()
    assert.same({ "3 DELETE 2", "3 DELETE 3", "3 DELETE 4", "3 INSERT 5" }, durable)
  end)

  it("tells them once with groups carried (sync = false), across a reopen", function()
    local told, copies = {}, {}
    local p = open(nil, { sync = false })
    local t = declare(p, told, copies)
    fill(p, t)
    p:close()
    p = open(nil, { sync = false })
    p:drop("t")
    t = declare(p, told, copies)
    H.clear(told)
    p:batch(function() t:insert{ k = 10, g = "g1", v = 2 } end)
    p:batch(function() t:insert{ k = 11, g = "g1", v = 2 } end)
    assert.same({ "DELETE 2", "DELETE 3", "DELETE 4", "INSERT 5", "INSERT 6" }, of(told, "f"))
    p:close()
    H.clear(told)
    p = open(nil, { sync = false })
    t = declare(p, told, copies)
    p:batch(function() t:insert{ k = 12, g = "g1", v = 2 } end)
    assert.same({ "INSERT 7" }, of(told, "f"))
    p:close()
  end)
end)
