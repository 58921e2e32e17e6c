-- Grids (runnel.grid: runnel query, runnel.format, runnel.watch, the REPL)
-- of strings holding control characters: a newline broke the grid's rows
-- and an escape sequence (ESC [ 31 m, ESC ] … BEL) went to the terminal
-- as it was, recolouring or retitling it. Cells show them escaped, as Lua
-- writes them.
local runnel = require "runnel"
local H = require "helper"

describe("a grid of strings holding control characters", function()
  after_each(H.cleanup)

  it("shows them escaped, one line per row, aligned", function()
    local g = runnel.grid({ "s", "n" }, { { "a\nb\tc\rd", "1" }, { "\27[31mred\27[0m", "2" }, { "\0\127\7", "3" },
                                         { "ok ünï", "4" }, { "c1 \u{9b}31m", "5" } }, { false, true })
    -- before: "a\nb\tc\rd" split the first row in two, the escapes reached the terminal
    assert.equal(table.concat({
      " s                | n",
      "------------------+---",
      " a\\nb\\tc\\rd       | 1",
      " \\27[31mred\\27[0m | 2",
      " \\0\\127\\7         | 3",
      " ok ünï           | 4",
      " c1 \\u{9b}31m     | 5" }, "\n"), g)
  end)

  it("in runnel query's grid too; ndjson and csv keep the value as it is", function()
    local dir = H.tmpdir() .. "/st"
    local p = runnel.open{ path = dir, notes = false }
    p:table("t", { {"id","int"}, {"name","string"}, key = "id" }):insert{ id = 1, name = "a\nb\27[2J" }
    p:close()
    local out = H.sh(("%s query %s t"):format(H.runnel_bin, dir))
    assert.equal(" id | name\n----+------------\n  1 | a\\nb\\27[2J\n(1 row)\n", out)
    out = H.sh(("%s query %s t --format ndjson"):format(H.runnel_bin, dir))
    assert.equal('{"id":1,"name":"a\\nb\\u001B[2J"}\n', out) -- as an NDJSON sink writes it (query_edges22)
  end)
end)
