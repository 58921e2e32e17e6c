-- runnel snapshot STATE DEST (rn_state_copy, core/copy.c) makes DEST when
-- it is absent, then reads the state. A copy that failed there left DEST
-- behind, an empty directory the user never asked for: a state whose
-- data.mdb is a FIFO (refused since 761be77), or one that is not LMDB.
-- copy.c's own comment, and the snapshot commit 5ea63dd ("as a copy that
-- fails does"), say a failed copy leaves nothing; now it does not. A
-- DEST that existed is kept, empty.
local H = require "helper"

local R = H.runnel_bin

local function exists(path) return os.rename(path, path) ~= nil end

describe("runnel snapshot that fails", function()
  after_each(H.cleanup)

  it("removes the directory it made, and keeps one that was there", function()
    local dir = H.tmpdir()
    os.execute(("mkdir '%s/fifo' && mkfifo '%s/fifo/data.mdb'"):format(dir, dir))
    os.execute(("mkdir '%s/junk'"):format(dir))
    H.write(dir .. "/junk/data.mdb", ("not lmdb\n"):rep(2000))
    for _, st in ipairs{ "fifo", "junk" } do
      local out, err, code = H.sh(("timeout 20 %s snapshot %s/%s %s/copy"):format(R, dir, st, dir))
      assert.are.same({ "", 1 }, { out, code }, err)
      assert.are.equal(1, err:find("runnel: snapshot: ", 1, true), err)
      assert.is_false(exists(dir .. "/copy"), st .. ": " .. err)
      os.execute(("mkdir '%s/copy'"):format(dir))
      _, err, code = H.sh(("timeout 20 %s snapshot %s/%s %s/copy"):format(R, dir, st, dir))
      assert.are.equal(1, code, err)
      assert.are.equal("", (H.sh(("ls -A '%s/copy'"):format(dir))))
      os.execute(("rmdir '%s/copy'"):format(dir))
    end
  end)
end)
