-- A state's path that is no state: a file given to runnel.open, attach or
-- `runnel verify`, a directory without data.mdb, is said to be one in
-- those words (core/store.c make_dir, core/envs.c open_env), not in the
-- words of the system call that failed on a file inside it.
local runnel = require "runnel"
local H = require "helper"

describe("a state path that is no state", function()
  local dir, file
  before_each(function()
    dir = H.tmpdir()
    file = dir .. "/notes.txt"
    H.write(file, "my notes\n")
  end)
  after_each(H.cleanup)

  it("is refused by runnel.open as a file, not a state directory, and the file is left as it was", function()
    local err = H.error_of(runnel.open, file)
    -- before: cannot open …/notes.txt/writer.lock: Not a directory
    assert.equal(("cannot open state %s: it is a file, not a state directory (a state is a directory, new or "
                  .. "empty at first)"):format(file), err)
    assert.equal(("cannot open state %s: it is a file, not a state directory (a state is a directory, new or "
                  .. "empty at first)"):format(file), H.error_of(runnel.open, { path = file, sync = false }))
    assert.equal("my notes\n", H.read(file))
    local p = runnel.open(dir .. "/st") -- a directory beside it opens
    p:close()
  end)

  it("is said to be no state by runnel verify and attach", function()
    local out, err, code = H.sh(("%s verify %s"):format(H.runnel_bin, file))
    -- before: runnel: …/notes.txt: Not a directory
    assert.same({ "runnel: " .. file .. ": not a runnel state (a file, not a state directory)\n", "", 1 }, { out, err, code })
    os.execute(("mkdir '%s/empty'"):format(dir))
    out, err, code = H.sh(("%s verify %s/empty"):format(H.runnel_bin, dir))
    assert.same({ "runnel: " .. dir .. "/empty: not a runnel state (no data.mdb)\n", "", 1 }, { out, err, code })
    assert.equal(("attach %s: not a runnel state (a file, not a state directory)"):format(file),
                 H.error_of(runnel.attach, file, "s"))
  end)
end)
