-- The REPL and lines it cannot run.
local H = require "helper"

describe("the REPL on an unterminated short string", function()
  -- A short string cannot go on over a newline (only after a "\" or a
  -- "\z"), yet the REPL took `x = "abc` as unfinished input: it waited for
  -- more, glued the next line on, and that line was lost in the error it
  -- made — a `.tables` or `.quit` typed next was never run.
  it("says so at once, and runs the next line on its own", function()
    local out, err, code = H.sh(H.runnel_bin, 'x = "abc\n.quit\nprint("not reached")\n')
    assert.equal(0, code, err)
    assert.equal([[error: stdin:1: unfinished string near '"abc'
]], out)
  end)

  it("still goes on after a backslash or \\z at the end of the line, and in a long string", function()
    local out, err, code = H.sh(H.runnel_bin,
      'x = "ab\\\ncd"\nprint(#x)\ny = "ab\\z\n   cd"\nprint(y)\nz = [[a\nb]]\nprint(#z)\nw = "a\\\\\nprint(1)\n')
    assert.equal(0, code, err)
    assert.equal([[5
abcd
3
error: stdin:1: unfinished string near '"a\'
1
]], out)
  end)
end)

describe("the REPL's .watch", function()
  -- `.watch nosuch` (a typo, or a relation not declared) was taken: from
  -- then on no relation printed its changes, and nothing said why.
  it("refuses a name that is no relation, and keeps what it watched", function()
    local out, err, code = H.sh(H.runnel_bin, table.concat({
      't = p:table("t", { {"id","int"}, key = "id" })',
      ".watch tt",
      ".watch t nosuch",
      "t:insert{ id = 1 }",
      ".watch",
    }, "\n") .. "\n")
    assert.equal(0, code, err)
    assert.equal([[error: no relation "tt" to watch (known: t)
error: no relation "nosuch" to watch (known: t)
t · group 1
 row id | verb   | id
--------+--------+----
      1 | INSERT |  1
watch on
]], out)
  end)
end)

describe("the REPL at the end of its input", function()
  -- Input that ended inside a statement (a script piped in and cut short,
  -- or Ctrl-D at the ">>" prompt) was dropped without a word, exit 0.
  it("says the statement left unfinished was not run", function()
    local out, err, code = H.sh(H.runnel_bin, 'print("a")\nfor i = 1, 3 do\nprint(i)\n')
    assert.equal(0, code, err)
    assert.equal("a\nerror: stdin:2: 'end' expected (to close 'for' at line 1) near <eof> "
                 .. "(input ended inside a statement)\n", out)
  end)
end)

describe("the REPL's word on a group an error rolled back", function()
  -- A change that failed past its checks (in a map, an aggregate's
  -- function, a sink) was counted among the changes of the group, so the
  -- REPL said "2 earlier changes discarded" after one earlier change.
  it("counts the changes before the one that failed", function()
    local out, err, code = H.sh(H.runnel_bin, table.concat({
      't = p:table("t", { {"id","int"}, key = "id" })',
      'm = t:map(function(r) if r.id == 3 then error("no 3") end return r end, { {"id","int"}, key = "id" })',
      ".watch off",
      "p:begin()",
      "t:insert{ id = 1 }",
      "t:insert{ id = 3 }",
      "p:in_group(), t:count(), p:stats().changes",
    }, "\n") .. "\n")
    assert.equal(0, code, err)
    assert.equal("watch off\nerror: stdin:1: t.map: map: stdin:1: no 3  (group rolled back: 1 earlier change discarded)\n"
                 .. "false\n0\n1\n", out)
  end)
end)
