-- Review 27 probes: a filter whose function changed twice with no group
-- between (F1 told, F2 waiting, F3 declared). rn_rebuild_now (at the
-- declaration, before rn_derive_tell_old) drops the entries whose told and
-- now rows are equal under F3, and the entries without a told row (the
-- marker "the sinks hold no row of this id"); rn_derive_tell_old then runs
-- F2 over the input as told and, finding no entry for those ids, takes F2's
-- rows for what the sinks hold: they are told a DELETE of a row they never
-- had, or an INSERT of a row they hold already.
local runnel = require "runnel"
local H = require "helper"

local BASE = { {"k","int"}, {"v","int"}, key = "k" }

local function opener(dir, notes)
  return function() return runnel.open{ path = dir, notes = function(l) notes[#notes + 1] = l end } end
end

local function declare(p, th, cols, told, apply)
  local t = p:table("t", cols or BASE)
  local f = t:filter(function(r) return r.v > th end, "f")
  f:sink(function(verb, row, old, info)
    told[#told + 1] = ("%s %d v=%s"):format(verb, info.id, tostring((row or old).v))
    apply(verb, row, old, info)
  end)
  return t, f
end

local function ids(rows)
  local out = {}
  for id in pairs(rows) do out[#out + 1] = id end
  table.sort(out)
  return out
end

describe("a filter whose function changed twice before any group", function()
  after_each(H.cleanup)

  -- F1 v > 2 (sinks hold v = 3, 4), F2 v > 0 (v = 1, 2 wait to enter),
  -- F3 v > 1 (v = 2 enters; v = 1 never did).
  it("tells no DELETE of a row its sinks never had", function()
    local dir, notes, told = H.tmpdir(), {}, {}
    local open = opener(dir, notes)
    local copy, apply = H.id_applier()
    local p = open()
    local t = declare(p, 2, nil, told, apply)
    p:batch(function() for k = 1, 4 do t:insert{ k = k, v = k } end end)
    p:close()
    p = open()
    declare(p, 0, nil, told, apply)
    p:close()
    H.clear(told)
    p = open()
    local f
    t, f = declare(p, 1, nil, told, apply)
    p:batch(function() t:insert{ k = 10, v = 10 } end)
    local held = H.rows_by_id(f)
    p:close()
    assert.same({ "INSERT 2 v=2", "INSERT 5 v=10" }, told, table.concat(notes, "\n"))
    assert.same(ids(held), ids(copy))
  end)

  -- F1 v > 2 (sinks hold v = 3, 4), F2 v > 3 (v = 3 waits to leave),
  -- F3 v > 2 again: nothing changed for the sinks.
  it("tells no INSERT of a row its sinks hold already", function()
    local dir, notes, told = H.tmpdir(), {}, {}
    local open = opener(dir, notes)
    local copy, apply = H.id_applier()
    local p = open()
    local t = declare(p, 2, nil, told, apply)
    p:batch(function() for k = 1, 4 do t:insert{ k = k, v = k } end end)
    p:close()
    p = open()
    declare(p, 3, nil, told, apply)
    p:close()
    H.clear(told)
    p = open()
    local f
    t, f = declare(p, 2, nil, told, apply)
    p:batch(function() t:insert{ k = 10, v = 10 } end)
    local held = H.rows_by_id(f)
    p:close()
    assert.same({ "INSERT 5 v=10" }, told, table.concat(notes, "\n"))
    assert.same(ids(held), ids(copy))
  end)

  -- As the first, with the table's columns moved in the same run (the
  -- waiting rows given by name in rn_rebuild_opened first).
  it("tells no DELETE of a row its sinks never had when its table's columns moved too", function()
    local dir, notes, told = H.tmpdir(), {}, {}
    local open = opener(dir, notes)
    local copy, apply = H.id_applier()
    local p = open()
    local t = declare(p, 2, nil, told, apply)
    p:batch(function() for k = 1, 4 do t:insert{ k = k, v = k } end end)
    p:close()
    p = open()
    declare(p, 0, nil, told, apply)
    p:close()
    H.clear(told)
    p = open()
    local f
    t, f = declare(p, 1, { {"v","int"}, {"k","int"}, {"x","int", null = true}, key = "k" }, told, apply)
    p:batch(function() t:insert{ k = 10, v = 10 } end)
    local held = H.rows_by_id(f)
    p:close()
    assert.same({ "INSERT 2 v=2", "INSERT 5 v=10" }, told, table.concat(notes, "\n"))
    assert.same(ids(held), ids(copy))
  end)
end)

describe("a filter whose function changed twice before any group, the old one not kept", function()
  after_each(H.cleanup)

  -- F1 v > 0 (sinks hold every row), F2 with a table upvalue v > 2 (v = 1,
  -- 2 wait to leave; F2 cannot be run again), F3 v > 0 again with the
  -- table's columns moved: a note says its sinks were not told what F3
  -- changed, but the waiting rows F3 holds are not told to leave.
  it("tells no DELETE of a row it holds", function()
    local dir, notes, told = H.tmpdir(), {}, {}
    local open = opener(dir, notes)
    local copy, apply = H.id_applier()
    local function decl(p, th, cols)
      local t = p:table("t", cols or BASE)
      local cfg = { th = th }
      local f = t:filter(function(r) return r.v > cfg.th end, "f")
      f:sink(function(verb, row, old, info)
        told[#told + 1] = ("%s %d v=%s"):format(verb, info.id, tostring((row or old).v))
        apply(verb, row, old, info)
      end)
      return t, f
    end
    local p = open()
    local t = declare(p, 0, nil, told, apply)
    p:batch(function() for k = 1, 4 do t:insert{ k = k, v = k } end end)
    p:close()
    p = open()
    decl(p, 2)
    p:close()
    H.clear(told)
    p = open()
    local f
    t, f = decl(p, 0, { {"v","int"}, {"k","int"}, key = "k" })
    p:batch(function() t:insert{ k = 10, v = 10 } end)
    local held = H.rows_by_id(f)
    p:close()
    assert.same({ "INSERT 5 v=10" }, told, table.concat(notes, "\n"))
    assert.same(ids(held), ids(copy))
  end)
end)
