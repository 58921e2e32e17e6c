-- An NDJSON path sink whose file was renamed while the state was closed
-- after a crash (ndjson.c, "A file renamed while the state was closed"):
-- without a recorded identity (a state before 0.38, or the file not beside
-- the path: ndjson_identity_edges26) the renamed file is chosen by name (the
-- path's name and a suffix), length (at least the mark's position, a line
-- starting there) and mtime (the latest modified).
-- Before, any suffix fitted, so a user's copy beside the path (cp
-- out.ndjson out.ndjson.bak before restarting, an editor's backup
-- out.ndjson~, a previous run's output kept as out.ndjson.prev), being
-- the latest modified, was taken for the rotation: a torn group was cut in
-- the user's copy and left torn in the rotated log, a group never written
-- counted as written when the copy held the same bytes (lines without an
-- id field), and a group in the rotated log was written again when the copy
-- differed. Since 0.37 only a rotation's suffix fits (a separator, then
-- digits and separators: .1, -20261205, -2026-12-05).
local H = require "helper"

local ks = H.ndjson_ks
local read = H.text_of

describe("an NDJSON path sink renamed while closed, with a user's copy beside the path", function()
  local dir, log, state, open
  before_each(function() dir, log, state, open = H.ndjson_case() end)
  after_each(H.cleanup)

  local function crash_after(n, opts) H.ndjson_crash(dir, state, log, 1, n, nil, opts) end

  it("a backup copied after the crash, then logrotate: the torn group is cut in the rotated file", function()
    crash_after(3)
    local text = read(log)
    H.write(log, text:sub(1, #text - 5))   -- group 3's line cut short by the crash
    H.sh(("cp %s %s.bak"):format(log, log)) -- the user's backup before restarting
    assert(os.rename(log, log .. ".1"))     -- then logrotate, while the process is down
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("3,4", ks(read(log)))
    assert.equal("1,2", ks(read(log .. ".1")))              -- no torn line left in the log's rotation
    assert.equal(text:sub(1, #text - 5), read(log .. ".bak")) -- the user's copy untouched
  end)

  it("a previous run's output kept beside the path does not count as this run's lines (no id field)", function()
    H.sh(("mkdir %s/prev"):format(dir))
    crash_after(3)
    local text = read(log)
    H.write(log .. ".prev", text)          -- a previous run's identical output, kept
    H.write(log, text:match("^[^\n]*\n[^\n]*\n")) -- this run: the crash came before group 3 was written
    assert(os.rename(log, dir .. "/prev/out.ndjson")) -- the file moved away while the process was down
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("3,4", ks(read(log)))      -- group 3 was never written: it is written now
    assert.equal(text, read(log .. ".prev"))
  end)

  it("still finds a dated rotation, and leaves an editor's backup beside it alone", function()
    crash_after(3)
    local text = read(log)
    local edited = text:match("^[^\n]*\n[^\n]*\n") .. '{"k":7,"pad":"edited"}\n'
    H.write(log .. "~", edited)                           -- an editor's backup, the latest modified
    assert(os.rename(log, log .. "-2026-12-05"))
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("1,2,3", ks(read(log .. "-2026-12-05")))
    assert.equal("4", ks(read(log))) -- group 3 found in the rotation: not written again (before: "3,4", twice)
    assert.equal(edited, read(log .. "~"))
  end)
end)
