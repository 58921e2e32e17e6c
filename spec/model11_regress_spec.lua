-- Regressions found by the model campaign's version 11 (spec/model10_campaign.lua,
-- `make model`): p:run of NDJSON, attach reads, drops, and columns of the
-- joins' tables added, dropped and renamed at a reopen.
local runnel = require "runnel"
local H = require "helper"

-- A copy of a relation kept from its change log, by row id.
local function keep(rel, cols, copy, log)
  rel:sink(function(verb, row, old, info)
    local t
    if row then
      t = {}
      for _, c in ipairs(cols) do t[c] = row[c] end
    end
    copy[info.id] = t
    if log then log[#log + 1] = verb .. " " .. info.id end
  end)
end

local function rows_of(rel, cols)
  local out = {}
  for row, id in rel:rows() do
    local t = {}
    for _, c in ipairs(cols) do t[c] = row[c] end
    out[id] = t
  end
  return out
end

describe("model11 regressions", function()
  teardown(H.cleanup)

  -- An aggregate keeps the values its min and max look up under the input
  -- column's position; when the input table gained (or lost, or reordered)
  -- a column before it, the rebuild read the rows its sinks had been told
  -- at the new position, found no values, and told an UPDATE from a null
  -- minimum to the same minimum it had (seed 6 of `make model`).
  for _, case in ipairs{ { "a column added before it", { "z", "int", null = true }, 2 },
                         { "a column added after it", { "z", "int", null = true, default = 5 }, 4 } } do
    it("tells nothing of an aggregate's min and max when its input gains " .. case[1], function()
      local dir = H.tmpdir()
      local cols = { "g", "n", "sm", "mn", "mx" }
      local copy, log = {}, {}
      local function open(extra)
        local decl = { {"id","int"}, {"g","string"}, {"v","int", null = true}, key = "id" }
        if extra then table.insert(decl, case[3], extra) end
        local p = runnel.open{ path = dir, notes = false }
        local T = p:table("T", decl)
        local ag = T:aggregate{ by = "g", n = runnel.count(), sm = runnel.sum("v"), mn = runnel.min("v"),
                                mx = runnel.max("v"), name = "ag" }
        keep(ag, cols, copy, log)
        return p, T, ag
      end
      local p, T = open()
      T:insert{ id = 1, g = "a", v = 4 }
      T:insert{ id = 2, g = "a", v = 9 }
      p:close()
      local ag
      p, T, ag = open(case[2])
      assert.same({ [1] = { g = "a", n = 2, sm = 13, mn = 4, mx = 9 } }, rows_of(ag, cols))
      T:insert{ id = 3, g = "b", v = 1 }
      assert.same({ "INSERT 1", "UPDATE 1", "INSERT 2" }, log)
      assert.same(rows_of(ag, cols), copy)
      T:update{ id = 1, v = 2 }
      assert.same(rows_of(ag, cols), copy)
      assert.equal(2, ag:get{ g = "a" }.mn)
      p:close()
    end)
  end

  -- A top over a join keeps its rows; when the join's right table renamed
  -- a column (was =), the rows its sinks had been told were read back in
  -- the new columns without following the rename through the join: the
  -- renamed column was null in them, and the next group told an UPDATE
  -- from null to the value it had held all along (seed 6 of `make model`).
  it("follows a rename in a join's table when it tells what a top over the join changed", function()
    local dir = H.tmpdir()
    local cols = { "id", "v", "bid", "name", "z", "zz", "rank" }
    local copy, log = {}, {}
    local function open(zcol)
      local p = runnel.open{ path = dir, notes = false }
      local A = p:table("A", { {"id","int"}, {"v","int"}, {"b","int"}, key = "id" })
      local B = p:table("B", { {"bid","int"}, {"name","string"}, zcol, key = "bid" })
      local ji = A:join(B, { on = "b", name = "ji" })
      local t = ji:top{ n = 2, by = "name", order = { {"v", "asc"} }, name = "t" }
      keep(t, cols, copy, log)
      return p, A, B, t
    end
    local p, A, B = open({ "z", "int", null = true })
    B:insert{ bid = 1, name = "m", z = 3 }
    A:insert{ id = 1, v = 1, b = 1 }
    A:insert{ id = 2, v = 2, b = 1 }
    p:close()
    local t
    p, A, B, t = open({ "zz", "int", null = true, was = "z" })
    for _, r in pairs(copy) do r.zz, r.z = r.z, nil end -- the copy applies the rename
    assert.same({ "INSERT 1", "INSERT 2" }, log)
    A:insert{ id = 3, v = 0, b = 1 }
    assert.same({ "INSERT 1", "INSERT 2", "DELETE 2", "UPDATE 1", "INSERT 3" }, log)
    assert.same(rows_of(t, cols), copy)
    p:close()
  end)

  -- A keyed map's rows take the default of a column its function does not
  -- return; when its function (or its input's filter) changed and the
  -- columns did not, the rows its sinks had been told were made again by
  -- the old function with that column null, so every unchanged row was
  -- told as an UPDATE from null to the default, and a DELETE's old row
  -- lacked it (seed 14 of `make model`).
  it("gives a keyed map's told rows their column defaults when only a function changed", function()
    local dir = H.tmpdir()
    local cols = { "id", "x", "note" }
    local copy, log, bad = {}, {}, {}
    local function open(mod, sep)
      local p = runnel.open{ path = dir, notes = false }
      local T = p:table("T", { {"id","int"}, {"v","int"}, key = "id" })
      local f = T:filter(function(r) return r.v % mod ~= 0 end, "f")
      local m = f:map(function(r) return { id = r.id, x = r.v .. sep } end,
        { {"id","int"}, {"x","string"}, {"note","string", null = true, default = "d"}, key = "id" }, "m")
      m:sink(function(verb, row, old, info)
        local o = copy[info.id]
        if old and not (o and o.x == old.x and o.note == old.note) then
          bad[#bad + 1] = ("%s %d: old note %s, the copy holds %s"):format(verb, info.id, tostring(old.note), tostring(o and o.note))
        end
        copy[info.id] = row and { id = row.id, x = row.x, note = row.note } or nil
        log[#log + 1] = verb .. " " .. info.id
      end)
      return p, T, m
    end
    local p, T, m = open(2, ":")
    T:insert{ id = 1, v = 1 }
    T:insert{ id = 2, v = 3 }
    p:close()
    p, T, m = open(3, ":") -- the filter's function changed
    T:insert{ id = 3, v = 5 }
    assert.same({}, bad)
    assert.same({ "INSERT 1", "INSERT 2", "DELETE 2", "INSERT 3" }, log)
    assert.same(rows_of(m, cols), copy)
    p:close()
    p, T, m = open(3, "/") -- the map's function changed
    T:insert{ id = 4, v = 7 }
    assert.same({}, bad)
    assert.same({ "INSERT 1", "INSERT 2", "DELETE 2", "INSERT 3", "UPDATE 1", "UPDATE 3", "INSERT 4" }, log)
    assert.same(rows_of(m, cols), copy)
    p:close()
  end)
end)
