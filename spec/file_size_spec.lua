-- file_size_spec.lua — the LMDB file after random updates in carried
-- transactions stays within 1.5 times the live data, with the write-back
-- layer on and off (group.c: a carried transaction ends before it would
-- copy, by estimate, a third of the pages it writes to, and an empty one
-- follows it so that the next reuses the pages it freed).
local H = require "spec.helper"
local bin = os.getenv("RUNNEL_BIN") or "build/runnel"

describe("the state file", function()
  after_each(H.cleanup)

  for _, write_back in ipairs{ true, false } do
    it("stays within 1.5 times the live data under random updates with sync = false and write_back = " .. tostring(write_back), function()
      local dir = H.tmpdir()
      local script = dir .. "/load.lua"
      local f = assert(io.open(script, "w"))
      f:write([[
local runnel = require "runnel"
local p = runnel.open{ path = arg[1], sync = false, write_back = arg[2] == "true" }
local t = p:table("t", { {"id","int"}, {"s","string"}, {"n","int"}, key = "id" })
local N = 100000
math.randomseed(7)
for g = 0, N - 1, 1000 do
  p:begin() for i = g + 1, g + 1000 do t:insert{ id = i, s = ("x"):rep(200), n = 0 } end p:commit()
end
for g = 1, 150 do
  p:begin() for _ = 1, 1000 do t:update{ id = math.random(N), n = math.random(1000000) } end p:commit()
end
p:close()
]])
      f:close()
      local _, err = H.sh(("%s run %s %s/state %s"):format(bin, script, dir, tostring(write_back)))
      assert.equal("", err)
      local out = H.sh(("%s inspect %s/state"):format(bin, dir))
      local live, free = out:match("space: (%d+) bytes live %(%d+ pages%), (%d+) bytes free")
      assert.truthy(live, out)
      live, free = tonumber(live), tonumber(free)
      assert.is_true(live > 16 * 1024 * 1024, out) -- past RN_WB_MIN_PAGES
      assert.is_true(live + free <= 1.5 * live, ("live %d, free %d"):format(live, free))
    end)
  end
end)
