local runnel = require "runnel"
local H = require "helper"

local function declare(p, extra)
  local cols = { {"k","string"}, {"g","string"}, key = "k" }
  if extra then cols[#cols + 1] = { "x", "int", null = true } end
  local t = p:table("t", cols)
  t:sink(runnel.store("tstore"))
  return t
end

describe("rev27d keys near the hashed length, rewritten", function()
  teardown(H.cleanup)
  for _, wb in ipairs{ false, true } do
    it("write_back = " .. tostring(wb), function()
      local dir = H.tmpdir()
      local keys = {}
      for n = 470, 520 do keys[#keys + 1] = string.rep("a", n) end
      -- long keys sharing their first 480 bytes with the short ones
      for n = 1, 5 do keys[#keys + 1] = string.rep("a", 480) .. string.rep("b", 40 + n) end
      local p = runnel.open{ path = dir, sync = false, write_back = wb, notes = false }
      local t = declare(p)
      for _, k in ipairs(keys) do t:insert{ k = k, g = "a" } end
      p:close()
      p = runnel.open{ path = dir, sync = false, write_back = wb, notes = false }
      t = declare(p, true)
      for i, k in ipairs(keys) do
        if i % 3 == 0 then t:delete{ k = k } else t:update{ k = k, x = i } end
      end
      p:close()
      local att = runnel.attach(dir, "tstore")
      local n = 0
      for row in att:rows() do n = n + 1 end
      for i, k in ipairs(keys) do
        local r = att:get(k)
        if i % 3 == 0 then assert.is_nil(r, "deleted " .. #k) else assert.equal(i, r and r.x, "row " .. #k) end
      end
      att:close()
      local expect = 0
      for i in ipairs(keys) do if i % 3 ~= 0 then expect = expect + 1 end end
      assert.equal(expect, n)
      local out, _, code = H.sh(("%s verify %s"):format(H.runnel_bin, dir))
      assert.equal(0, code, out)
    end)
  end
end)

describe("rev27d a store declared late over long-keyed rows", function()
  teardown(H.cleanup)
  for _, wb in ipairs{ false, true } do
    it("is filled hashed, then changed (write_back = " .. tostring(wb) .. ")", function()
      local dir = H.tmpdir()
      local L = string.rep("z", 700)
      local p = runnel.open{ path = dir, sync = false, write_back = wb, notes = false }
      local t = p:table("t", { {"k","string"}, {"v","int"}, key = "k" })
      for i = 1, 20 do t:insert{ k = L .. i, v = i } end
      p:close()
      p = runnel.open{ path = dir, sync = false, write_back = wb, notes = false }
      t = p:table("t", { {"k","string"}, {"v","int"}, key = "k" })
      local f = t:filter(function(r) return r.v % 2 == 0 end, "even")
      f:sink(runnel.store("es"))
      t:update{ k = L .. "2", v = 3 }   -- leaves the filter
      t:update{ k = L .. "3", v = 30 }  -- enters it
      t:delete{ k = L .. "4" }
      p:close()
      local att = runnel.attach(dir, "es")
      local got = {}
      for row in att:rows() do got[#got + 1] = row.v end
      table.sort(got)
      assert.equal("6,8,10,12,14,16,18,20,30", table.concat(got, ","))
      assert.equal(30, att:get(L .. "3").v)
      assert.is_nil(att:get(L .. "2"))
      att:close()
      local out, _, code = H.sh(("%s verify %s"):format(H.runnel_bin, dir))
      assert.equal(0, code, out)
    end)
  end
end)
