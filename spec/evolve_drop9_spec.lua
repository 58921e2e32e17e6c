-- p:drop(name) removes every record the state keeps for the relation,
-- among them the last group that changed it (meta "ch:", core/relation.c):
-- a relation declared afterwards under the same name is new, and its
-- durable sinks are not told of groups that changed the dropped one.
local runnel = require "runnel"
local H = require "helper"

describe("p:drop and the record of the last group that changed a relation", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  local cols = { {"k","int"}, {"g","int"}, key = "k" }

  local function missed(notes)
    local out = {}
    for _, l in ipairs(notes) do if l:find(" missed ", 1, true) then out[#out + 1] = l end end
    return out
  end

  local function verify()
    local out, _, code = H.sh(("%s verify %s/s"):format(H.runnel_bin, dir))
    return out, code
  end

  it("goes with the relation: runnel verify finds no record left, and the relation declared again is new", function()
    local got = {}
    local function sink(t)
      t:sink(function(v, row, _, info) got[#got + 1] = info.seq .. ":" .. v .. ":" .. row.k end,
             { durable = true, name = "d" })
    end
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", cols)
    sink(t)
    t:insert{ k = 1, g = 1 }                -- group 1, told to d
    p:close()
    p = runnel.open(dir .. "/s")
    t = p:table("t", cols)
    t:insert{ k = 2, g = 1 }                -- group 2 changes t; d is not declared
    p:close()
    local notes
    p, notes = H.open_noting(dir .. "/s")
    p:drop("t")
    p:close()
    local out, code = verify()
    assert.equal(0, code)
    assert.is_nil(out:find("belongs to no relation", 1, true), out)
    p, notes = H.open_noting(dir .. "/s")
    t = p:table("t", cols)                  -- new: empty, it never changed
    sink(t)
    assert.same({}, missed(notes))          -- before: "t: durable sink d missed the changes of t in group 2: …"
    assert.equal(0, t:count())
    t:insert{ k = 3, g = 1 }
    p:close()
    assert.same({ "1:INSERT:1", "3:INSERT:3" }, got)
  end)

  it("of a derived relation too: a filter dropped and declared again is new", function()
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", cols)
    t:filter(function(r) return r.g > 0 end, "f")
    t:insert{ k = 1, g = 1 }
    p:close()
    p = runnel.open(dir .. "/s")
    p:drop("f")
    p:close()
    local out, code = verify()
    assert.equal(0, code)
    assert.is_nil(out:find("belongs to no relation", 1, true), out)
  end)
end)
