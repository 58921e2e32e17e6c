-- A SQLite sink's database file moved, renamed over or removed while the
-- pipeline held it open (round 20). SQLite writes through its open file
-- descriptor: every later group went into the moved file (a backup the
-- user meant to keep as it was) or into a removed one no path names, and
-- the file at the path never got them. The delivery is refused, naming
-- the relation, the file and the table; the groups wait (none lost), and
-- the pipeline opened again writes the table at the path anew.
local runnel = require "runnel"
local H = require "helper"

local COLS = { {"id","int"}, {"v","int"}, key = "id" }

describe("a SQLite sink whose file is", function()
  after_each(H.cleanup)

  local function setup()
    local dir = H.tmpdir()
    local db = dir .. "/o.db"
    local p = runnel.open{ path = dir .. "/st", notes = false }
    local t = p:table("t", COLS)
    t:sink(runnel.sqlite(db, "t"))
    t:insert{ id = 1, v = 1 }
    assert.equal("1|1\n", H.sql(db, "SELECT id, v FROM t"))
    return dir, db, p, t
  end

  local function reopen(dir, db)
    local p = runnel.open{ path = dir .. "/st", notes = false }
    local t = p:table("t", COLS)
    t:sink(runnel.sqlite(db, "t"))
    p:deliver()
    return p, t
  end

  it("moved away: refused, the moved copy left as it was, the path written anew at the next open", function()
    local dir, db, p, t = setup()
    assert(os.rename(db, dir .. "/backup.db"))
    t:insert{ id = 2, v = 2 } -- committed: the sink's failure fails no group
    local ok, err = pcall(p.deliver, p)
    assert.is_false(ok)
    assert.matches("t: sqlite: " .. db .. " was moved or removed while the pipeline held it open: the groups for "
                   .. 'table "t" wait, none lost; open the pipeline again to write the table at ' .. db .. " anew",
                   err, 1, true)
    assert.equal("1|1\n", H.sql(dir .. "/backup.db", "SELECT id, v FROM t ORDER BY id"))
    assert.equal(2, t:count())
    p:close()
    p, t = reopen(dir, db)
    t:insert{ id = 3, v = 3 }
    assert.equal("1|1\n2|2\n3|3\n", H.sql(db, "SELECT id, v FROM t ORDER BY id"))
    assert.equal("1|1\n", H.sql(dir .. "/backup.db", "SELECT id, v FROM t ORDER BY id"))
    p:close()
  end)

  it("removed: refused, then written anew", function()
    local dir, db, p, t = setup()
    assert(os.remove(db))
    t:insert{ id = 2, v = 2 }
    local ok, err = pcall(p.deliver, p)
    assert.is_false(ok)
    assert.matches("was moved or removed while the pipeline held it open", err, 1, true)
    p:close()
    p = reopen(dir, db)
    assert.equal("1|1\n2|2\n", H.sql(db, "SELECT id, v FROM t ORDER BY id"))
    p:close()
  end)

  it("renamed over by another file: refused, then written anew", function()
    local dir, db, p, t = setup()
    H.sql(dir .. "/other.db", "CREATE TABLE x (a)")
    assert(os.rename(dir .. "/other.db", db))
    t:insert{ id = 2, v = 2 }
    local ok, err = pcall(p.deliver, p)
    assert.is_false(ok)
    assert.matches("was replaced (moved, renamed over) while the pipeline held it open", err, 1, true)
    p:close()
    p = reopen(dir, db)
    assert.equal("1|1\n2|2\n", H.sql(db, "SELECT id, v FROM t ORDER BY id"))
    p:close()
  end)
end)
