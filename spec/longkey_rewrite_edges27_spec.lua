local runnel = require "runnel"
local H = require "helper"
local LONG = string.rep("q", 600)

local function declare(p, extra)
  local cols = { {"k","string"}, {"g","string"}, key = "k" }
  if extra then cols[#cols + 1] = { "x", "int", null = true } end
  local t = p:table("t", cols)
  t:sink(runnel.store("tstore"))
  return t
end

local function stored(dir)
  local att = runnel.attach(dir, "tstore")
  local out = {}
  for row in att:rows() do out[#out + 1] = (row.k:gsub(LONG, "L")) .. "=" .. tostring(row.x) end
  table.sort(out)
  local g1, g3 = att:get(LONG .. "1"), att:get(LONG .. "3")
  att:close()
  return table.concat(out, " "), g1 and g1.x, g3 and g3.x
end

describe("rev27d long keys rewritten", function()
  teardown(H.cleanup)
  for _, wb in ipairs{ false, true } do
    it("then changed (write_back = " .. tostring(wb) .. ")", function()
      local dir = H.tmpdir()
      local p = runnel.open{ path = dir, sync = false, write_back = wb, notes = false }
      local t = declare(p)
      for i = 1, 5 do t:insert{ k = LONG .. i, g = "a" } end
      t:insert{ k = "s", g = "b" }
      t:delete{ k = LONG .. "5" }
      p:close()
      p = runnel.open{ path = dir, sync = false, write_back = wb, notes = false }
      t = declare(p, true)
      t:update{ k = LONG .. "1", x = 5 }
      t:delete{ k = LONG .. "2" }
      t:upsert{ k = LONG .. "3", g = "c", x = 3 }
      t:insert{ k = LONG .. "5", g = "a", x = 9 }
      p:close()
      local rows, x1, x3 = stored(dir)
      assert.equal("L1=5 L3=3 L4=nil L5=9 s=nil", rows)
      assert.equal(5, x1); assert.equal(3, x3)
      local out, _, code = H.sh(("%s verify %s"):format(H.runnel_bin, dir))
      assert.equal(0, code, out)
      -- a third declaration with x dropped again: rewritten over hashed rows
      p = runnel.open{ path = dir, sync = false, write_back = wb, notes = false }
      t = declare(p)
      t:delete{ k = LONG .. "4" }
      t:update{ k = LONG .. "1", g = "z" }
      p:close()
      rows = stored(dir)
      assert.equal("L1=nil L3=nil L5=nil s=nil", rows)
      out, _, code = H.sh(("%s verify %s"):format(H.runnel_bin, dir))
      assert.equal(0, code, out)
    end)
  end
end)
