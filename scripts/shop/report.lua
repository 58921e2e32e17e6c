-- report.lua DIR — the shop example, part 2: reads the customer totals that
-- orders.lua keeps in its state's permanent store. It opens the state for
-- reading only (LMDB read transactions), so it may run while orders.lua
-- writes; each read shows whole groups.
local runnel = require "runnel"
local dir = assert(arg[1], "usage: runnel run scripts/shop/report.lua DIR")
local totals = runnel.attach(dir .. "/state", "customer_totals")
local rows = {}
for t in totals:rows() do
  rows[#rows + 1] = { t.customer, tostring(t.orders), t.spent and ("%.2f"):format(t.spent) or "-" }
end
print(runnel.grid({ "customer", "orders", "spent" }, rows, { false, true, true }))
local ann = totals:get("ann")
print(("ann spent %.2f over %d orders"):format(ann.spent, ann.orders))
totals:close()
