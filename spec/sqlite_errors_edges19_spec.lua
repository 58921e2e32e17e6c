-- An SQLite sink's failures name the table and the database file as well
-- as the relation and the step (core/sqlite.c, sink_fail): a pipeline with
-- several SQLite sinks, or one file holding several tables, says which one
-- failed (before: "s: sqlite: BEGIN: database is locked").
local runnel = require "runnel"
local H = require "helper"

describe("an SQLite sink's failure", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  it("names the table and the file when the database is locked", function()
    local db = dir .. "/out.db"
    local p = runnel.open{ path = dir .. "/st" }
    local s = p:table("s", { {"k","int"}, key = "k" })
    s:sink(runnel.sqlite(db, "mirror", { busy_timeout = 0 }))
    s:insert{ k = 1 }
    local marker = dir .. "/locked"
    local holder = io.popen(("sqlite3 %s > /dev/null"):format(db), "w")
    holder:write(("BEGIN EXCLUSIVE;\n.shell touch %s\n"):format(marker))
    holder:flush()
    local locked = false
    for _ = 1, 1000 do -- up to 20 s on a slow machine, not a timing assertion
      if H.read(marker) then locked = true; break end
      os.execute("sleep 0.02")
    end
    s:insert{ k = 2 } -- committed; its delivery waits for the lock
    local ok, err = pcall(p.deliver, p)
    holder:write("ROLLBACK;\n")
    holder:close()
    assert.is_true(locked, "the shell never locked the file")
    assert.is_false(ok)
    assert.matches(('s: sqlite table "mirror" in %s: BEGIN: database is locked'):format(db), err, 1, true)
    p:deliver() -- the lock gone: the groups that waited go through
    assert.equal(tostring(s:count()) .. "\n", H.sql(db, "SELECT count(*) FROM mirror"))
    p:close()
  end)
end)
