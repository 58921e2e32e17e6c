-- The shop example (scripts/shop): a lookup into SQLite, SQLite and NDJSON
-- sinks, a permanent store, and a second script reading it.
local H = require "helper"

describe("the shop example", function()
  after_each(H.cleanup)

  it("prices orders from the catalogue and another script reads the totals", function()
    local dir = H.tmpdir() .. "/shop"
    local out, err, code = H.sh(("%s run scripts/shop/orders.lua %s"):format(H.runnel_bin, dir))
    assert.equal("", err)
    assert.equal(0, code)
    assert.matches("catalogue lookups: 0 hits, 4 misses", out, 1, true)
    local report = H.sh(("%s run scripts/shop/report.lua %s"):format(H.runnel_bin, dir))
    assert.equal(table.concat({
      " customer | orders | spent",
      "----------+--------+-------",
      " ann      |      2 | 21.00",
      " bob      |      1 | 30.00",
      " cy       |      1 |     -",
      "ann spent 21.00 over 2 orders", "" }, "\n"), report)
    local f = io.open(dir .. "/orders.log")
    local log = f:read("a")
    f:close()
    assert.equal(table.concat({
      '{"order_id":1,"customer":"ann","item":"Green tea","qty":2,"amount":9.0}',
      '{"order_id":2,"customer":"bob","item":"Tea pot","qty":1,"amount":30.0}',
      '{"order_id":3,"customer":"ann","item":"Stone mug","qty":1,"amount":12.0}',
      '{"order_id":4,"customer":"cy","item":"cake","qty":3,"amount":null}', "" }, "\n"), log)
    local rows = H.sh(("sqlite3 %s/shop.db 'select item, amount from priced_orders order by order_id'"):format(dir))
    assert.equal("Green tea|9.0\nTea pot|30.0\nStone mug|12.0\ncake|\n", rows)
  end)

  it("takes orders from an NDJSON file, rejecting the bad ones", function()
    local dir = H.tmpdir() .. "/shop"
    local input = H.tmpdir() .. "/orders.ndjson"
    local f = io.open(input, "w")
    f:write('{"rel":"orders","op":"insert","row":{"order_id":1,"customer":"ann","sku":"tea","qty":1}}\n')
    f:write('{"rel":"orders","op":"insert","row":{"order_id":2,"customer":"bob","sku":"tea","qty":"two"}}\n')
    f:write('{"rel":"orders","op":"insert","row":{"order_id":3,"customer":"ann","sku":"tea","qty":3}}\n')
    f:close()
    local out = H.sh(("%s run scripts/shop/orders.lua %s %s"):format(H.runnel_bin, dir, input))
    assert.matches("orders: 3 lines, 2 applied, 1 rejected", out, 1, true)
    assert.matches("catalogue lookups: 1 hits, 1 misses", out, 1, true)
    f = io.open(dir .. "/rejects.txt")
    assert.equal(input .. ':2: orders: column "qty": expected int, got string\t' ..
                 '{"rel":"orders","op":"insert","row":{"order_id":2,"customer":"bob","sku":"tea","qty":"two"}}\n', f:read("a"))
    f:close()
  end)
end)
