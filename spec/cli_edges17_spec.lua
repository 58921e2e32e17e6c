-- The runnel command at its edges (round 17): what `runnel repl` does with
-- an argument that looks like an option (lua/cli.c command).
local H = require "helper"

local bin = H.runnel_bin

describe("runnel repl with an option it does not take", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  for _, args in ipairs{ "--help", "--bogus", "-x", "-- st", "st --traceback" } do
    it(("(runnel repl %s) is refused with exit 2, and no state is made in the working directory"):format(args),
       function()
      local opt = args:match("%-%S*")
      local out, err, code = H.sh(("cd '%s' && %s repl %s"):format(dir, bin, args), "print(p)\n")
      -- before: a state directory named after the option was made in the working directory
      assert.same({ "", ("runnel: repl: unknown option %s (repl takes [STATE_DIR] [FILE.lua]; a path that starts "
                         .. "with - as ./%s; runnel help)\n"):format(opt, opt), 2 }, { out, err, code })
      assert.equal("", (H.sh(("ls -A '%s'"):format(dir))))
    end)
  end

  it("still takes a state directory and a script, and ./-x as a path", function()
    H.write(dir .. "/decl.lua", 't = p:table("t", { {"k","int"}, key = "k" })\n')
    local out, err, code = H.sh(("cd '%s' && %s repl ./-x decl.lua"):format(dir, bin), "t:insert{ k = 1 }\nt:count()\n")
    assert.equal("", err)
    assert.equal(0, code)
    assert.matches("\n1\n", out, 1, true)
    out = H.sh(("%s inspect %s/-x"):format(bin, dir))
    assert.matches("t%s+|%s+table%s+|%s+1", out)
  end)
end)

describe("runnel run and runnel query with an option given twice", function()
  local dir
  before_each(function()
    dir = H.tmpdir()
    H.write(dir .. "/s.lua", 'local runnel = require "runnel"\n'
      .. ('local p = runnel.open{ path = %q, notes = false }\n'):format(dir .. "/st")
      .. 'p:table("t", { {"id","int"}, key = "id" })\nreturn p\n')
    H.write(dir .. "/a.ndjson", '{"rel":"t","op":"insert","row":{"id":1}}\n')
    H.write(dir .. "/b.ndjson", '{"rel":"t","op":"insert","row":{"id":2}}\n')
  end)
  after_each(H.cleanup)

  for _, opt in ipairs{ "--input %s/a.ndjson --input %s/b.ndjson", "--batch 1 --batch 2",
                        "--on-error skip --on-error stop", "--rejects %s/r1 --rejects %s/r2",
                        "--max-rejects 1 --max-rejects 2" } do
    it(("refuses runnel run %s, exit 2, applying nothing"):format(opt:gsub("%%s/", "")), function()
      local args = opt:gsub("%%s", dir)
      local name = opt:match("^%-%-[%w-]+")
      local extra = name == "--input" and "" or ("--input %s/a.ndjson --on-error skip "):format(dir)
      if name == "--on-error" then extra = ("--input %s/a.ndjson "):format(dir) end
      local out, err, code = H.sh(("%s run %s%s %s/s.lua"):format(bin, extra, args, dir))
      -- before: the last one given won and the first was dropped without a word (--input a.ndjson unread)
      assert.same({ "", ("runnel: %s given twice (runnel help)\n"):format(name), 2 }, { out, err, code })
      assert.is_nil(H.read(dir .. "/st/data.mdb"))
    end)
  end

  it("refuses runnel query --limit or --format given twice, exit 2", function()
    H.sh(("%s run --input %s/a.ndjson %s/s.lua"):format(bin, dir, dir))
    for _, opt in ipairs{ "--limit", "--format" } do
      local v1, v2 = opt == "--limit" and "1" or "csv", opt == "--limit" and "2" or "ndjson"
      local out, err, code = H.sh(("%s query %s/st t %s %s %s %s"):format(bin, dir, opt, v1, opt, v2))
      assert.same({ "", ("runnel: query: %s given twice\n"):format(opt), 2 }, { out, err, code })
    end
  end)
end)

describe("runnel inspect of names holding control characters", function()
  after_each(H.cleanup)

  it("shows them escaped, as a grid does, one line per relation", function()
    local runnel = require "runnel"
    local dir = H.tmpdir() .. "/st"
    local p = runnel.open{ path = dir, notes = false }
    p:table("a\nb\27[31m", { {"i\td","int"}, key = "i\td" }):insert{ ["i\td"] = 1 }
    p:close()
    local out, err, code = H.sh(("%s inspect %s"):format(bin, dir))
    -- before: the name's newline split its row, and ESC [ 31 m went to the terminal
    assert.same({ "", 0 }, { err, code })
    assert.matches(" relation    | kind  | rows | next id | columns\n"
                .. "-------------+-------+------+---------+--------------\n"
                .. " a\\nb\\27[31m | table |    1 |       2 | i\\td int key\n"
                .. "(1 relation)\nstate entries: a\\nb\\27[31m ", out, 1, true)
  end)
end)

describe("runnel run --rejects naming the script", function()
  after_each(H.cleanup)

  it("is refused with exit 2 before the script runs, the script whole", function()
    local dir = H.tmpdir()
    local script = dir .. "/s.lua"
    local text = 'local runnel = require "runnel"\n'
      .. ('local p = runnel.open{ path = %q, notes = false }\n'):format(dir .. "/st")
      .. 'p:table("t", { {"id","int"}, key = "id" })\nreturn p\n'
    H.write(script, text)
    H.write(dir .. "/in.ndjson", '{"rel":"t","op":"insert","row":{"id":1}}\nbad\n')
    for _, rejects in ipairs{ script, dir .. "/./s.lua" } do
      local out, err, code = H.sh(("%s run --input %s/in.ndjson --on-error skip --rejects %s %s"):format(
        bin, dir, rejects, script))
      -- before: exit 0, and s.lua held the rejected line in place of the script
      assert.same({ "", ("runnel: --rejects %s is the script itself (runnel help)\n"):format(rejects), 2 },
                  { out, err, code })
      assert.equal(text, H.read(script))
      assert.is_nil(H.read(dir .. "/st/data.mdb")) -- the script did not run
    end
  end)
end)

describe("runnel run --input with a pipeline the script returned unusable", function()
  local dir
  before_each(function()
    dir = H.tmpdir()
    H.write(dir .. "/in.ndjson", '{"rel":"t","op":"insert","row":{"id":1}}\n')
  end)
  after_each(H.cleanup)

  local function run(tail)
    H.write(dir .. "/s.lua", 'local runnel = require "runnel"\n'
      .. ('local p = runnel.open{ path = %q, notes = false }\n'):format(dir .. "/st")
      .. 'local t = p:table("t", { {"id","int"}, key = "id" })\n' .. tail .. "return p\n")
    return H.sh(("%s run --input %s/in.ndjson %s/s.lua"):format(bin, dir, dir))
  end

  it("closed says so, once prefixed", function()
    -- before: "runnel: runnel: the pipeline is closed"
    assert.same({ "", "runnel: --input: the script returned its pipeline closed (return it open: runnel closes it "
                      .. "after the input)\n", 1 }, { run("p:close()\n") })
  end)

  it("inside a group says so, and the group is rolled back", function()
    -- before: "runnel: run: not inside a group or a callback", which reads as if no group were open
    assert.same({ "", "runnel: --input: the script returned its pipeline inside a group (p:begin() without "
                      .. "p:commit() or p:rollback())\n", 1 }, { run("p:begin()\nt:insert{ id = 9 }\n") })
    assert.equal(" id\n----\n(0 rows)\n", (H.sh(("%s query %s/st t"):format(bin, dir))))
  end)
end)

describe("runnel STATE_DIR with more than a script after it", function()
  after_each(H.cleanup)

  it("says what runnel STATE_DIR takes, not that the directory is an unknown command", function()
    local dir = H.tmpdir()
    local out, err, code = H.sh(("%s %s a.lua b.lua"):format(bin, dir))
    -- before: runnel: unknown command "DIR" (runnel help lists the commands)
    assert.same({ "", ("runnel: %s is a directory: runnel STATE_DIR takes at most a FILE.lua after it (runnel help)\n")
                      :format(dir), 2 }, { out, err, code })
  end)
end)
