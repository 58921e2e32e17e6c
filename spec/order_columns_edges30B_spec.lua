-- A top or index given more order or by columns than it holds (round 30B):
-- the refusal came from the binding with luaL_error, so it named
-- lua/runnel.lua's line that called the binding ("…/runnel.lua:1298:
-- t.index: at most 16 columns") instead of the user's line, as every
-- other refusal of a declaration does.
local runnel = require "runnel"
local H = require "helper"

describe("top and index given 17 columns", function()
  teardown(H.cleanup)

  it("are refused at the user's line, naming the relation", function()
    local p = runnel.open()
    local cols = { {"id","int"}, key = "id" }
    for i = 1, 17 do cols[#cols + 1] = { "c" .. i, "int" } end
    local t = p:table("t", cols)
    local many = {}
    for i = 1, 17 do many[i] = "c" .. i end
    local here = debug.getinfo(1, "S").short_src
    local ok, err = pcall(function() local ix = t:index(many); return ix end)
    assert.is_false(ok)
    assert.equal(here .. ":" .. (debug.getinfo(1, "l").currentline - 2) .. ": t.index: at most 16 columns", err)
    ok, err = pcall(function() local top = t:top{ n = 1, by = many, order = { "id" } }; return top end)
    assert.is_false(ok)
    assert.equal(here .. ":" .. (debug.getinfo(1, "l").currentline - 2) .. ": t.top: at most 16 columns", err)
    local order = {}
    for i = 1, 17 do order[i] = { "c" .. i, "desc" } end
    ok, err = pcall(function() local top = t:top{ n = 1, order = order }; return top end)
    assert.is_false(ok)
    assert.equal(here .. ":" .. (debug.getinfo(1, "l").currentline - 2) .. ": t.top: at most 16 columns", err)
    -- 16 are taken, and nothing of the refused ones was declared
    many[17] = nil
    local ix = t:index(many)
    t:insert{ id = 1, c1 = 1, c2 = 2, c3 = 3, c4 = 4, c5 = 5, c6 = 6, c7 = 7, c8 = 8, c9 = 9, c10 = 10, c11 = 11,
              c12 = 12, c13 = 13, c14 = 14, c15 = 15, c16 = 16, c17 = 17 }
    assert.equal(1, ix:count{})
    assert.equal("t.index", ix:name())
    p:close()
  end)
end)
