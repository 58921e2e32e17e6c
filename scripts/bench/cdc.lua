-- cdc.lua [N] — changes/s through a keyed table feeding a counting sink,
-- groups of 1,000, sync = false: without CDC, and with
-- cdc{ preimage = "full", postimage = true } (the sink counts log rows).
local runnel = require "runnel"
local N = tonumber(arg and arg[1]) or 200000
local GROUP = 1000

local function run(with_cdc)
  local p = runnel.open{ sync = false }
  local t = p:table("players", { {"id","int"}, {"name","string"}, {"score","int"}, key = "id" })
  local counted = 0
  local target = with_cdc and t:cdc{ preimage = "full", postimage = true } or t
  target:sink{ insert = function() counted = counted + 1 end,
               update = function() counted = counted + 1 end }
  local t0 = runnel.now()
  for g = 0, N - 1, GROUP do -- half the changes insert, half update
    p:begin()
    for i = g + 1, math.min(g + GROUP, N) do
      if i % 2 == 1 then t:insert{ id = i, name = "p", score = 0 }
      else t:update{ id = i - 1, score = i } end
    end
    p:commit()
  end
  local dt = runnel.now() - t0
  p:close()
  return N / dt, counted
end

local plain, plain_rows = run(false)
local cdc, cdc_rows = run(true)
print(("cdc.plain_changes_per_s: %d (%d sink calls)"):format(math.floor(plain), plain_rows))
print(("cdc.cdc_changes_per_s: %d (%d log rows)"):format(math.floor(cdc), cdc_rows))
print(("cdc.cost_ratio: %.2f"):format(plain / cdc))
