-- A SQLite sink's database file moved, renamed over or removed while the
-- pipeline held it open (round 20). SQLite writes through its open file
-- descriptor: every later group went into the moved file (a backup the
-- user meant to keep as it was) or into a removed one no path names, and
-- the file at the path never got them. Round 20 refused the delivery
-- until the pipeline was opened again. CHANGED in 0.37 (round 25,
-- sqlite_reopen_edges25_spec.lua has the detail): the next delivery opens
-- the path again and writes the table there whole; the moved copy is left
-- as it was, and the pipeline opened again finds the table in step.
local H = require "helper"

describe("a SQLite sink whose file is", function()
  after_each(H.cleanup)

  local function setup() return H.sqlite_mirror(1) end
  local reopen = H.sqlite_remirror

  it("moved away: the moved copy left as it was, the path written anew at the next delivery (CHANGED in 0.37)", function()
    local dir, db, p, t = setup()
    assert(os.rename(db, dir .. "/backup.db"))
    t:insert{ id = 2, v = 2 }
    p:deliver()
    assert.equal("1|1\n2|2\n", H.sql(db, "SELECT id, v FROM t ORDER BY id"))
    assert.equal("1|1\n", H.sql(dir .. "/backup.db", "SELECT id, v FROM t ORDER BY id"))
    assert.equal(2, t:count())
    p:close()
    p, t = reopen(dir, db)
    t:insert{ id = 3, v = 3 }
    assert.equal("1|1\n2|2\n3|3\n", H.sql(db, "SELECT id, v FROM t ORDER BY id"))
    assert.equal("1|1\n", H.sql(dir .. "/backup.db", "SELECT id, v FROM t ORDER BY id"))
    p:close()
  end)

  it("removed: written anew at the next delivery (CHANGED in 0.37)", function()
    local dir, db, p, t = setup()
    assert(os.remove(db))
    t:insert{ id = 2, v = 2 }
    p:deliver()
    assert.equal("1|1\n2|2\n", H.sql(db, "SELECT id, v FROM t ORDER BY id"))
    p:close()
    p = reopen(dir, db)
    assert.equal("1|1\n2|2\n", H.sql(db, "SELECT id, v FROM t ORDER BY id"))
    p:close()
  end)

  it("renamed over by another file: written anew at the next delivery (CHANGED in 0.37)", function()
    local dir, db, p, t = setup()
    H.sql(dir .. "/other.db", "CREATE TABLE x (a)")
    assert(os.rename(dir .. "/other.db", db))
    t:insert{ id = 2, v = 2 }
    p:deliver()
    assert.equal("1|1\n2|2\n", H.sql(db, "SELECT id, v FROM t ORDER BY id"))
    assert.equal("", H.sql(db, "SELECT a FROM x"))
    p:close()
    p = reopen(dir, db)
    assert.equal("1|1\n2|2\n", H.sql(db, "SELECT id, v FROM t ORDER BY id"))
    p:close()
  end)
end)
