-- An NDJSON path sink whose file was renamed while the state was closed
-- after a crash (logrotate's rename-and-create while the process was
-- down): the groups the crash left unconfirmed went into the file now
-- renamed. At open the sink looks for them in the renamed file beside the
-- path (same directory, its name the path's name and a suffix: out.ndjson.1,
-- out.ndjson-20261205), at the mark's position, byte for byte; the groups
-- found there are not written again into the new file. Before, every
-- unconfirmed group was written again into the new file: twice in all.
local runnel = require "runnel"
local H = require "helper"

local ks = H.ndjson_ks
local read = H.text_of

describe("an NDJSON path sink whose file was renamed while the state was closed", function()
  local dir, log, state, open
  before_each(function() dir, log, state, open = H.ndjson_case() end)
  after_each(H.cleanup)

  local function crash_after(n) H.ndjson_crash(dir, state, log, 1, n) end

  it("finds the unconfirmed groups in the renamed file and does not write them again", function()
    crash_after(3)
    assert.equal("1,2,3", ks(read(log)))
    assert(os.rename(log, log .. ".1"))
    H.write(log .. ".2", '{"k":9,"pad":"older rotation"}\n')
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("1,2,3", ks(read(log .. ".1")))
    assert.equal("4", ks(read(log)))
    assert.equal("9", ks(read(log .. ".2")))
  end)

  it("cuts a group the crash left torn in the renamed file and writes it whole to the new one", function()
    crash_after(3)
    local text = read(log)
    H.write(log, text:sub(1, #text - 5))        -- group 3's line cut short
    assert(os.rename(log, log .. ".1"))
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("1,2", ks(read(log .. ".1")))
    assert.equal(text:match("[^\n]*\n[^\n]*\n"), read(log .. ".1"))
    assert.equal("3,4", ks(read(log)))
  end)

  it("after a copytruncate, finds a group in the cut file, not in the copy beside it", function()
    local script = dir .. "/child.lua"
    H.write(script, ([[
local runnel = require "runnel"
local p = runnel.open{ path = %q }
local s = p:stream("s", { {"k","int"}, {"pad","string"} })
s:sink(runnel.ndjson(%q, { verb = false }))
for k = 1, 2 do s:insert{ k = k, pad = "x" } end
local f = io.open(%q, "rb"); local text = f:read("a"); f:close()
f = io.open(%q, "wb"); f:write(text); f:close()  -- copytruncate: the copy,
f = io.open(%q, "w"); f:close()                   -- then the cut
s:insert{ k = 3, pad = "x" }                      -- in the cut file, its mark not recorded
os.exit(0, false)
]]):format(state, log, log, log .. ".1", log))
    local _, err, code = H.sh(("%s run %s"):format(H.runnel_bin, script))
    assert.equal("", err)
    assert.equal(0, code)
    assert.equal("3", ks(read(log)))
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("1,2", ks(read(log .. ".1")))
    assert.equal("3,4", ks(read(log)))
  end)

  it("leaves alone a file beside the path that a live sink writes", function()
    crash_after(3)
    assert(os.rename(log, log .. ".1"))
    local q = runnel.open()
    local o = q:stream("o", { {"k","int"}, {"pad","string"} })
    o:sink(runnel.ndjson(log .. ".1", { verb = false }))   -- another state's sink holds it now
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    q:close()
    assert.equal("1,2,3", ks(read(log .. ".1")))
    assert.equal("3,4", ks(read(log)))
  end)

  it("writes them again when no renamed file holds them (removed, or moved to another directory)", function()
    crash_after(3)
    H.sh(("mkdir %s/old"):format(dir))
    assert(os.rename(log, dir .. "/old/elsewhere")) -- since 0.38 a file renamed beside the path is found by
                                                    -- its identity (ndjson_identity_edges26)
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("3,4", ks(read(log)))
  end)
end)
