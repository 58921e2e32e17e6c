-- The embedding API's edges seen from Lua (spec/c/test_capi_edges3.c has
-- the C side): p:stats() when the write-back layer cannot be written into
-- LMDB as it is, integers a float column cannot hold (a Lua integer, a
-- JSON one with the file and line), map_size values LMDB cannot map, and
-- what a key may hold besides the key.
local runnel = require "runnel"
local H = require "helper"

local MiB = 1024 * 1024

describe("p:stats()", function()
  after_each(H.cleanup)

  local function fill(t, from, to)
    local big = string.rep("x", 4000)
    for i = from, to do t:insert{ id = i, name = big } end
  end

  -- Before: the write-back layer's flush into a 1 MiB map failed (map full)
  -- and p:stats() ignored it: state.t was 0, the counts of a transaction
  -- LMDB had refused. Now the map grows (the group is applied again) and
  -- the counts are the group's.
  it("counts a group's rows when writing the write-back layer fills the map", function()
    local p = runnel.open{ sync = false, write_back = true, map_size = MiB }
    local t = p:table("t", { {"id","int"}, {"name","string"}, key = "id" })
    p:begin()
    fill(t, 1, 600)
    local st = p:stats()
    assert.equal(600, st.state.t)
    assert.is_true(st.map_size > MiB, "the map grew")
    p:commit()
    assert.equal(600, p:stats().state.t)
    assert.equal(600, t:count())
    p:close()
  end)

  it("counts the carried groups' rows between groups (sync = false) when that fills the map", function()
    local p = runnel.open{ sync = false, write_back = true, map_size = MiB, carry = { groups = 1000 } }
    local t = p:table("t", { {"id","int"}, {"name","string"}, key = "id" })
    for g = 0, 5 do p:batch(function() fill(t, g * 100 + 1, g * 100 + 100) end) end
    local st = p:stats()
    assert.equal(600, st.state.t)
    assert.equal(6, st.seq)
    p:flush()
    assert.equal(600, p:stats().state.t)
    p:close()
  end)

  -- From a callback the map cannot grow under it: the flush's failure is
  -- raised there (and the group, told of it, grows the map and runs again)
  -- instead of counts of a transaction LMDB refused. Before: a sink's
  -- p:stats() said state.t = 0 at rows 250 and 500 (sync = false: the
  -- carried transaction filled there).
  it("raises from a sink rather than count a transaction LMDB refused", function()
    local p = runnel.open{ sync = false, write_back = true, map_size = MiB }
    local t = p:table("t", { {"id","int"}, {"name","string"}, key = "id" })
    local seen = {}
    t:sink(function(verb, row)
      if row.id % 10 ~= 0 then return end
      local ok, st = pcall(p.stats, p)
      seen[#seen + 1] = { row.id, ok and st.state.t or tostring(st) }
    end)
    for g = 0, 59 do p:batch(function() fill(t, g * 10 + 1, g * 10 + 10) end) end
    for i, s in ipairs(seen) do
      if type(s[2]) == "string" then
        assert.matches("^stats: MDB_MAP_FULL", s[2])
        assert.same({ s[1], s[1] }, seen[i + 1]) -- the group ran again, and counted
      else
        assert.equal(s[1], s[2]) -- the rows so far, this group's included
      end
    end
    assert.same({ 600, 600 }, seen[#seen])
    assert.equal(600, p:stats().state.t)
    p:close()
  end)
end)

describe("a float column given an integer", function()
  local p, t
  before_each(function()
    p = runnel.open()
    t = p:table("t", { {"k","int"}, {"f","float", null = true}, {"s", { {"x","float"} }, null = true}, key = "k" })
  end)
  after_each(function() p:close(); H.cleanup() end)

  -- Before: stored as 9007199254740992, another number, silently.
  it("refuses one beyond ±2^53 that no float holds, naming the column, and rolls the group back", function()
    local err = H.error_of(function()
      p:batch(function()
        t:insert{ k = 1, f = 1.5 }
        t:insert{ k = 2, f = 9007199254740993 }
      end)
    end)
    assert.matches('t: column "f": expected float, got number 9007199254740993, an integer no float holds: beyond '
                   .. "±2^53 not every integer is a float (this one would be stored as 9007199254740992): give it "
                   .. "as a float (9007199254740993.0) to store the nearest one", err, 1, true)
    assert.is_nil(t:get(1))
    assert.matches('t: column "f": expected float, got number 9223372036854775807, an integer no float holds',
                   H.error_of(t.insert, t, { k = 3, f = math.maxinteger }), 1, true)
    assert.matches('t: column "s" field "x": expected float, got number -9007199254740993, an integer no float holds',
                   H.error_of(t.insert, t, { k = 4, s = { x = -9007199254740993 } }), 1, true)
    assert.equal(0, t:count())
  end)

  it("takes one a float holds exactly, and a float given as such", function()
    t:insert{ k = 1, f = 9007199254740992 }
    t:insert{ k = 2, f = 1 << 60 }
    t:insert{ k = 3, f = math.mininteger }
    t:insert{ k = 4, f = 9007199254740993.0, s = { x = 3 } }
    assert.equal(2^53, t:get(1).f)
    assert.equal("float", math.type(t:get(1).f))
    assert.equal(2^60, t:get(2).f)
    assert.equal(-2^63, t:get(3).f)
    assert.equal(2^53, t:get(4).f)
    assert.equal(3.0, t:get(4).s.x)
  end)

  it("refuses one from JSON with the file and line, as JSON's other numbers are", function()
    local input = H.tmpdir() .. "/in.ndjson"
    H.write(input, '{"rel":"t","op":"insert","row":{"k":1,"f":1}}\n'
                .. '{"rel":"t","op":"insert","row":{"k":2,"f":9007199254740993}}\n')
    local ok, err = pcall(p.run, p, runnel.ndjson_source(input), { batch = 1 })
    assert.is_false(ok)
    assert.matches(input .. ':2: t: column "f": expected float, got number 9007199254740993, an integer no float '
                   .. "holds", tostring(err), 1, true)
    assert.equal(1, t:count())
    H.write(input, '{"rel":"t","op":"insert","row":{"k":2,"f":9007199254740993.0}}\n') -- as the message says
    p:run(runnel.ndjson_source(input))
    assert.equal(2^53, t:get(2).f)
  end)
end)

describe("runnel.open's map_size", function()
  after_each(H.cleanup)

  -- Before: -1 became SIZE_MAX in C and the error was "<dir>: Cannot
  -- allocate memory", naming no option.
  it("is refused when negative, naming the option and the value", function()
    assert.matches("open: map_size must be 0 (64 MiB) or more bytes, got -1",
                   H.error_of(runnel.open, { map_size = -1 }), 1, true)
  end)

  it("names the option and the value when LMDB cannot map it", function()
    local dir = H.tmpdir()
    assert.matches("open: map_size 1152921504606846976: LMDB could not map that many bytes (",
                   H.error_of(runnel.open, { path = dir .. "/st", map_size = 1 << 60 }), 1, true)
    local p = runnel.open{ path = dir .. "/st", map_size = 2 * MiB } -- the same state opens with a size it can map
    p:close()
  end)
end)

describe("a key given with other columns", function()
  after_each(H.cleanup)

  it("takes a whole row (checked), finds the row by the key alone, refuses an unknown column", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"name","string"}, key = "id" })
    t:insert{ id = 1, name = "ann" }
    assert.equal("ann", t:get{ id = 1, name = "someone else" }.name)
    assert.matches('t: column "name": expected string, got number', H.error_of(t.delete, t, { id = 1, name = 2 }), 1, true)
    assert.matches('t: unknown column "bogus"', H.error_of(t.delete, t, { id = 1, bogus = 2 }), 1, true)
    assert.equal(1, t:count())
    t:delete(t:get(1))
    assert.equal(0, t:count())
    p:close()
  end)
end)
