-- The REPL reading piped input: a line holding a NUL byte is one line.
-- Before, the plain reader (fgets, then strlen) stopped the line at the
-- NUL and lost its newline with the rest of it, so the next line was glued
-- onto what came before the NUL ("unfinished string near '"aprint(x)'").
local H = require "helper"

describe("the REPL on a pipe", function()
  it("reads a line holding a NUL byte whole, and the next one on its own", function()
    local out, err, code = H.sh(H.runnel_bin, 'x = "a\0b"\nprint(#x, x:byte(2))\nprint("after")\n')
    assert.equal(0, code, err)
    assert.equal("3\t0\nafter\n", out)
  end)

  it("still reads a last line without a newline, and a long line whole", function()
    local long = ("y"):rep(10000)
    local out, err, code = H.sh(H.runnel_bin, ('s = "%s"\nprint(#s)\nprint("end")'):format(long))
    assert.equal(0, code, err)
    assert.equal("10000\nend\n", out)
  end)
end)
