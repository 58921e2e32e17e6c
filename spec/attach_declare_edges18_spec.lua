-- runnel.attach of the state a pipeline writes, called from a callback of
-- one of its declarations (a map told the rows it is declared over): the
-- attach borrows the pipeline's environment and opened its databases in a
-- read transaction while the declaration's transaction held handles LMDB
-- had not exported. LMDB lets one transaction at a time open handles: the
-- read took the same slot, and the declaration failed at its commit with
-- "MDB_BAD_DBI: The specified DBI handle was closed/changed unexpectedly",
-- leaking the name LMDB kept for its handle (found by a random sequence of
-- API calls under ASan). Such an attach is refused now, saying why.
local runnel = require "runnel"
local H = require "helper"

local function state_with_w(dir)
  local p = runnel.open{ path = dir, notes = false }
  local t = p:table("t", { {"id","int"}, {"v","int"}, key = "id" })
  for i = 1, 3 do t:insert{ id = i, v = i } end
  local w = p:table("w", { {"id","int"}, key = "id" })
  for i = 1, 5 do w:insert{ id = i } end
  p:close()
  p = runnel.open{ path = dir, notes = false }
  return p, p:table("t", { {"id","int"}, {"v","int"}, key = "id" }) -- w stays stored, not opened
end

describe("runnel.attach of the pipeline's own state from a declaration's callback", function()
  after_each(H.cleanup)

  it("is refused, saying why; the declaration goes on and the state stays whole", function()
    local dir = H.tmpdir() .. "/st"
    local p, t = state_with_w(dir)
    local refused, read = {}, {}
    local m = t:map(function(r)
      local ok, a = pcall(runnel.attach, dir, "w")
      if ok then read[#read + 1] = a:count() a:close() else refused[#refused + 1] = a end
      return { id = r.id, w = r.v }
    end, { {"id","int"}, {"w","int"}, key = "id" }, "m")
    -- before: the map's declaration failed: "committing a group: MDB_BAD_DBI: …"
    assert.equal(3, m:count())
    assert.is_true(#refused > 0)
    assert.equal("attach w: not while its pipeline declares a relation (a callback of the declaration): the "
                 .. "declaration opens databases, and LMDB lets one transaction at a time do that; attach it "
                 .. "before the declaration", refused[1])
    for _, n in ipairs(read) do assert.equal(5, n) end -- told again once the databases are open: read whole
    local a = runnel.attach(dir, "w") -- after the declaration
    assert.equal(5, a:count())
    a:close()
    t:insert{ id = 4, v = 4 }
    assert.equal(4, m:count())
    p:close()
    local out, err, code = H.sh(("%s verify %s"):format(H.runnel_bin, dir))
    assert.same({ "", 0 }, { err, code }, out)
  end)

  it("raised in the function fails the declaration with that message, nothing stored", function()
    local dir = H.tmpdir() .. "/st"
    local p, t = state_with_w(dir)
    local ok, err = pcall(t.map, t, function(r)
      runnel.attach(dir, "w")
      return { id = r.id, w = r.v }
    end, { {"id","int"}, {"w","int"}, key = "id" }, "m")
    assert.is_false(ok)
    assert.matches("attach w: not while its pipeline declares a relation", err, 1, true)
    assert.same({ "w" }, p:undeclared()) -- m not stored: declared again, it is built anew
    local m = t:map(function(r) return { id = r.id, w = r.v } end, { {"id","int"}, {"w","int"}, key = "id" }, "m")
    assert.equal(3, m:count())
    p:close()
  end)
end)

-- p:stats() from such a callback read the outbox's records of sinks in a
-- read transaction, which opened the outbox's database beside the
-- declaration's new handles: the declaration failed at its commit with
-- MDB_BAD_DBI. It reads them through the declaration's transaction now.
describe("p:stats() from a declaration's callback, on a state with durable sinks", function()
  after_each(H.cleanup)

  it("gives the figures it gives outside, and the declaration goes on", function()
    local dir = H.tmpdir() .. "/st"
    local p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", { {"id","int"}, {"g","int"}, {"sc","int"}, key = "id" })
    t:sink(function() end, { durable = true, name = "k" })
    for i = 1, 3 do t:insert{ id = i, g = i % 2, sc = i } end
    p:close()
    p = runnel.open{ path = dir, notes = false }
    t = p:table("t", { {"id","int"}, {"g","int"}, {"sc","int"}, key = "id" })
    local inside
    local a = t:aggregate{ by = "g", z = runnel.agg{ init = function() inside = inside or p:stats() return 0 end,
      add = function(s, r) return s + r.sc end, remove = function(s, r) return s - r.sc end,
      result = function(s) return s end }, name = "agg" }
    -- before: "committing a group: MDB_BAD_DBI: The specified DBI handle was closed/changed unexpectedly"
    assert.equal(2, a:count())
    assert.same(p:stats().outbox_undeclared, inside.outbox_undeclared)
    p:close()
    local out, err, code = H.sh(("%s verify %s"):format(H.runnel_bin, dir))
    assert.same({ "", 0 }, { err, code }, out)
  end)
end)
