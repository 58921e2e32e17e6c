-- runnel inspect STATE_DIR, including on a state another process is writing.
local H = require "helper"

local bin = H.runnel_bin

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

local function wait_for(path)
  for _ = 1, 600 do -- up to a minute: a slow machine, not a timing assertion
    if exists(path) then return true end
    os.execute("sleep 0.1")
  end
  return false
end

describe("runnel inspect", function()
  after_each(H.cleanup)

  it("lists relations, kinds, counts, schemas and the last group", function()
    local dir = H.tmpdir()
    local script = dir .. "/make.lua"
    write(script, [[
local runnel = require "runnel"
local p = runnel.open(arg[1])
local t = p:table("players", { {"id","int"}, {"name","string"}, {"team","int", null = true},
                               {"score","int", default = 0}, key = "id" })
p:stream("ev", { {"k","string"} })
for i = 1, 3 do t:insert{ id = i, name = "p" .. i } end
p:close()
]])
    local _, err, code = H.sh(("%s run %s %s/state"):format(bin, script, dir))
    assert.equal("", err)
    assert.equal(0, code)
    local out = H.sh(("%s inspect %s/state"):format(bin, dir))
    assert.matches("last group: 3\n", out, 1, true)
    assert.matches(" players  | table  |    3 |       4 | id int key, name string, team int null, score int = 0\n", out, 1, true)
    assert.matches(" ev       | stream |      |       1 | k string\n", out, 1, true)
    assert.matches("(2 relations)\nstate entries: ev 0, players 3\n", out, 1, true)
  end)

  it("shows live and free space separately, in bytes and pages, adding up to the used", function()
    local dir = H.tmpdir()
    local script = dir .. "/make.lua"
    write(script, [[
local runnel = require "runnel"
local p = runnel.open(arg[1])
local t = p:table("t", { {"id","int"}, {"s","string"}, key = "id" })
for round = 1, 3 do
  p:begin() for i = 1, 500 do t:upsert{ id = i, s = ("x"):rep(100 * round) } end p:commit()
end
p:close()
]])
    local _, err = H.sh(("%s run %s %s/state"):format(bin, script, dir))
    assert.equal("", err)
    local out = H.sh(("%s inspect %s/state"):format(bin, dir))
    local live, lp, free, fp, used = out:match("space: (%d+) bytes live %((%d+) pages%), (%d+) bytes free %((%d+) pages%) of the (%d+) used\n")
    assert.truthy(live, out)
    live, lp, free, fp, used = tonumber(live), tonumber(lp), tonumber(free), tonumber(fp), tonumber(used)
    assert.equal(used, live + free)
    assert.is_true(fp > 0 and lp > 0) -- rewritten rows left pages free
    assert.equal(live // lp, free // fp)
    assert.matches("lmdb: ", out, 1, true) -- the old line stays
  end)

  it("reads a state another process is writing without disturbing it", function()
    local dir = H.tmpdir()
    local writer = dir .. "/writer.lua"
    write(writer, [[
local runnel = require "runnel"
local dir = arg[1]
local p = runnel.open(dir .. "/state")
local t = p:table("counter", { {"n","int"}, key = "n" })
local function exists(path) local f = io.open(path) if f then f:close() end return f ~= nil end
local n = 0
while n < 200000 and not exists(dir .. "/stop") do
  n = n + 1
  t:insert{ n = n }
  if n == 50 then io.open(dir .. "/started", "w"):close() end
end
local f = io.open(dir .. "/done.tmp", "w")
f:write(("%d %d %d"):format(n, t:count(), p:seq()))
f:close()
p:close()
os.rename(dir .. "/done.tmp", dir .. "/done") -- whole, or not there at all
]])
    os.execute(("%s run %s %s >/dev/null 2>&1 &"):format(bin, writer, dir))
    assert.is_true(wait_for(dir .. "/started"))
    local out, err, code = H.sh(("%s inspect %s/state"):format(bin, dir))
    write(dir .. "/stop", "")
    assert.equal("", err)
    assert.equal(0, code)
    local seq = tonumber(out:match("last group: (%d+)"))
    assert.is_true(seq >= 50)
    local rows = tonumber(out:match(" counter  | table | +(%d+) |"))
    assert.equal(seq, rows) -- one consistent snapshot: a row per group, no half group
    assert.is_true(wait_for(dir .. "/done"))
    local f = io.open(dir .. "/done")
    local n, count, last = f:read("n", "n", "n")
    f:close()
    assert.equal(n, count)     -- every insert the writer made is there
    assert.equal(n, last)      -- one group each, none lost
    assert.is_true(n >= seq)
  end)

  it("says when a directory is not a state", function()
    local dir = H.tmpdir()
    local _, err, code = H.sh(("%s inspect %s"):format(bin, dir))
    assert.equal(1, code)
    assert.equal(("runnel: %s: not a runnel state (no data.mdb)\n"):format(dir), err)
  end)
end)
