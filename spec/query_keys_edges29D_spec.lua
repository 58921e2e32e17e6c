-- runnel query STATE REL KEY split every KEY at its commas, so a row whose
-- key holds a comma could not be read by key at all: a one-column key
-- "a,b" was refused as "2 parts", and a two-column key's part "x,y" had no
-- way to be written. A one-column key is now the whole text; a part of a
-- longer key that holds a comma is written in double quotes, a quote in it
-- doubled, as --format csv writes the cell.
local H = require "helper"
local runnel = require "runnel"

local R = H.runnel_bin

local function make_state(dir)
  local p = runnel.open(dir)
  local names = p:table("names", { {"k","string"}, {"v","int"}, key = "k" })
  local pair = p:table("pair", { {"a","string"}, {"b","int"}, {"v","int"}, key = {"a","b"} })
  names:insert{ k = "a,b", v = 1 }
  names:insert{ k = '"q"', v = 2 }
  names:insert{ k = "a", v = 3 }
  pair:insert{ a = "x,y", b = 1, v = 4 }
  pair:insert{ a = 'say "hi", then', b = 2, v = 5 }
  pair:insert{ a = "eu", b = 7, v = 6 }
  p:close()
end

local function query(st, ...)
  local args = {}
  for i, a in ipairs{ ... } do args[i] = "'" .. a:gsub("'", "'\\''") .. "'" end
  return H.sh(("%s query %s %s"):format(R, st, table.concat(args, " ")))
end

describe("runnel query by a key holding a comma", function()
  local dir, st
  before_each(function()
    dir = H.tmpdir()
    st = dir .. "/st"
    make_state(st)
  end)
  after_each(H.cleanup)

  it("reads a one-column key as the whole text, commas and quotes too", function()
    assert.are.same({ "k,v\n\"a,b\",1\n", "", 0 }, { query(st, "names", "a,b", "--format", "csv") })
    assert.are.same({ "k,v\n\"\"\"q\"\"\",2\n", "", 0 }, { query(st, "names", '"q"', "--format", "csv") })
    assert.are.same({ "k,v\na,3\n", "", 0 }, { query(st, "names", "a", "--format", "csv") })
  end)

  it("reads a part of a two-column key written in double quotes, a quote in it doubled", function()
    assert.are.same({ "a,b,v\n\"x,y\",1,4\neu,7,6\n", "", 0 },
      { query(st, "pair", '"x,y",1', "eu,7", "--format", "csv") })
    assert.are.same({ "a,b,v\n\"say \"\"hi\"\", then\",2,5\n", "", 0 },
      { query(st, "pair", '"say ""hi"", then",2', "--format", "csv") })
    assert.are.same({ "a,b,v\neu,7,6\n", "", 0 }, { query(st, "pair", '"eu","7"', "--format", "csv") })
  end)

  it("says how to write such a part when the parts do not fit", function()
    assert.are.same({ "", 'runnel: query: key "x,y,1" has 3 parts; the key is 2 columns (a, b), parts separated '
      .. 'by commas (a part holding a comma in double quotes, "a,b")\n', 1 }, { query(st, "pair", "x,y,1") })
    for _, bad in ipairs{ '"x,y', '"x,y"z,1' } do
      assert.are.same({ "", ('runnel: query: key %q has a quote not closed, or text after one: a part holding a '
        .. 'comma is written in double quotes, "a,b", a quote in it doubled\n'):format(bad), 1 },
        { query(st, "pair", bad) })
    end
  end)
end)
