-- An NDJSON path sink whose file was renamed while the state was closed
-- after a crash (ndjson.c, "A file renamed while the state was closed").
-- Until 0.37 the renamed file was chosen by name, length and mtime alone:
-- a user's copy named like a rotation (cp out.ndjson out.ndjson.2), being
-- the latest modified, beat logrotate's out.ndjson.1; a file renamed to
-- another name (out.ndjson.old) was not found, so its waiting group was
-- written again; and the sink's declaration recorded the new file's
-- position as its mark before the waiting groups were settled, so a second
-- crash right after the declaration looked for them in the new file and
-- wrote them again. Since 0.38 the mark records the file its position is
-- in (device and inode, meta "of:"), the file with that identity beside
-- the path is the renamed one whatever its name, and a declaration keeps
-- the recorded position and file while groups wait.
local H = require "helper"

local ks = H.ndjson_ks
local read = H.text_of

describe("an NDJSON path sink renamed while closed, found by its identity", function()
  local dir, log, state, open
  before_each(function() dir, log, state, open = H.ndjson_case() end)
  after_each(H.cleanup)

  -- A child inserts keys first..last (a group each) and crashes: the last
  -- group's mark is not recorded.
  local function crash(first, last) H.ndjson_crash(dir, state, log, first, last) end

  it("a copy named like a rotation, made after the crash, does not beat logrotate's renamed file", function()
    crash(1, 3)
    local text = read(log)
    H.write(log, text:sub(1, #text - 5))    -- group 3's line cut short by the crash
    H.sh(("cp %s %s.2"):format(log, log))   -- a copy named like a rotation, the latest modified
    assert(os.rename(log, log .. ".1"))     -- then logrotate, while the process is down
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("3,4", ks(read(log)))
    assert.equal("1,2", ks(read(log .. ".1")))            -- the torn line cut in the renamed file itself
    assert.equal(text:sub(1, #text - 5), read(log .. ".2")) -- the copy untouched
  end)

  it("a file renamed to a name no rotation gives is still the file: its group is not written again", function()
    crash(1, 3)
    local text = read(log)
    assert(os.rename(log, log .. ".old"))
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal(text, read(log .. ".old"))
    assert.equal("4", ks(read(log))) -- group 3 is in out.ndjson.old (before: "3,4", written twice)
  end)

  it("a crash right after the declaration that settled the waiting group does not write it twice", function()
    crash(1, 3)
    local text = read(log)
    assert(os.rename(log, log .. ".1"))
    crash(4, 3) -- declares the sink (group 3 found in out.ndjson.1), inserts nothing, crashes
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal(text, read(log .. ".1"))
    assert.equal("4", ks(read(log))) -- before: "3,4", group 3 looked for in the new file and written again
  end)

  it("after a renamed file was settled, the next crash finds the groups in the new file", function()
    crash(1, 3)
    assert(os.rename(log, log .. ".1"))
    crash(4, 6) -- group 3 found in out.ndjson.1; 4..6 in the new file, 6's mark not recorded
    local p, s = open()
    s:insert{ k = 7, pad = "x" }
    p:close()
    assert.equal("1,2,3", ks(read(log .. ".1")))
    assert.equal("4,5,6,7", ks(read(log)))
  end)

  it("a copy of the file restored at the path (a new inode, the same bytes) is read as the file", function()
    crash(1, 3)
    local text = read(log)
    H.sh(("cp %s %s.tmp && mv %s.tmp %s"):format(log, log, log, log)) -- the same bytes, another inode
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal(text .. '{"k":4,"pad":"x"}\n', read(log))
  end)
end)
