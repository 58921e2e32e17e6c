-- An NDJSON path sink through a symbolic link whose link is pointed at
-- another file while the sink is open (a "current" link moved to the next
-- day's log), then a crash. The sink's key in the state is the path the
-- link resolved to at the declaration (realpath), and a link pointed at
-- another file since is another sink (ndjson.c, "A file renamed while the
-- state was closed"). But before each run the sink compared the link, not
-- the file it resolved to, with the file it had open, and opened the link
-- again: it went on writing the new target under the old target's key, its
-- mark naming a file in another directory. After a crash the group it
-- left waiting is under the old key while its lines are in the new
-- target: declaring the old file again wrote the group a second time, and
-- a group the crash tore left a torn line the new target's sink refused
-- as another writer's. The sink now opens the resolved path again (a
-- rotation of the target is still followed).
local H = require "helper"

local ks = H.ndjson_ks
local read = H.text_of

describe("an NDJSON path sink through a link pointed elsewhere while it is open", function()
  local dir, tdir, odir, link, target, other, state
  before_each(function()
    dir, tdir, odir = H.tmpdir(), H.tmpdir(), H.tmpdir()
    link, target, other, state = dir .. "/current.ndjson", tdir .. "/out.ndjson", odir .. "/next.ndjson", dir .. "/st"
    H.write(target, "")
    H.sh(("ln -s %s %s"):format(target, link))
  end)
  after_each(H.cleanup)

  local function open(path) return H.ndjson_stream(state, path, { verb = false }) end

  -- A child inserts 1 and 2 through the link, runs between (a shell
  -- command), inserts 3 and crashes: group 3's mark is not recorded.
  local function crash_with(between)
    H.run_script(dir .. "/child.lua", ([[
local runnel = require "runnel"
local p = runnel.open{ path = %q }
local s = p:stream("s", { {"k","int"}, {"pad","string"} })
s:sink(runnel.ndjson(%q, { verb = false }))
for k = 1, 2 do s:insert{ k = k, pad = "x" } end
assert(os.execute(%q))
s:insert{ k = 3, pad = "xxxxxxxx" }
os.exit(0, false)
]]):format(state, link, between))
  end

  local function verify()
    local out, _, code = H.sh(("%s verify %s"):format(H.runnel_bin, state))
    assert.equal(0, code, out)
    return out
  end

  it("declared again by the file it resolved to, the waiting group is not written twice", function()
    crash_with(("ln -sfn %s %s"):format(other, link))
    local p, s = open(target)
    s:insert{ k = 4, pad = "x" }
    p:close()
    -- before: target "1,2,3,4" and other "3", group 3 in both files
    assert.equal("1,2,3,4", ks(read(target)))
    assert.equal("", ks(read(other)))
    verify()
  end)

  it("a group the crash tore does not refuse the link's new sink", function()
    crash_with(("ln -sfn %s %s"):format(other, link))
    for _, f in ipairs{ target, other } do -- group 3's line cut short, in whichever file it went to
      local text = read(f)
      if text:find('"k":3', 1, true) then H.write(f, text:sub(1, #text - 5)) end
    end
    local ok, err = pcall(function()
      local p, s = open(link)
      s:insert{ k = 4, pad = "x" }
      p:close()
    end)
    assert(ok, err) -- before: "the file ends in an incomplete line ... that this state did not write"
    assert.equal("4", ks(read(other)))
    local p = open(target) -- the old file's sink mends its torn group
    p:close()
    assert.equal("1,2,3", ks(read(target)))
    verify()
  end)

  it("its target rotated while open is still followed: the group after the rotation is in the new file", function()
    crash_with(("mv %s %s.1"):format(target, target))
    assert.equal("1,2", ks(read(target .. ".1")))
    assert.equal("3", ks(read(target)))
    local p, s = open(link)
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("3,4", ks(read(target)))
    assert.equal("1,2", ks(read(target .. ".1")))
    verify()
  end)
end)
