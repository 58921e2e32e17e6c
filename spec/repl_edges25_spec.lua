-- The REPL browsing a state another process writes: the catalogue is read
-- again when the state changed (runnel.state_version), on the very next
-- line, and not otherwise.
local H = require "helper"

local bin = H.runnel_bin

describe("the REPL browsing a state another process writes, line after line", function()
  after_each(H.cleanup)

  -- Before each chunk the catalogue was read at most every quarter
  -- second: piped lines come faster, so a relation declared by the line
  -- before was unknown to the next. Each read also opened the state with
  -- runnel.inspect, once per command even when nothing had changed.
  it("sees a relation declared meanwhile on the next line, and reads the catalogue only when the state changed", function()
    local dir = H.browsed_state()
    local out, err, code = H.sh(("%s repl %s/st"):format(bin, dir), table.concat({
      "alpha:count()",
      "reads = 0",
      "real_inspect = runnel.inspect",
      "runnel.inspect = function(...) reads = reads + 1; local r = real_inspect(...); return r end",
      "x = 1",
      "x = 2",
      ".tables",
      "reads",
      ("assert(os.execute(%q))"):format(("%s run %s/more.lua %s/st"):format(bin, dir, dir)),
      "p:relation('beta') ~= nil, beta and beta:count(), alpha:count()",
      "reads",
    }, "\n") .. "\n")
    assert.equal(0, code, err)
    assert.equal([[1
 relation | kind  | rows
----------+-------+------
 alpha    | table |    1
0
true
"exit"
0
true
1
2
1
]], out)
  end)
end)

describe("runnel.state_version", function()
  after_each(H.cleanup)

  it("changes with each commit and declaration, and only then", function()
    local runnel = require "runnel"
    local dir = H.tmpdir()
    local p = runnel.open(dir)
    local t = p:table("t", { {"id","int"}, key = "id" })
    local v1 = runnel.state_version(dir)
    assert.equal(v1, runnel.state_version(dir))
    t:insert{ id = 1 }
    local v2 = runnel.state_version(dir)
    assert.are_not.equal(v1, v2)
    p:table("u", { {"id","int"}, key = "id" })
    assert.are_not.equal(v2, runnel.state_version(dir))
    p:close()
    assert.equal("state_version: " .. dir .. "/none: not a runnel state (no data.mdb)",
                 H.error_of(runnel.state_version, dir .. "/none"))
  end)
end)
