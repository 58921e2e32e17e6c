-- rn_inspect wrote a relation's columns ("id int key, name string, …")
-- into a fixed 4096-byte buffer and cut the text there without a word:
-- of a table of 300 columns runnel inspect and runnel.inspect listed 136,
-- the last typed "stri", and the REPL browsing the state (which reads the
-- schema from that text) showed .schema and the rows with 136 columns. The
-- text is now whole, long defaults included.
local H = require "helper"
local runnel = require "runnel"

local R = H.runnel_bin

local function make_state(dir)
  local p = runnel.open(dir)
  local cols = { key = "column_number_1", { "column_number_1", "int" } }
  for i = 2, 300 do cols[#cols + 1] = { "column_number_" .. i, "string", null = true } end
  cols[#cols + 1] = { "long_default", "string", default = ("d"):rep(5000) }
  local t = p:table("wide", cols)
  t:insert{ column_number_1 = 1, column_number_300 = "last" }
  p:close()
end

describe("runnel inspect of a relation whose columns' text is longer than 4 KiB", function()
  after_each(H.cleanup)

  it("lists every column, in runnel.inspect, runnel inspect and the REPL's browse", function()
    local dir = H.tmpdir()
    make_state(dir .. "/st")
    local want = ", column_number_300 string null, long_default string = \"" .. ("d"):rep(5000) .. "\""
    local columns = runnel.inspect(dir .. "/st").relations[1].columns
    assert.are.equal("column_number_1 int key, column_number_2 string null, ", columns:sub(1, 54))
    assert.are.equal(want, columns:sub(-#want))
    local out, err, code = H.sh(("%s inspect %s/st"):format(R, dir))
    assert.are.same({ "", 0 }, { err, code })
    assert.is_truthy(out:find(want .. "\n", 1, true))
    out, err, code = H.sh(("%s repl %s/st"):format(R, dir), "print(#p:relation('wide'):schema().columns)\n"
      .. "print(p:relation('wide'):schema().columns[300].type)\nprint(p:relation('wide'):get(1).column_number_300)\n")
    assert.are.same({ "301\nstring\nlast\n", "", 0 }, { out, err, code })
  end)
end)
