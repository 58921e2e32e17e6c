-- runnel query's ndjson and csv (round 22): the values a Lua table cannot
-- carry as they are stored (bytes, maps keyed by numbers, empty maps)
-- printed as an NDJSON sink writes them.
local runnel = require "runnel"
local H = require "helper"

describe("runnel query of bytes, maps and lists", function()
  after_each(H.cleanup)

  local function state()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir .. "/st", notes = false }
    local t = p:table("t", { {"id","int"}, {"b","bytes", null = true}, {"m","map", null = true},
                             {"l","list", null = true}, {"a","any", null = true},
                             {"st", { {"x","int"}, {"y","bytes", null = true} }, null = true}, key = "id" })
    t:sink(runnel.ndjson(dir .. "/sink.ndjson", { verb = false }))
    t:insert{ id = 1, b = "\0\1\255", m = { k = "v", [1] = 2 }, l = { 1, "\255" }, a = "\200", st = { x = 1, y = "hi" } }
    t:insert{ id = 2, m = {}, l = {}, a = { 1.5 } }
    p:close()
    return dir
  end

  -- Regression: bytes were printed raw (not UTF-8: no JSON reader takes the
  -- line), a map with an integer key lost its other keys ({"k":"v",1:2}
  -- printed [2]) and an empty map printed [].
  it("--format ndjson prints the lines an NDJSON sink wrote", function()
    local dir = state()
    local out, err, code = H.sh(("%s query '%s/st' t --format ndjson"):format(H.runnel_bin, dir))
    assert.equal(0, code, err)
    assert.equal(H.read(dir .. "/sink.ndjson"), out)
    assert.equal('{"id":1,"b":"AAH/","m":{"1":2,"k":"v"},"l":[1,"/w=="],"a":"yA==","st":{"x":1,"y":"aGk="}}\n'
                 .. '{"id":2,"b":null,"m":{},"l":[],"a":[1.5],"st":null}\n', out)
    out = H.sh(("%s query '%s/st' t 2 --format ndjson"):format(H.runnel_bin, dir)) -- by key
    assert.equal('{"id":2,"b":null,"m":{},"l":[],"a":[1.5],"st":null}\n', out)
  end)

  it("--format csv and the grid show bytes in base64 and maps as objects", function()
    local dir = state()
    local out = H.sh(("%s query '%s/st' t 1 2 --format csv"):format(H.runnel_bin, dir))
    assert.equal('id,b,m,l,a,st\n1,AAH/,"{""1"":2,""k"":""v""}","[1,""/w==""]",yA==,"{""x"":1,""y"":""aGk=""}"\n'
                 .. '2,,{},[],[1.5],\n', out)
    out = H.sh(("%s query '%s/st' t"):format(H.runnel_bin, dir))
    assert.matches("| AAH/ | {\"1\":2,\"k\":\"v\"} |", out, 1, true)
    assert.is_nil(out:find("\255", 1, true))
  end)
end)
