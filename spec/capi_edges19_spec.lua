-- The Lua surface over the C API's handles (round 19): an iteration kept
-- across a growth of the state's map; empty paths; messages of misuse.
local runnel = require "runnel"

describe("t:rows() kept across calls", function()
  it("is refused after the state's map grew, and a new rows() reads every row", function()
    local p = runnel.open{ map_size = 1 << 20 }
    local t = p:table("players", { {"id","int"}, {"name","string"}, key = "id" })
    local big = ("x"):rep(1000)
    p:batch(function() for i = 1, 20 do t:insert{ id = i, name = big } end end)
    local next_row, state, _, closing = t:rows()
    local first = next_row(state)
    assert.equal(1, first.id)
    for g = 0, 39 do -- before: each group could grow the map under the iteration; its next step died of SIGSEGV
      p:batch(function() for i = 1, 200 do t:insert{ id = 100 + g * 200 + i, name = big } end end)
    end
    local ok, err = pcall(next_row, state)
    assert.is_false(ok)
    assert.matches("players: rows(): the iteration began before the state grew", err, 1, true)
    assert.matches("begin it again", err, 1, true)
    local n = 0
    for _ in t:rows() do n = n + 1 end
    assert.equal(8020, n)
    assert(closing)
    p:close()
  end)
end)

describe("an empty path", function()
  local H = require "helper"
  after_each(H.cleanup)

  it("is refused by every function taking one, saying the path (not a name) is empty", function()
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, key = "k" })
    -- before: inspect and attach said "a name must not be empty"
    assert.equal("inspect: the path must not be empty", H.error_of(runnel.inspect, ""))
    assert.equal("attach: the path must not be empty", H.error_of(runnel.attach, "", "t"))
    assert.equal("ndjson: the path must not be empty", H.error_of(function() t:sink(runnel.ndjson("")) end))
    assert.equal("sqlite: the path must not be empty", H.error_of(function() t:sink(runnel.sqlite("", "t")) end))
    assert.equal("run: the path must not be empty", H.error_of(function() p:run(runnel.ndjson_source("")) end))
    assert.equal("l: the path must not be empty", H.error_of(function()
      p:lookup("l", { {"k","int"}, key = "k", source = runnel.sqlite_source("", "t") })
    end))
    assert.equal("open: the path must not be empty (runnel.open() opens a temporary state)",
                 H.error_of(runnel.open, ""))
    p:close()
  end)
end)

describe("a value of the wrong container kind", function()
  local H = require "helper"

  it("a list given for a struct says so (before: unknown field 1)", function()
    local p = runnel.open()
    local t = p:table("v", { {"id","int"}, {"pos", { {"x","int"}, {"y","int"} }, null = true}, key = "id" })
    assert.equal('v: column "pos": expected struct, got a list (a struct is a table of its fields by name)',
                 H.error_of(t.insert, t, { id = 1, pos = { 1, 2 } }))
    t:insert{ id = 1, pos = { x = 1, y = 2 } }
    assert.same({ x = 1, y = 2 }, t:get(1).pos)
    p:close()
  end)

  it("a top whose rank column is named \"\" is refused naming the top (before: no relation named)", function()
    local p = runnel.open()
    local t = p:table("players", { {"id","int"}, {"name","string"}, key = "id" })
    assert.equal('best: the rank column\'s name is empty (the default is "rank")',
                 H.error_of(function() t:top{ n = 3, order = "name", rank = "", name = "best" } end))
    assert.equal(1, t:top{ n = 3, order = "name", rank = "place", name = "best" }:count() + 1)
    p:close()
  end)

  it("a top over a column of type any names its type (before: is a any)", function()
    local p = runnel.open()
    local t = p:table("items", { {"id","int"}, {"tag","any"}, key = "id" })
    assert.equal('best: column "tag" has type any: only scalar columns have an order',
                 H.error_of(function() t:top{ n = 3, order = "tag", name = "best" } end))
    p:close()
  end)
end)
