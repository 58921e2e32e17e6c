-- The REPL browsing a state (`runnel repl DIR`, `.open DIR`) beside a writer
-- of the same state in the REPL's own process with sync = false: before
-- each line the REPL reads the browsed catalogue again when the state
-- changed (runnel.state_version, which since 0.38 tells the carried groups
-- without committing them); the read was runnel.inspect, which commits the
-- writer's carried transaction first, so every line committed (and
-- delivered the writer's durable sinks), as if sync were true. The read now
-- leaves the carried groups carried; what the REPL shows still holds the
-- writer's own changes: relations it declared on the next line, and counts
-- and rows, read through runnel.attach, which commits first as any read of
-- the rows does.
local H = require "helper"

local bin = H.runnel_bin

describe("the REPL browsing a state written by a sync = false pipeline of its own process", function()
  after_each(H.cleanup)

  it("leaves the writer's groups carried line after line, and still shows them", function()
    local dir = H.browsed_state()
    local log = dir .. "/out.ndjson"
    local out, err, code = H.sh(("%s repl %s/st"):format(bin, dir), table.concat({
      "w = runnel.open{ path = p:path(), sync = false }",
      'a = w:table("alpha", { {"id","int"}, key = "id" })',
      ("_ = a:sink(runnel.ndjson(%q))"):format(log),
      "a:insert{ id = 2 }",
      "a:insert{ id = 3 }",
      'b = w:table("beta", { {"id","int"}, key = "id" })', -- a declaration commits the carried groups
      ("c1, n1 = w:stats().lmdb_commits, #io.open(%q):read('a')"):format(log),
      "b:insert{ id = 1 }",
      "a:insert{ id = 4 }",
      "x = 1",
      ("w:stats().lmdb_commits - c1, #io.open(%q):read('a') - n1, p:relation('beta') ~= nil"):format(log),
      "a:count(), a:get(4) ~= nil", -- the writer's own reads see its carried groups
      ".tables",
      "w:stats().lmdb_commits > c1", -- the counts were read through runnel.attach: committed first
      "alpha:get(4) ~= nil",
    }, "\n") .. "\n")
    assert.equal(0, code, err)
    assert.equal([[0
0
true
4
true
 relation | kind  | rows
----------+-------+------
 alpha    | table |    4
 beta     | table |    1
true
true
]], out)
  end)
end)
