-- The rows p:drop keeps of a table ("dt:" name, "dk:" name: store.h) for
-- the filters and maps left over it are kept only while the state holds
-- such a filter or map. Until 0.41 they were kept until a table of that
-- name was declared again: a table dropped for good (nothing over it, or
-- its filters dropped too) left every one of its rows in the state for
-- ever, in no relation runnel inspect lists.
local runnel = require "runnel"
local H = require "helper"

local COLS = { {"k","int"}, {"v","string"}, key = "k" }

describe("p:drop of a table, the rows it keeps", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  -- A state holding t (n rows) and, with filter, f over it and u
  -- (another table); then drops, in order, the names in drops.
  local function state_after(name, n, filter, drops)
    local state = dir .. "/" .. name
    local p = runnel.open{ path = state }
    local t = p:table("t", COLS)
    p:table("u", COLS)
    if filter then t:filter(function(r) return r.k > 0 end, "f"):sink(function() end) end
    p:batch(function() for k = 1, n do t:insert{ k = k, v = ("x"):rep(100) } end end)
    p:close()
    p = runnel.open{ path = state }
    for _, d in ipairs(drops) do p:drop(d) end
    p:close()
    local out, err, code = H.sh(("%s verify %s"):format(H.runnel_bin, state))
    assert.equal(0, code, out .. err)
    return (out:match("(%d+ databases, %d+ entries)")), state
  end

  it("keeps none when no filter or map is left in the state", function()
    local empty = state_after("e", 1, false, { "t" })
    local full = state_after("s", 500, false, { "t" })
    assert.equal(empty, full)
  end)

  it("forgets them when the last filter or map left is dropped, before or after the table", function()
    local empty = state_after("e", 1, true, { "t", "f" })
    assert.equal(empty, state_after("s1", 500, true, { "t", "f" }))
    assert.equal(empty, state_after("s2", 500, true, { "f", "t" }))
  end)

  it("forgets them on runnel drop of the last filter", function()
    local empty = state_after("e", 1, true, { "t", "f" })
    local _, state = state_after("s", 500, true, { "t" })
    local out, err, code = H.sh(("%s drop %s f"):format(H.runnel_bin, state))
    assert.equal(0, code, out .. err)
    out = H.sh(("%s verify %s"):format(H.runnel_bin, state))
    assert.equal(empty, (out:match("(%d+ databases, %d+ entries)")))
  end)

  it("keeps them while a filter is left, and they are told when t is declared again", function()
    local _, state = state_after("s", 3, true, { "t" })
    local p = runnel.open{ path = state }
    local t = p:table("t", COLS)
    local told = {}
    t:filter(function(r) return r.k > 0 end, "f"):sink(function(verb, _, _, info)
      told[#told + 1] = verb .. " " .. info.id
    end)
    p:batch(function() t:insert{ k = 9, v = "y" } end)
    p:close()
    assert.same({ "DELETE 1", "DELETE 2", "DELETE 3", "INSERT 4" }, told)
  end)
  it("leaves no emptied database behind once a table declared again is dropped for good", function()
    local empty = state_after("e", 1, true, { "f", "t" })
    local _, state = state_after("s", 3, true, { "t" })
    local p = runnel.open{ path = state }
    local t = p:table("t", COLS)
    t:filter(function(r) return r.k > 0 end, "f"):sink(function() end)
    p:batch(function() t:insert{ k = 9, v = "y" } end) -- told: the kept rows are forgotten ("dt:" t emptied)
    p:close()
    p = runnel.open{ path = state }
    p:drop("f")
    p:drop("t")
    p:close()
    local out = H.sh(("%s verify %s"):format(H.runnel_bin, state))
    assert.equal(empty:match("%d+ databases"), (out:match("%d+ databases")))
  end)
end)
