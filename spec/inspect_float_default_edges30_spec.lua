-- runnel inspect (and the REPL's browsing, which shows its text) wrote a
-- float column's default as msgpack-c prints it, with %f: 1.500000, 0.100000,
-- and 1e300 as 301 digits. It now writes it as Lua does, the shortest
-- text that reads back as it: 1.5, 0.1, 1e+300, 2.0.
local H = require "helper"
local runnel = require "runnel"

describe("runnel inspect of float defaults", function()
  after_each(H.cleanup)

  it("writes each as Lua writes the float", function()
    local dir = H.tmpdir()
    local p = runnel.open(dir .. "/st")
    p:table("t", { {"k","int"}, {"f","float", default = 1.5}, {"g","float", default = 1e300},
                   {"h","float", default = 0.1}, {"z","float", default = 2}, {"n","float", default = -0.0},
                   {"i","int", default = -3}, key = "k" })
    p:close()
    local out, err, code = H.sh(("%s inspect '%s/st'"):format(H.runnel_bin, dir))
    assert.are.same({ "", 0 }, { err, code })
    assert.is_truthy(out:find("| k int key, f float = 1.5, g float = 1e+300, h float = 0.1, z float = 2.0, "
                              .. "n float = -0.0, i int = -3\n", 1, true), out)
  end)
end)
