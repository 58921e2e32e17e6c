-- 699e690 has runnel run and the REPL say why when SIGBUS ends them. It
-- said a state was damaged: "a read of a state's data.mdb went past its
-- end ... (runnel verify STATE_DIR says where)". But a pipeline opened
-- with writemap = true has a data.mdb as large as its map, mostly holes,
-- and a write into a hole on a full disk is SIGBUS too: runnel called a
-- whole state damaged and sent the user to verify, which finds nothing.
-- The message now names both causes. The full disk is a 2 MiB tmpfs,
-- which needs root and mount (pending elsewhere).
local H = require "helper"

local R = H.runnel_bin

describe("runnel run dying of SIGBUS on a full disk with writemap = true", function()
  after_each(H.cleanup)

  it("says the disk may be full, not only that the state is damaged", function()
    local dir = H.tmpdir()
    os.execute(("mkdir '%s/mnt'"):format(dir))
    local _, _, mounted = H.sh(("mount -t tmpfs -o size=2m tmpfs '%s/mnt'"):format(dir))
    if mounted ~= 0 then return pending("no tmpfs mount here (root and mount needed)") end
    finally(function() os.execute(("umount '%s/mnt'"):format(dir)) end)
    H.write(dir .. "/fill.lua", table.concat({
      'local runnel = require "runnel"',
      "local p = runnel.open{ path = arg[1], writemap = true, map_size = 64 * 1048576 }",
      'local t = p:table("t", { {"id","int"}, {"v","string"}, key = "id" })',
      "for g = 1, 100 do",
      "  p:begin()",
      '  for i = 1, 500 do t:insert{ id = g * 1000 + i, v = ("x"):rep(100) } end',
      "  p:commit()",
      "end",
    }, "\n") .. "\n")
    local out, err, code = H.sh(("%s run '%s/fill.lua' '%s/mnt/st'"):format(R, dir, dir))
    assert.are.equal("", out)
    assert.is_true(code == 135 or code == 7, "exit " .. tostring(code) .. ": " .. err) -- killed by SIGBUS
    assert.are.equal(1, err:find("runnel: Bus error: a state's data.mdb, mapped by this process, could not back a "
      .. "page: the state is damaged (runnel verify STATE_DIR says where), or, opened with writemap = true, its disk "
      .. "is full\n", 1, true), err)
  end)
end)
