-- runnel snapshot, inspect and verify take paths and no option: a word
-- like --help was taken for a path, and `runnel snapshot st --help` copied
-- the state into a new directory named --help with exit 0 (as `runnel repl
-- --help` once made a state there). They are refused as repl refuses them,
-- exit 2, making nothing; a path that starts with - is given as ./-x.
local H = require "helper"
local runnel = require "runnel"

local R = H.runnel_bin

local function make_state(dir)
  local p = runnel.open(dir)
  local t = p:table("t", { {"id","int"}, key = "id" })
  t:insert{ id = 1 }
  p:close()
end

local function listing(dir)
  return (H.sh(("ls -A '%s'"):format(dir)))
end

describe("runnel snapshot, inspect and verify with an option they do not take", function()
  after_each(H.cleanup)

  for _, case in ipairs{
    { "snapshot st --help", "snapshot", "--help", "STATE_DIR DEST" },
    { "snapshot st -h", "snapshot", "-h", "STATE_DIR DEST" },
    { "snapshot --help st", "snapshot", "--help", "STATE_DIR DEST" },
    { "inspect --help", "inspect", "--help", "one STATE_DIR" },
    { "verify -v", "verify", "-v", "one STATE_DIR" },
    { "inspect st --json", "inspect", "--json", "one STATE_DIR" },
  } do
    local args, cmd, opt, takes = case[1], case[2], case[3], case[4]
    it(("(runnel %s) is refused with exit 2, and nothing is made in the working directory"):format(args), function()
      local dir = H.tmpdir()
      make_state(dir .. "/st")
      local out, err, code = H.sh(("cd '%s' && %s %s"):format(dir, R, args))
      assert.are.same({ "", ("runnel: %s: unknown option %s (%s takes %s; a path that starts with - as ./%s; "
        .. "runnel help)\n"):format(cmd, opt, cmd, takes, opt), 2 }, { out, err, code })
      assert.are.equal("st\n", listing(dir))
    end)
  end

  it("still copies into ./-x, and inspects and verifies it there", function()
    local dir = H.tmpdir()
    make_state(dir .. "/st")
    local out, err, code = H.sh(("cd '%s' && %s snapshot st ./-x"):format(dir, R))
    assert.are.same({ "", "", 0 }, { out, err, code })
    assert.are.equal("-x\nst\n", listing(dir))
    out, err, code = H.sh(("cd '%s' && %s inspect ./-x"):format(dir, R))
    assert.are.same({ "", 0 }, { err, code })
    assert.is_truthy(out:find(" t        | table |    1 |       2 | id int key\n", 1, true))
    out, err, code = H.sh(("cd '%s' && %s verify ./-x"):format(dir, R))
    assert.are.same({ "", 0 }, { err, code })
    assert.is_truthy(out:match("^%./%-x: 1 relations, %d+ databases, %d+ entries, last group 1: whole %(0 damaged, 0 notes%)\n$"), out)
  end)
end)
