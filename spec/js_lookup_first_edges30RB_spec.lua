-- A JetStream source in a pipeline whose first relation is a lookup
-- (review 30RB). The source keeps its positions in a sink of the group's
-- phases only, registered on the first relation declared; round 30B
-- refused a lookup as any sink's input, so that pipeline could no longer
-- run a JetStream source nor read its position ("prices is a lookup …
-- no sink ever sees them"), which it did before. A sink that reads no
-- change is no reader of the lookup: it is taken again.
local runnel = require "runnel"
local H = require "spec.helper"
local J = require "spec.js_helper"

local server, why = J.start()

describe("a jetstream source after a lookup", function()
  if not server then
    it("starts nats-server on 127.0.0.1", function() error(why) end)
    return
  end
  local url = server.url
  teardown(function() J.stop(server); H.cleanup() end)
  local stream = J.streams(url, "L")

  it("runs, joining its rows with the lookup, and keeps its position", function()
    local name, subj = stream()
    J.publish(url, subj .. ".0", { '{"rel":"orders","op":"insert","row":{"id":1,"sku":3}}',
                                   '{"rel":"orders","op":"insert","row":{"id":2,"sku":4}}' })
    local p = runnel.open()
    local prices = p:lookup("prices", { {"sku","int"}, {"price","int"}, key = "sku",
      source = function(sku) return { sku = sku, price = sku * 10 } end })
    local orders = p:table("orders", { {"id","int"}, {"sku","int"}, key = "id" })
    local priced = orders:join(prices, { on = "sku" })
    local stats = p:run(runnel.jetstream_source{ url = url, stream = name, subjects = { subj .. ".0" }, batch = 10 })
    assert.equal(2, stats.messages)
    local prices_of = {}
    for r in priced:rows() do prices_of[r.id] = r.price end
    assert.same({ 30, 40 }, prices_of)
    assert.equal(2, p:_js_position(name, subj .. ".0"))
    -- a sink over the lookup itself is still refused
    assert.is_false(pcall(prices.sink, prices, function() end))
    p:close()
  end)
end)
