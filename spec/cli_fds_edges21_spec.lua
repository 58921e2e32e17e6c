-- The runnel command with its standard streams closed or unwritable (round 21, core/store.c, lua/cli.c).
local H = require "helper"

local bin = H.runnel_bin

describe("runnel run with stdin, stdout and stderr closed", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  for _, runner in ipairs{ bin .. " run", "lua5.4" } do
    it(("(%s) writes nothing of the script's into the state's files (they took descriptors 0, 1 and 2)"):format(
         runner:match("lua5.4") or "runnel run"), function()
      H.write(dir .. "/s.lua", 'local runnel = require "runnel"\n'
        .. ('local p = runnel.open(%q)\n'):format(dir .. "/st")
        .. 'local t = p:table("t", { {"id","int"}, {"name","string"}, key = "id" })\n'
        .. 'for i = 1, 50 do t:insert{ id = i, name = "n" .. i } end\n'
        .. 'print("MARKER-OUT") io.stdout:flush()\n'
        .. 'error("MARKER-ERR")\n')
      local _, _, code = H.sh(("{ %s '%s/s.lua' <&- >&- 2>&-; }"):format(runner, dir))
      assert.equal(1, code)
      -- before: writer.lock, lock.mdb and data.mdb were descriptors 0, 1 and 2: the print went into
      -- lock.mdb (LMDB's reader table) and the error message into data.mdb
      for _, f in ipairs{ "data.mdb", "lock.mdb", "writer.lock" } do
        local text = H.read(dir .. "/st/" .. f) or ""
        assert.is_nil(text:find("MARKER", 1, true), f)
      end
      local out, err, vcode = H.sh(("%s verify '%s/st'"):format(bin, dir))
      assert.equal("", err)
      assert.equal(0, vcode, out)
      assert.matches("(50 rows)", (H.sh(("%s query '%s/st' t"):format(bin, dir))), 1, true)
    end)
  end
end)

describe("runnel commands whose stdout cannot be written", function()
  local dir
  before_each(function()
    dir = H.tmpdir()
    H.write(dir .. "/mk.lua", 'local runnel = require "runnel"\n'
      .. ('local p = runnel.open(%q)\n'):format(dir .. "/st")
      .. 'local t = p:table("t", { {"id","int"}, {"name","string"}, key = "id" })\n'
      .. 'p:begin() for i = 1, 3 do t:insert{ id = i, name = "n" .. i } end p:commit() p:close()\n')
    assert.equal(0, select(3, H.sh(("%s run '%s/mk.lua'"):format(bin, dir))))
  end)
  after_each(H.cleanup)

  for _, c in ipairs{ "query ST t", "query ST t --format ndjson", "inspect ST", "verify ST", "help", "version",
                      "run PRINT" } do
    it(("(runnel %s) exits 1 naming stdout when it is full, and when it is closed"):format(c), function()
      H.write(dir .. "/print.lua", 'print("row")\n')
      local cmd = ("%s %s"):format(bin, c:gsub("ST", "'" .. dir .. "/st'"):gsub("PRINT", "'" .. dir .. "/print.lua'"))
      -- before: exit 0, and what was asked for lost (a query > file on a full disk was a truncated file)
      local out, err, code = H.sh("{ " .. cmd .. " >/dev/full; }")
      assert.equal("", out)
      assert.equal(1, code)
      assert.equal("runnel: writing standard output: No space left on device\n", err)
      out, err, code = H.sh("{ " .. cmd .. " >&-; }")
      assert.equal(1, code)
      assert.equal("runnel: writing standard output: Bad file descriptor\n", err)
    end)
  end
end)
