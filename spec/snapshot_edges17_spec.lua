-- runnel snapshot STATE DEST (rn_state_copy) into a directory holding other
-- files and no state: refused as runnel.open refuses to make a state there
-- (spec/open_edges17_spec.lua), rather than writing data.mdb among them.
local runnel = require "runnel"
local H = require "helper"

local bin = H.runnel_bin

describe("runnel snapshot into a directory", function()
  local dir
  before_each(function()
    dir = H.tmpdir()
    local p = runnel.open{ path = dir .. "/st", notes = false }
    p:table("t", { {"k","int"}, key = "k" }):insert{ k = 1 }
    p:close()
  end)
  after_each(H.cleanup)

  it("holding other files is refused, naming DEST and a file in it, and nothing is written there", function()
    os.execute(("mkdir '%s/home'"):format(dir))
    H.write(dir .. "/home/notes.txt", "my notes\n")
    local out, err, code = H.sh(("%s snapshot %s/st %s/home"):format(bin, dir, dir))
    -- before: exit 0, and data.mdb lay beside notes.txt
    assert.same({ "", ("runnel: snapshot: %s/home: the directory holds notes.txt and no runnel state (a snapshot "
                       .. "goes to a new or empty directory)\n"):format(dir), 1 }, { out, err, code })
    assert.equal("notes.txt\n", (H.sh(("ls -A '%s/home'"):format(dir))))
  end)

  it("that is a file is refused as a file, and the file is left as it was", function()
    H.write(dir .. "/f", "mine\n")
    local out, err, code = H.sh(("%s snapshot %s/st %s/f"):format(bin, dir, dir))
    -- before: "snapshot: creating the copy …/st into …/f: Not a directory"
    assert.same({ "", ("runnel: snapshot: %s/f: it is a file, not a directory (a snapshot goes to a new or empty "
                       .. "directory)\n"):format(dir), 1 }, { out, err, code })
    assert.equal("mine\n", H.read(dir .. "/f"))
  end)

  it("new, empty, or holding only a killed copy's file, takes the copy", function()
    local _, err, code = H.sh(("%s snapshot %s/st %s/new"):format(bin, dir, dir))
    assert.same({ "", 0 }, { err, code })
    os.execute(("mkdir '%s/empty' '%s/left'"):format(dir, dir))
    H.write(dir .. "/left/data.mdb.copy-1-0", "partial")
    for _, d in ipairs{ "new", "empty", "left" } do
      if d ~= "new" then
        _, err, code = H.sh(("%s snapshot %s/st %s/%s"):format(bin, dir, dir, d))
        assert.same({ "", 0 }, { err, code })
      end
      assert.equal(1, runnel.attach(dir .. "/" .. d, "t"):count())
    end
  end)
end)
