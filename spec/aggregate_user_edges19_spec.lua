-- runnel.agg functions that read their own aggregate. Reading an aggregate
-- computes its rows with the same user functions, which used one pair of
-- pack buffers per aggregate: a read from inside add, remove or result
-- clobbered the outer call's answer, and from the first such read on every
-- change failed with "out of memory".
local runnel = require "runnel"

-- reader(a, row) runs inside add, remove and result; not inside itself
-- (result reads the aggregate, whose rows call result again).
local function declare(p, t, read)
  local a, busy = nil, false
  local function reader(...)
    if busy then return end
    busy = true
    read(...)
    busy = false
  end
  a = t:aggregate{ by = "g", name = "a", n = runnel.count(), lo = runnel.min("v"),
    s = runnel.agg{ init = function() return 0 end,
      add = function(st, r) reader(a, r); return st + r.v end,
      remove = function(st, r) reader(a, r); return st - r.v end,
      result = function(st) reader(a); return st * 10 end } }
  return a
end

local function rows_of(a)
  local out = {}
  for r in a:rows() do out[r.g] = { r.n, r.lo, r.s } end
  return out
end

describe("a runnel.agg function that reads its own aggregate", function()
  for _, how in ipairs{ "get", "rows" } do
    it("keeps every change working when it reads by " .. how, function()
      local p = runnel.open()
      local t = p:table("t", { {"id","int"}, {"g","string"}, {"v","int"}, key = "id" })
      local seen = 0
      local a = declare(p, t, function(a, r)
        if how == "get" then if a:get(r and r.g or "x") then seen = seen + 1 end
        else for _ in a:rows() do seen = seen + 1 end end
      end)
      for i = 1, 6 do
        p:begin(); t:insert{ id = i, g = "g" .. (i % 2), v = i }; p:commit()
      end
      p:begin(); t:update{ id = 3, g = "g0" }; t:delete{ id = 2 }; p:commit()
      assert.same({ g0 = { 3, 3, 130 }, g1 = { 2, 1, 60 } }, rows_of(a))
      assert.is_true(seen > 0)
      p:close()
    end)
  end

  it("reads it from a result function outside a group, with a min looked up after it", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"g","string"}, {"v","int"}, key = "id" })
    local a = declare(p, t, function(a) local _ = a:get("g1") end)
    p:begin()
    for i = 1, 4 do t:insert{ id = i, g = "g" .. (i % 2), v = i } end
    p:commit()
    assert.same({ g0 = { 2, 2, 60 }, g1 = { 2, 1, 40 } }, rows_of(a))
    assert.same({ g = "g0", n = 2, lo = 2, s = 60 }, a:get("g0"))
    p:close()
  end)
end)
