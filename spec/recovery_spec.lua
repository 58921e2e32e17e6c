-- Damaged and odd states: refused with a sentence, never a crash (issue 11, recovery chores).
local H = require "helper"
local runnel = require "runnel"

local bin = H.runnel_bin

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function size_of(path)
  local f = assert(io.open(path))
  local n = f:seek("end")
  f:close()
  return n
end

describe("a damaged state", function()
  after_each(H.cleanup)

  it("is refused when data.mdb was truncated, by open, attach and inspect alike, without SIGBUS", function()
    local dir = H.tmpdir()
    local state = dir .. "/st"
    local p = runnel.open(state)
    local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
    t:sink(runnel.store("s"))
    p:begin()
    for i = 1, 2000 do t:insert{ k = i, v = ("x"):rep(100) } end
    p:commit()
    p:close()
    local full = size_of(state .. "/data.mdb")
    assert(os.execute(("truncate -s %d %s/data.mdb"):format(full // 2, state)))
    local want = ("state damaged: %s/data.mdb is truncated (%d bytes; its last transaction needs %d)")
                 :format(state, full // 2, full)
    write(dir .. "/open.lua", [[
local runnel = require "runnel"
local ok, err = pcall(runnel.open, arg[1])
io.write(tostring(err))
]])
    write(dir .. "/attach.lua", [[
local runnel = require "runnel"
local ok, err = pcall(runnel.attach, arg[1], "s")
io.write(tostring(err))
]])
    local out, err, code = H.sh(("lua5.4 %s/open.lua %s"):format(dir, state))
    assert.equal(0, code, err)
    assert.equal(want, out)
    out, err, code = H.sh(("lua5.4 %s/attach.lua %s"):format(dir, state))
    assert.equal(0, code, err)
    assert.equal(want, out)
    out, err, code = H.sh(("%s inspect %s"):format(bin, state))
    assert.equal(1, code)
    assert.equal("runnel: " .. want .. "\n", err)
  end)
end)

describe("runnel.open", function()
  after_each(H.cleanup)

  it("starts a tiny map_size at a sane minimum, and the map still grows", function()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir .. "/st", map_size = 4096 }
    local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
    p:begin()
    for i = 1, 5000 do t:insert{ k = i, v = ("x"):rep(200) } end
    p:commit()
    assert.equal(5000, t:count())
    p:close()
  end)
end)
