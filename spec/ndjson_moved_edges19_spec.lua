-- An NDJSON sink whose file is moved or removed while the state is open
-- (logrotate's default rename-and-create, a `mv`, an `rm`; core/ndjson.c,
-- "A file moved or removed"): before a group is written the sink compares
-- the path with the file it has open (device and inode) and, when they
-- differ, syncs the old file, opens the path again and records its new
-- position at once, so each line goes out once: the groups before in the
-- moved file, the later ones in the new one, across crashes too. Before,
-- every later line went into the moved (or deleted) file and was lost.
local runnel = require "runnel"
local H = require "helper"

local read = H.text_of

local ks = H.ndjson_ks

describe("an NDJSON sink whose file was moved or removed while open", function()
  local dir, log, state, open
  before_each(function() dir, log, state, open = H.ndjson_case() end)
  after_each(H.cleanup)

  it("writes the later groups to the path again after a rename", function()
    local p, s = open()
    for k = 1, 2 do s:insert{ k = k, pad = "x" } end
    assert(os.rename(log, log .. ".1"))
    for k = 3, 4 do s:insert{ k = k, pad = "x" } end
    p:close()
    assert.equal("1,2", ks(read(log .. ".1")))
    assert.equal("3,4", ks(read(log)))
    p, s = open() -- nothing waits: nothing written again
    s:insert{ k = 5, pad = "x" }
    p:close()
    assert.equal("1,2", ks(read(log .. ".1")))
    assert.equal("3,4,5", ks(read(log)))
  end)

  it("makes the file again after it was removed, with sync = false too", function()
    for _, sync in ipairs{ true, false } do
      os.execute("rm -rf " .. state .. " " .. log)
      local p, s = open(sync)
      s:insert{ k = 1, pad = "x" }
      p:flush()
      assert(os.remove(log))
      s:insert{ k = 2, pad = "x" }
      p:flush()
      s:insert{ k = 3, pad = "x" }
      p:close()
      assert.equal("2,3", ks(read(log)), "sync = " .. tostring(sync))
    end
  end)

  it("after a rename then a crash, finds the group written to the new file and writes it once", function()
    local script = dir .. "/child.lua"
    H.write(script, ([[
local runnel = require "runnel"
local p = runnel.open{ path = %q }
local s = p:stream("s", { {"k","int"}, {"pad","string"} })
s:sink(runnel.ndjson(%q, { verb = false }))
s:insert{ k = 1, pad = "y" }                     -- a short file: its end is before the next line's
assert(os.rename(%q, %q))
s:insert{ k = 2, pad = string.rep("x", 200) }    -- in the new file, its mark not yet recorded
os.exit(0, false)                                -- a crash
]]):format(state, log, log, log .. ".1"))
    local _, err, code = H.sh(("%s run %s"):format(H.runnel_bin, script))
    assert.equal("", err)
    assert.equal(0, code)
    assert.equal("1", ks(read(log .. ".1")))
    assert.equal("2", ks(read(log)))
    local p, s = open()
    s:insert{ k = 3, pad = "x" }
    p:close()
    assert.equal("1", ks(read(log .. ".1")))
    assert.equal("2,3", ks(read(log)))
  end)
end)
