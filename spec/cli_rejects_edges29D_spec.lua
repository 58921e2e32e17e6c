-- runnel run --rejects - made a file named "-" in the working directory,
-- though --input - reads stdin. --rejects - writes the rejected lines and
-- their reasons to stdout.
local H = require "helper"

local R = H.runnel_bin

describe("runnel run --on-error skip --rejects -", function()
  after_each(H.cleanup)

  it("writes each rejected line to stdout, and makes no file named -", function()
    local dir = H.tmpdir()
    H.write(dir .. "/p.lua", 'local p = require("runnel").open(arg[1])\n'
      .. 'p:table("t", { {"id","int"}, {"v","string"}, key = "id" })\nreturn p\n')
    H.write(dir .. "/in.ndjson", '{"rel":"t","op":"insert","row":{"id":1,"v":"a"}}\n'
      .. '{"rel":"t","op":"insert","row":{"id":2,"v":5}}\n{"rel":"t","op":"insert","row":{"id":3,"v":"c"}}\n')
    local out, err, code = H.sh(("cd '%s' && %s run --input in.ndjson --on-error skip --rejects - p.lua st"):format(dir, R))
    assert.are.same({ 'in.ndjson:2: t: column "v": expected string, got number\t'
      .. '{"rel":"t","op":"insert","row":{"id":2,"v":5}}\n',
      "runnel: in.ndjson: 3 lines, 2 applied, 1 rejected, 1 group\n", 0 }, { out, err, code })
    assert.is_nil(H.read(dir .. "/-"))
    out = H.sh(("%s query %s/st t --format csv"):format(R, dir))
    assert.are.equal("id,v\n1,a\n3,c\n", out)
  end)
end)
