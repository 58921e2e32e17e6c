-- Opening a state in a directory that holds other files and no state: a new
-- state is made only in a directory that is new or empty (DESIGN.md 12:
-- "runnel.open(path) accepts an existing empty directory"); one holding
-- the user's files is refused, naming the path and a file in it, and
-- nothing is written among those files (core/store.c make_dir).
local runnel = require "runnel"
local H = require "helper"

local function entries(dir)
  local out = H.sh(("ls -A '%s'"):format(dir))
  local t = {}
  for name in out:gmatch("[^\n]+") do t[#t + 1] = name end
  return t
end

describe("runnel.open of a directory holding other files", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  it("is refused, naming the path and a file in it, and writes nothing there", function()
    H.write(dir .. "/notes.txt", "my notes\n")
    local want = ("cannot open state %s: the directory holds notes.txt and no runnel state (a state is a "
                  .. "directory, new or empty at first)"):format(dir)
    -- before: it opened, and data.mdb, lock.mdb and writer.lock lay beside notes.txt
    assert.equal(want, H.error_of(runnel.open, dir))
    assert.equal(want, H.error_of(runnel.open, { path = dir, sync = false }))
    assert.same({ "notes.txt" }, entries(dir))
    assert.equal("my notes\n", H.read(dir .. "/notes.txt"))
  end)

  it("names one entry and counts the others, a directory among them", function()
    H.write(dir .. "/b.txt", "b")
    H.write(dir .. "/a.txt", "a")
    os.execute(("mkdir '%s/src'"):format(dir))
    assert.equal(("cannot open state %s: the directory holds a.txt and 2 more entries and no runnel state (a "
                  .. "state is a directory, new or empty at first)"):format(dir), H.error_of(runnel.open, dir))
    assert.same({ "a.txt", "b.txt", "src" }, entries(dir))
  end)

  it("is refused by runnel repl STATE_DIR FILE.lua, which says so and writes nothing there", function()
    H.write(dir .. "/decl.lua", 't = p:table("t", { {"k","int"}, key = "k" })\n')
    local out, err = H.sh(("%s repl %s %s/decl.lua"):format(H.runnel_bin, dir, dir), "")
    assert.matches(("cannot open state %s: the directory holds decl.lua and no runnel state"):format(dir),
                   out .. err, 1, true)
    assert.same({ "decl.lua" }, entries(dir))
  end)

  it("still opens a new, an empty, and an existing state, also one the user put a file in later", function()
    local p = runnel.open(dir .. "/new")
    p:table("t", { {"k","int"}, key = "k" }):insert{ k = 1 }
    p:close()
    os.execute(("mkdir '%s/empty'"):format(dir))
    runnel.open(dir .. "/empty"):close()
    H.write(dir .. "/new/README", "my state\n")
    p = runnel.open(dir .. "/new")
    assert.equal(1, p:table("t", { {"k","int"}, key = "k" }):count())
    p:close()
  end)

  it("still opens a directory holding only what a first open that failed left (writer.lock, lock.mdb)", function()
    local p = runnel.open(dir .. "/st")
    p:close()
    os.remove(dir .. "/st/data.mdb") -- as README says for an empty data.mdb: remove it to start anew
    p = runnel.open(dir .. "/st")
    p:table("t", { {"k","int"}, key = "k" }):insert{ k = 1 }
    p:close()
  end)
end)

describe("runnel.open's path", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  it("that is no string is refused, not made a directory of its text in the working directory", function()
    H.write(dir .. "/s.lua", 'local runnel = require "runnel"\n'
      .. 'for _, v in ipairs{ 5, 1.5, true } do\n  print(pcall(function() local p = runnel.open{ path = v }; return p end))\nend\n')
    local out, err, code = H.sh(("cd '%s' && %s run s.lua"):format(dir, H.runnel_bin))
    -- before: true runnel.Pipeline (5), and a state directory named 5 beside s.lua
    assert.same({ "false\ts.lua:3: open: path must be a string (a state directory), got number\n"
               .. "false\ts.lua:3: open: path must be a string (a state directory), got number\n"
               .. "false\ts.lua:3: open: path must be a string (a state directory), got boolean\n", "", 0 },
                { out, err, code })
    assert.same({ "s.lua" }, entries(dir))
  end)

  it("that is empty says the path, not a name, must not be empty", function()
    local want = "open: the path must not be empty (runnel.open() opens a temporary state)"
    -- before: "open: a name must not be empty"
    assert.equal(want, H.error_of(runnel.open, ""))
    assert.equal(want, H.error_of(runnel.open, { path = "" }))
  end)

  it("that is a dangling symbolic link says so", function()
    os.execute(("ln -s '%s/nowhere' '%s/link'"):format(dir, dir))
    -- before: "… cannot list the directory to see it is empty: No such file or directory"
    assert.equal(("cannot open state %s/link: it is a symbolic link to %s/nowhere, which does not exist (a state is "
                  .. "a directory, new or empty at first)"):format(dir, dir), H.error_of(runnel.open, dir .. "/link"))
    assert.same({ "link" }, entries(dir))
  end)

  it("that is a file system's root, holding lost+found alone, opens as a new state", function()
    os.execute(("mkdir -p '%s/vol/lost+found'"):format(dir))
    -- before this round's refusal it opened; a dedicated volume for the state is a directory of this kind
    local p = runnel.open(dir .. "/vol")
    p:table("t", { {"k","int"}, key = "k" }):insert{ k = 1 }
    p:close()
  end)
end)
