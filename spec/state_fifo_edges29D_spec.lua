-- A directory whose data.mdb is no regular file — a FIFO, a device — is
-- no state. Opening a FIFO to read it waits for a writer: runnel inspect,
-- verify, query, snapshot, run and the REPL hung there for ever (the
-- check of the file before LMDB maps it, and the Lua commands' io.open of
-- data.mdb). Each now says what data.mdb is and exits 1.
local H = require "helper"
local runnel = require "runnel"

local R = H.runnel_bin

describe("a state directory whose data.mdb is a FIFO", function()
  after_each(H.cleanup)

  it("is refused by every command at once, naming what it is", function()
    local dir = H.tmpdir()
    assert(os.execute(("mkdir '%s/st' && mkfifo '%s/st/data.mdb'"):format(dir, dir)))
    H.write(dir .. "/open.lua", 'require("runnel").open(arg[1])\n')
    H.write(dir .. "/inspect.lua", 'require("runnel").inspect(arg[1])\n')
    local st = dir .. "/st"
    local what = st .. ": not a runnel state: its data.mdb is a FIFO, not a file"
    for _, cmd in ipairs{ "inspect " .. st, "verify " .. st, "query " .. st .. " t", "snapshot " .. st .. " " .. dir
                          .. "/copy", "drop " .. st .. " t", "run " .. dir .. "/open.lua " .. st,
                          "run " .. dir .. "/inspect.lua " .. st, "repl " .. st } do
      -- timeout: before the fix each of these waited for a writer of the FIFO
      local out, err, code = H.sh(("timeout 20 %s %s"):format(R, cmd))
      assert.are.equal(1, code, cmd .. ": " .. err)
      assert.is_truthy((err .. out):find(what, 1, true), cmd .. ": " .. err .. out) -- verify says it on stdout
    end
    local out = H.sh(("timeout 20 %s"):format(R), ".open " .. st .. "\n")
    assert.is_truthy(out:find("error: .*" .. what:gsub("%p", "%%%0")), out)
  end)
end)
