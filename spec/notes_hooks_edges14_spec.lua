-- A notes or on_declare function is told of what is done: a declaration
-- applied and stored. One that raises cannot undo it, so the declaration
-- returns its relation and the error is written to stderr naming the
-- hook; before, the declaration raised although it had been applied (and
-- a declaration made again was refused as already declared).
local runnel = require "runnel"
local H = require "helper"

local function run(script)
  local dir = H.tmpdir()
  local path = dir .. "/s.lua"
  H.write(path, script:gsub("DIR", dir .. "/state"))
  local out, err, code = H.sh(("%s run %s"):format(H.runnel_bin, path))
  return out, (err:gsub("/[^ :]*/s%.lua", "s.lua")), code
end

describe("a notes function that raises", function()
  after_each(H.cleanup)

  it("leaves the declaration done, returning its relation; the error goes to stderr", function()
    local out, err, code = run([[
local runnel = require "runnel"
local p0 = runnel.open("DIR"); p0:table("t", { {"id","int"}, key = "id" }):insert{ id = 1 }; p0:close()
local p = runnel.open{ path = "DIR", notes = function(line) error("cannot log " .. line, 0) end }
local t = p:table("t", { {"id","int"}, {"a","int", null = true}, key = "id" })
print(t:name(), #t:schema().columns, p:relation("t") == t)
t:insert{ id = 2, a = 5 }
print(t:count())
p:close()
]])
    assert.same({ "t\t2\ttrue\n2\n",
                  'runnel: notes raised (what it was told of is done, and kept): cannot log t: added "a" int = null\n',
                  0 }, { out, err, code })
  end)

  it("at close does not keep the pipeline open", function()
    local out, err, code = run([[
local runnel = require "runnel"
local p0 = runnel.open("DIR"); p0:table("old", { {"id","int"}, key = "id" }); p0:close()
local p = runnel.open{ path = "DIR", notes = function(line) error("boom", 0) end }
p:table("t", { {"id","int"}, key = "id" })
p:close()
local q = runnel.open{ path = "DIR", notes = false } -- closed: it opens again
print(#q:undeclared())
q:close()
]])
    assert.same({ "2\n", "runnel: notes raised (what it was told of is done, and kept): boom\n", 0 }, { out, err, code })
  end)
end)

describe("an on_declare function", function()
  after_each(H.cleanup)

  it("that raises leaves the declaration done, and later hooks are still told", function()
    local out, err, code = run([[
local runnel = require "runnel"
local p = runnel.open()
local seen = {}
p:on_declare(function(rel) error("hook boom", 0) end)
p:on_declare(function(rel) seen[#seen + 1] = rel:name() end)
local t = p:table("t", { {"id","int"}, key = "id" })
t:filter(function() return true end, "f")
print(t:name(), p:relation("f") ~= nil, table.concat(seen, ","))
p:close()
]])
    assert.same({ "t\ttrue\tt,f\n", ("runnel: on_declare raised (what it was told of is done, and kept): hook boom\n"):rep(2),
                  0 }, { out, err, code })
  end)

  it("is refused on a closed pipeline, and when it is not a function", function()
    local p = runnel.open()
    assert.equal("on_declare: expects a function, got number", H.error_of(p.on_declare, p, 5))
    p:close()
    assert.matches("closed", H.error_of(p.on_declare, p, function() end))
  end)
end)
