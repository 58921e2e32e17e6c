-- 5ea63dd moved runnel inspect, query and snapshot into a child process
-- (lua/cli.c in_child) so that a crash on a damaged state is named. When
-- fork fails (a container's pids limit, EAGAIN), they failed outright:
-- "runnel: fork: Resource temporarily unavailable", exit 1, naming
-- neither the command nor the state, where they had read the state in
-- their own process before. They do so again when no child can be made
-- (a crash then is said by runnel's SIGBUS handler), and so does verify.
-- fork is made to fail by an LD_PRELOAD shim (pending without a compiler).
local H = require "helper"
local runnel = require "runnel"

local R = H.runnel_bin

describe("runnel inspect, query, snapshot and verify when fork fails", function()
  after_each(H.cleanup)

  it("read the state in their own process, as before they read in a child", function()
    local dir = H.tmpdir()
    H.write(dir .. "/nofork.c", "#include <errno.h>\n#include <unistd.h>\n"
      .. "pid_t fork(void) { errno = EAGAIN; return -1; }\n")
    -- the compiler runs without the preload of make asan (libasan in cc1 reports cc1's leaks)
    local _, cerr, built = H.sh(("env -u LD_PRELOAD cc -shared -fPIC -o '%s/nofork.so' '%s/nofork.c'"):format(dir, dir))
    if built ~= 0 then return pending("no C compiler for the shim: " .. cerr) end
    local p = runnel.open(dir .. "/st")
    p:table("t", { {"id","int"}, key = "id" }):insert{ id = 7 }
    p:close()
    -- after what is preloaded already: under make asan, libasan must come first
    local preloaded = os.getenv("LD_PRELOAD")
    local pre = ("LD_PRELOAD='%s%s/nofork.so' "):format(preloaded and preloaded .. " " or "", dir)
    local out, err, code = H.sh(pre .. R .. " query " .. dir .. "/st t 7 --format csv")
    assert.are.same({ "id\n7\n", "", 0 }, { out, err, code })
    out, err, code = H.sh(pre .. R .. " inspect " .. dir .. "/st")
    assert.are.same({ "", 0 }, { err, code })
    assert.is_truthy(out:find("\n t        | table |    1 |       2 | id int key\n", 1, true), out)
    out, err, code = H.sh(pre .. R .. " verify " .. dir .. "/st")
    assert.are.same({ "", 0 }, { err, code })
    assert.is_truthy(out:find(": whole (0 damaged, 0 notes)\n", 1, true), out)
    out, err, code = H.sh(pre .. R .. " snapshot " .. dir .. "/st " .. dir .. "/copy")
    assert.are.same({ "", "", 0 }, { out, err, code })
    assert.are.equal("data.mdb\n", (H.sh(("ls -A '%s/copy'"):format(dir))))
    -- the shim does fail fork: a command that forks says so
    _, err = H.sh(pre .. "sh -c 'true & wait'")
    assert.is_truthy(err:find("ork", 1, true), err)
  end)
end)
