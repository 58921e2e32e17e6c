-- sync = false: each autocommit group is carried until the LMDB commit. A
-- regrow inside a change left that change's first lookup answer in the
-- answer log, so a later regrow read the log one entry off and asked the
-- source again for every carried change after it: carried groups whose
-- sinks were told one answer were stored with another.
local runnel = require "runnel"
local H = require "helper"

describe("rev27d carried groups replayed after two regrows", function()
  teardown(H.cleanup)
  it("keep the lookup answers their sinks were told", function()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir, sync = false, map_size = 1 << 16, notes = false }
    local calls = 0
    local orders = p:table("orders", { {"oid","int"}, {"sku","string"}, {"pad","string"}, key = "oid" })
    local prices = p:lookup("prices", { {"sku","string"}, {"price","int"}, key = "sku",
      source = function(sku) calls = calls + 1; return { price = calls } end })
    local j = orders:join(prices, { on = "sku", kind = "left", name = "j" })
    j:sink(runnel.store("js"))
    local told = {}
    j:sink(function(verb, r) if verb ~= "delete" then told[r.oid] = r.price end end)
    for i = 1, 2500 do orders:insert{ oid = i, sku = "s" .. i, pad = string.rep("p", 300) } end
    assert(p:stats().map_size >= 4 << 20, "grew at least twice")
    p:close()
    local att = runnel.attach(dir, "js")
    local bad, first = 0, nil
    for row in att:rows() do
      if row.price ~= told[row.oid] then
        bad = bad + 1
        first = first or ("oid %d: stored %s, told %s"):format(row.oid, tostring(row.price), tostring(told[row.oid]))
      end
    end
    att:close()
    assert.equal(0, bad, first)
  end)
end)
