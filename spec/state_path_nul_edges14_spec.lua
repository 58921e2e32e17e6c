-- A state path holding a NUL byte is refused by runnel.open and
-- runnel.inspect, as names are: C would cut it at the NUL and open (and
-- create) or read another state. Before, both took the cut path silently.
local runnel = require "runnel"
local H = require "helper"

describe("a state path with a NUL byte", function()
  after_each(H.cleanup)

  it("is refused by runnel.open, and nothing is created at the cut path", function()
    local base = H.tmpdir() .. "/state"
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() local p = runnel.open(base .. "\0ignored"); return p end)
    assert.is_false(ok)
    assert.equal(('spec/state_path_nul_edges14_spec.lua:%d: open: the path "%s\\0ignored" holds a NUL byte '
                  .. "(paths hold none)"):format(line, base), err)
    assert.equal(('open: the path "%s\\0other" holds a NUL byte (paths hold none)'):format(base),
                 H.error_of(runnel.open, { path = base .. "\0other" }))
    assert.is_nil(io.open(base .. "/data.mdb"))
  end)

  it("is refused by runnel.inspect, rather than reading the state at the cut path", function()
    local base = H.tmpdir() .. "/state"
    runnel.open(base):close()
    assert.equal(('inspect: the path "%s\\0zz" holds a NUL byte (paths hold none)'):format(base),
                 H.error_of(runnel.inspect, base .. "\0zz"))
    assert.equal(0, runnel.inspect(base).seq)
  end)
end)
