-- file_size_spec.lua — the LMDB file after random updates in carried
-- transactions: with carry.page_share = 3 it stays within 1.5 times the
-- live data, with the write-back layer on and off (group.c: a carried
-- transaction ends before it would copy, by estimate, a third of the pages
-- it writes to); without it too when each carried transaction copies 40%
-- of the pages (an empty transaction follows each carried commit, so that
-- the next reuses the pages it freed).
local H = require "spec.helper"
local bin = os.getenv("RUNNEL_BIN") or "build/runnel"

describe("the state file", function()
  after_each(H.cleanup)

  -- without the empty transaction after each carried commit the windowed case ends at 1.66 times
  for _, case in ipairs{ { true, 3, "anywhere" }, { false, 3, "anywhere" }, { false, 0, "windowed" } } do
    local write_back, share, workload = case[1], case[2], case[3]
    it(("stays within 1.5 times the live data under random updates (%s) with sync = false, write_back = %s and carry.page_share = %d")
       :format(workload, write_back, share), function()
      local dir = H.tmpdir()
      local script = dir .. "/load.lua"
      local f = assert(io.open(script, "w"))
      f:write([[
local runnel = require "runnel"
local share, windowed = tonumber(arg[3]), arg[4] == "windowed"
local p = runnel.open{ path = arg[1], sync = false, write_back = arg[2] == "true",
                       carry = { page_share = share, groups = windowed and 4 or nil } }
local t = p:table("t", { {"id","int"}, {"s","string"}, {"n","int"}, key = "id" })
local N = 100000
math.randomseed(7)
for g = 0, N - 1, 1000 do
  p:begin() for i = g + 1, g + 1000 do t:insert{ id = i, s = ("x"):rep(200), n = 0 } end p:commit()
end
local base = 0
for g = 1, windowed and 200 or 150 do
  -- windowed: each carried transaction (4 groups) updates ids in a window of 40% of them, so it
  -- copies about 40% of the pages; otherwise updates anywhere (one transaction copies them all)
  if windowed and g % 4 == 1 then base = math.random(0, N * 6 // 10) end
  local span = windowed and N * 4 // 10 or N
  p:begin() for _ = 1, 1000 do t:update{ id = base + math.random(span), n = math.random(1000000) } end p:commit()
end
p:close()
]])
      f:close()
      local _, err = H.sh(("%s run %s %s/state %s %d %s"):format(bin, script, dir, tostring(write_back), share, workload))
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
