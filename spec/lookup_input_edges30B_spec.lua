-- A lookup given as the input of an operator or a sink (round 30B). A
-- lookup's rows are fetched only when a join asks for them: nothing else
-- ever sees one. An aggregate, filter, map, a lookup as a join's left side
-- and a sink over a lookup were declared and stayed empty for ever, with
-- no word (an aggregate of a lookup read as no groups: a wrong answer,
-- not an error); a top, index, distinct or cdc of one was refused calling
-- the lookup "a stream". Each is now refused at declaration, naming the
-- relation and the lookup, and nothing of it is declared.
local runnel = require "runnel"
local H = require "helper"

describe("a lookup as an input", function()
  teardown(H.cleanup)

  it("is refused for every operator but a join's right side, naming the lookup", function()
    local p = runnel.open()
    local prices = p:lookup("prices", { {"sku","int"}, {"price","int"}, key = "sku",
      source = function(sku) return { sku = sku, price = sku * 10 } end })
    local function refusal(what, f)
      local ok, err = pcall(f)
      assert.is_false(ok, what)
      return err:gsub("^[^:]*:%d+: ", "")
    end
    local tail = "prices is a lookup, whose rows are fetched only when a join asks for them: no %s ever sees them "
                 .. "(join a relation with prices instead)"
    assert.equal("prices.aggregate: " .. tail:format("aggregate"),
                 refusal("aggregate", function() local a = prices:aggregate{ by = "sku", n = runnel.count() }; return a end))
    assert.equal("prices.filter: " .. tail:format("filter"),
                 refusal("filter", function() local f = prices:filter(function() return true end); return f end))
    assert.equal("prices.map: " .. tail:format("map"),
                 refusal("map", function() local m = prices:map(function(r) return r end, { {"sku","int"} }); return m end))
    -- a select is declared as a map, but is called what the user wrote (review 30RB: it said "no map")
    assert.equal("prices.select: " .. tail:format("select"),
                 refusal("select", function() local s = prices:select{ "sku" }; return s end))
    assert.equal("prices.top: " .. tail:format("top"),
                 refusal("top", function() local t = prices:top{ n = 1, order = { "price" } }; return t end))
    assert.equal("prices.index: " .. tail:format("index"),
                 refusal("index", function() local x = prices:index{ "price" }; return x end))
    assert.equal("prices.distinct: " .. tail:format("distinct"),
                 refusal("distinct", function() local d = prices:distinct(); return d end))
    assert.equal("prices.cdc: " .. tail:format("cdc"),
                 refusal("cdc", function() local c = prices:cdc{}; return c end))
    assert.equal("prices.join: " .. tail:format("join's left side"),
                 refusal("join", function() local j = prices:join(prices, { on = "price" }); return j end))
    assert.equal("prices: " .. tail:format("sink"),
                 refusal("sink", function() prices:sink(function() end) end))
    -- the right side of a join is what a lookup is for, and nothing refused was declared
    local orders = p:table("orders", { {"id","int"}, {"sku","int"}, key = "id" })
    local priced = orders:join(prices, { on = "sku" })
    local total = priced:aggregate{ by = {}, sum = runnel.sum("price") }
    orders:insert{ id = 1, sku = 3 }
    orders:insert{ id = 2, sku = 4 }
    for r in total:rows() do assert.equal(70, r.sum) end
    assert.equal(1, total:count())
    local names = {}
    for _, r in ipairs(runnel.inspect(p:path()).relations) do names[#names + 1] = r.name end
    table.sort(names)
    assert.same({ "orders", "orders.join", "orders.join.aggregate", "prices" }, names)
    p:close()
  end)
end)
