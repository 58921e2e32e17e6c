-- Minor edges of the Lua surface: a pipeline dropped without close is
-- collected before runnel.open of its state refuses it; empty verb fields.
local H = require "helper"
local runnel = require "runnel"

describe("runnel.open of a state whose pipeline was dropped without close", function()
  after_each(H.cleanup)

  it("collects that pipeline first, and reads what it committed", function()
    local dir = H.tmpdir() .. "/st"
    do
      local p = runnel.open(dir)
      p:table("t", { {"id","int"}, key = "id" }):insert{ id = 1 }
    end
    local q = runnel.open(dir)
    assert.equal(1, q:table("t", { {"id","int"}, key = "id" }):count())
    q:close()
  end)

  it("still refuses while the first pipeline is held", function()
    local dir = H.tmpdir() .. "/st"
    local p = runnel.open(dir)
    assert.matches("is already open for writing in this process", H.error_of(runnel.open, dir), 1, true)
    p:close()
  end)
end)

describe("runnel.ndjson and runnel.jetstream", function()
  it("refuse an empty verb field, as they refuse an empty id field", function()
    for _, verb in ipairs{ "" } do
      assert.equal("ndjson: verb must be a field name or false",
                   H.error_of(runnel.ndjson, io.stdout, { verb = verb }))
      assert.equal("jetstream: verb must be a field name or false",
                   H.error_of(runnel.jetstream, { url = "nats://127.0.0.1:1", subject = "s", verb = verb }))
    end
  end)
end)
