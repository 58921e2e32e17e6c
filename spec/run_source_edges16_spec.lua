-- p:run given a source whose file was closed after runnel.ndjson_source
-- took it, or a source table not made by runnel.ndjson_source. Before, the
-- error came from inside the binding: "lua/runnel.lua:1006: bad argument
-- #1 to '_run' (string expected, got FILE*)", naming runnel's own line
-- and an internal function instead of the user's line and what is wrong.
local runnel = require "runnel"
local H = require "helper"

describe("p:run's source", function()
  local dir, path, p, t
  before_each(function()
    dir = H.tmpdir()
    path = dir .. "/in.ndjson"
    H.write(path, '{"rel":"t","op":"insert","row":{"id":1}}\n')
    p = runnel.open()
    t = p:table("t", { {"id","int"}, key = "id" })
  end)
  after_each(function()
    p:close()
    H.cleanup()
  end)

  local function run_error(source)
    local ok, err = pcall(function() p:run(source) end) -- not a tail call: the line is this file's
    assert.is_false(ok)
    return err
  end

  it("whose file was closed says so at the caller's line", function()
    local f = assert(io.open(path))
    local source = runnel.ndjson_source(f)
    f:close()
    local err = run_error(source)
    assert.matches("^[^\n]*run_source_edges16_spec%.lua:%d+: run: the source's file is closed$", err)
    assert.equal(0, t:count())
    assert.is_false(p:in_group())
  end)

  it("a table not made by ndjson_source is refused at the caller's line", function()
    for _, source in ipairs{ { ndjson = path }, { ndjson = {}, name = "x" }, { ndjson = true, name = "x" } } do
      local err = run_error(source)
      assert.matches("^[^\n]*run_source_edges16_spec%.lua:%d+: run: expects runnel%.ndjson_source%(…%)$", err)
    end
    assert.equal(0, t:count())
  end)

  it("an open file still runs, and so does a path", function()
    local f = assert(io.open(path))
    assert.equal(1, p:run(runnel.ndjson_source(f)).applied)
    f:close()
    t:delete{ id = 1 }
    assert.equal(1, p:run(runnel.ndjson_source(path)).applied)
  end)
end)
