-- Review of 0.38's "of:" record and the declaration that keeps the
-- recorded position while groups wait (ndjson.c, place_sink and
-- rn_ndjson_sink_path).
local H = require "helper"

local ks = H.ndjson_ks
local read = H.text_of

describe("review26: an NDJSON path sink's kept position across a second crash", function()
  local dir, log, state, open
  before_each(function() dir, log, state, open = H.ndjson_case() end)
  after_each(H.cleanup)

  local function crash(first, last, padlen) H.ndjson_crash(dir, state, log, first, last, padlen) end

  it("a file cut shorter while closed (no copy), a crash right after the declaration: the group is not written twice", function()
    crash(1, 3, 100) -- groups 1, 2 marked at 36 bytes; group 3 waits (its line 117 bytes)
    H.write(log, "") -- cut while the process is down (truncate -s 0; no rotated copy)
    crash(4, 3) -- declares the sink: group 3 not found, written at 0; crash before any mark
    assert.equal("3", ks(read(log)))
    assert.is_true(#read(log) > 36) -- the cut file now reaches past the recorded position
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("3,4", ks(read(log)))
  end)

  it("a file rotated and compressed while closed (renamed, then gone), a crash right after the declaration: not written twice", function()
    crash(1, 3, 100) -- groups 1, 2 marked at 36 bytes; group 3 waits (117 bytes)
    assert(os.rename(log, log .. ".1"))
    H.sh(("gzip %s.1"):format(log)) -- logrotate's compress: out.ndjson.1 is gone, out.ndjson.1.gz holds it
    crash(4, 3) -- declares the sink: a new out.ndjson, group 3 written at 0; crash before any mark
    assert.equal("3", ks(read(log)))
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("3,4", ks(read(log))) -- got "3,3,4": checked from 36, inside group 3's line
  end)

  it("renamed with its waiting group torn, a crash right after the declaration, then one mid-write: written once", function()
    crash(1, 3, 40)
    local text = read(log)
    H.write(log, text:sub(1, #text - 10))  -- group 3's line cut short by the crash
    assert(os.rename(log, log .. ".old"))
    crash(4, 3) -- declares: cuts out.ndjson.old back to 1,2 and writes group 3 whole to the new file; crash
    assert.equal("1,2", ks(read(log .. ".old")))
    assert.equal("3", ks(read(log)))
    local g = read(log)
    H.write(log, g:sub(1, 20)) -- as if that crash had come while group 3 was being written
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("1,2", ks(read(log .. ".old")))
    assert.equal(g .. '{"k":4,"pad":"x"}\n', read(log))
  end)

  it("the renamed file its waiting group was found in is not held open once the group is settled", function()
    crash(1, 3)
    assert(os.rename(log, log .. ".old"))
    local p, s = open() -- group 3 found whole in out.ndjson.old
    s:insert{ k = 4, pad = "x" }
    local pid = io.open("/proc/self/stat"):read("l"):match("^(%d+)")
    local fds = H.sh(("ls -l /proc/%s/fd"):format(pid))
    p:close()
    assert.equal("4", ks(read(log)))
    assert.not_matches("out.ndjson.old", fds, 1, true) -- held open (and flock'd) until the pipeline closes
  end)

  it("the same with a short group (the cut file stays shorter than the old position)", function()
    crash(1, 3, 1)
    H.write(log, "")
    crash(4, 3)
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("3,4", ks(read(log)))
  end)
end)
