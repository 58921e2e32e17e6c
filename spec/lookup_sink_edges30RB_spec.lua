-- A lookup given to a durable sink or a store (review 30RB). Round 30B
-- refused a lookup as a sink's input in rn_sink_add, which durable sinks
-- (a durable Lua sink, runnel.ndjson, runnel.sqlite, runnel.jetstream) do
-- not go through: they were declared over the lookup and never wrote a
-- line. A store (runnel.store) was refused only after it had written its
-- description and owner into the state. Each is now refused first, naming
-- the lookup, and leaves nothing behind: no file, no table, no store.
local runnel = require "runnel"
local H = require "helper"

describe("a lookup as a durable sink's or a store's input", function()
  teardown(H.cleanup)

  it("is refused before anything is written", function()
    local dir = H.tmpdir()
    local p = runnel.open(dir)
    local prices = p:lookup("prices", { {"sku","int"}, {"price","int"}, key = "sku",
      source = function(sku) return { sku = sku, price = sku * 10 } end })
    local said = "prices: prices is a lookup, whose rows are fetched only when a join asks for them: no sink ever "
                 .. "sees them (join a relation with prices instead)"
    assert.equal(said, H.error_of(function() prices:sink(function() end, { durable = true, name = "d" }) end))
    assert.equal(said, H.error_of(function() prices:sink{ insert = function() end, durable = true, name = "d2" } end))
    assert.equal(said, H.error_of(function() prices:sink(runnel.ndjson(dir .. "/out.ndjson")) end))
    local f = assert(io.open(dir .. "/open.ndjson", "w"))
    assert.equal(said, H.error_of(function() prices:sink(runnel.ndjson(f)) end))
    f:close()
    assert.equal(said, H.error_of(function() prices:sink(runnel.sqlite(dir .. "/x.db", "prices")) end))
    assert.equal(said, H.error_of(function()
      prices:sink(runnel.jetstream{ url = "nats://127.0.0.1:1", subject = "prices", timeout = 0.2 })
    end))
    assert.equal(said, H.error_of(function() prices:sink(runnel.store("pstore")) end))
    assert.is_nil(io.open(dir .. "/out.ndjson"))
    assert.is_nil(io.open(dir .. "/x.db"))
    p:close()
    assert.is_false(pcall(runnel.attach, dir, "pstore"))
    -- the name is free: a store of a table takes it, in step, and is read back
    p = runnel.open(dir)
    local t = p:table("t", { {"id","int"}, key = "id" })
    t:sink(runnel.store("pstore"))
    t:insert{ id = 1 }
    p:close()
    local att = runnel.attach(dir, "pstore")
    assert.equal(1, att:count())
    att:close()
  end)
end)
