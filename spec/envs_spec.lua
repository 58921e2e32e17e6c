-- One LMDB environment per state in a process (core/envs.h): attaches
-- without a writer share one; a writer in the same process is refused
-- while they are open, and not refused by handles already garbage.
local runnel = require("runnel")
local helper = require("spec.helper")

describe("one environment per state in a process", function()
  local dir
  before_each(function()
    dir = helper.tmpdir()
    local p = assert(runnel.open(dir))
    local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
    t:insert{ k = 1, v = "a" }
    t:insert{ k = 2, v = "b" }
    p:close()
  end)
  after_each(function() helper.cleanup() end)

  it("two attaches read on after the first is closed", function()
    local a1 = runnel.attach(dir, "t")
    local a2 = runnel.attach(dir, "t")
    a1:close()
    assert.are.equal(2, a2:count())
    assert.are.equal("b", a2:get(2).v)
    a2:close()
  end)

  it("refuses a writer while an attach is open, and opens once it is closed", function()
    local a = runnel.attach(dir, "t")
    local err = helper.error_of(runnel.open, dir)
    assert.matches("is open for reading in this process", err, 1, true)
    assert.are.equal(2, a:count())
    a:close()
    p = assert(runnel.open(dir))
    p:close()
  end)

  it("is not refused by an attach that is only garbage", function()
    runnel.attach(dir, "t"):count()
    local p = assert(runnel.open(dir))
    local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
    t:insert{ k = 3, v = "c" }
    local a = runnel.attach(dir, "t") -- reads through the pipeline now
    assert.are.equal(3, a:count())
    p:close()
  end)
end)
