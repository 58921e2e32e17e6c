-- The edges of one LMDB environment per state in a process (core/envs.h)
-- from Lua: an attach held while runnel.open, an attach inside the
-- callbacks of the pipeline writing the state, a lookup reading the
-- pipeline's own state, handles left when the pipeline closes.
local runnel = require("runnel")
local H = require("spec.helper")

local cols = { {"k","int"}, {"v","string"}, key = "k" }

local function state(dir)
  local p = assert(runnel.open(dir))
  local t = p:table("t", cols)
  t:insert{ k = 1, v = "a" }
  t:insert{ k = 2, v = "b" }
  p:close()
end

describe("runnel.open beside attaches of its state", function()
  local dir
  before_each(function() dir = H.tmpdir(); state(dir) end)
  after_each(function()
    held = nil -- luacheck: ignore
    collectgarbage()
    H.cleanup()
  end)

  it("is refused while one is held (a global) at the caller's line, and opens once it is closed", function()
    held = runnel.attach(dir, "t") -- luacheck: ignore
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() local p = runnel.open(dir); return p end)
    assert.is_false(ok)
    assert.are.equal(("spec/envs_edges_spec.lua:%d: state %s is open for reading in this process (runnel.attach, "
      .. "a lookup's source); close those first, or open the pipeline first: an attach then reads through it")
      :format(line, dir), err)
    assert.are.equal(2, held:count())
    held:close()
    local p = assert(runnel.open(dir))
    p:close()
  end)

  it("is refused while a lookup of another pipeline reads it, and opens once that pipeline closed", function()
    local q = runnel.open()
    q:lookup("names", { {"k","int"}, {"v","string"}, key = "k", source = runnel.attach(dir, "t") })
    assert.matches("is open for reading in this process", H.error_of(runnel.open, dir), 1, true)
    q:close()
    local p = assert(runnel.open(dir))
    p:close()
  end)
end)

describe("an attach of the state a pipeline of this thread writes", function()
  local dir
  before_each(function() dir = H.tmpdir(); state(dir) end)
  after_each(function() collectgarbage(); H.cleanup() end)

  it("made inside the pipeline's sink reads the groups LMDB holds, and is closed there", function()
    local p = assert(runnel.open(dir))
    local t = p:table("t", cols)
    local counts = {}
    t:sink(function(verb, row)
      local a = runnel.attach(dir, "t")
      counts[#counts + 1] = a:count()
      a:close()
    end)
    t:insert{ k = 3, v = "c" }
    t:insert{ k = 4, v = "d" }
    assert.are.same({ 2, 3 }, counts)
    p:close()
    assert.are.equal(4, runnel.attach(dir, "t"):count())
  end)

  it("as the pipeline's own lookup source reads what it committed", function()
    local p = assert(runnel.open(dir))
    local t = p:table("t", cols)
    local names = p:lookup("names", { {"k","int"}, {"v","string"}, key = "k", source = runnel.attach(dir, "t") })
    local ev = p:stream("ev", { {"k","int"} })
    local out = H.record(ev:join(names, { on = "k", kind = "left" }))
    ev:insert{ k = 2 }
    t:insert{ k = 5, v = "e" }
    ev:insert{ k = 5 }
    assert.are.equal("b", out[1][3].v)
    assert.are.equal("e", out[2][3].v)
    p:close()
  end)

  it("held after the pipeline closed says so, closes, and does not refuse the next writer", function()
    local p = assert(runnel.open(dir))
    local a = runnel.attach(dir, "t")
    assert.are.equal(2, a:count())
    p:close()
    assert.matches("the pipeline whose state it read was closed", H.error_of(a.count, a), 1, true)
    local p2 = assert(runnel.open(dir)) -- a reads through no environment of its own
    assert.matches("the pipeline whose state it read was closed", H.error_of(a.count, a), 1, true)
    a:close()
    a:close()
    p2:close()
  end)
end)

describe("runnel.attach of no state", function()
  after_each(H.cleanup)

  it("names the attach and says what is missing", function()
    local dir = H.tmpdir()
    assert.are.equal(("attach %s/nope: No such file or directory"):format(dir),
                     H.error_of(function() local a = runnel.attach(dir .. "/nope", "t"); return a end))
    assert.are.equal(("attach %s: not a runnel state (no data.mdb)"):format(dir),
                     H.error_of(function() local a = runnel.attach(dir, "t"); return a end))
  end)
end)

describe("a script's handles at its end", function()
  after_each(H.cleanup)

  it("are closed whatever the order Lua collects them in: pipeline, attaches through it, a lookup's", function()
    local dir = H.tmpdir()
    state(dir)
    local script = dir .. "/end.lua"
    H.write(script, ([[
local runnel = require "runnel"
other = runnel.attach(%q, "t")
other:close()
p = runnel.open(%q)
t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
a = runnel.attach(%q, "t")
q = runnel.open()
q:lookup("names", { {"k","int"}, {"v","string"}, key = "k", source = runnel.attach(%q, "t") })
t:insert{ k = 3, v = "c" }
print(a:count())
]]):format(dir, dir, dir, dir))
    local out, err, code = H.sh(("%s run %s"):format(H.runnel_bin, script))
    assert.are.equal("", err)
    assert.are.equal(0, code)
    assert.are.equal("3\n", out)
  end)
end)

describe("the CLI on a state", function()
  after_each(H.cleanup)

  it("runnel inspect reports the state's map, not its reader's (it said \"of a 1048576.0 MiB map\")", function()
    local dir = H.tmpdir()
    state(dir)
    local out, err, code = H.sh(("%s inspect %s"):format(H.runnel_bin, dir))
    assert.are.equal("", err)
    assert.are.equal(0, code)
    assert.matches("used of a 64.0 MiB map", out, 1, true)
  end)

  it("runnel snapshot into a directory a killed copy left its file in makes the copy beside it", function()
    local dir, dest = H.tmpdir(), H.tmpdir()
    state(dir)
    H.write(dest .. "/data.mdb.copy-1-0", "partial")
    local _, err, code = H.sh(("%s snapshot %s %s"):format(H.runnel_bin, dir, dest))
    assert.are.equal("", err)
    assert.are.equal(0, code)
    assert.are.equal(2, runnel.attach(dest, "t"):count())
    assert.are.equal("partial", H.read(dest .. "/data.mdb.copy-1-0"))
  end)
end)
