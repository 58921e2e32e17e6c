-- One SQLite file under two names (a hard link, a bind mount): the sinks
-- of one pipeline share a connection per real path, and a table another
-- sink keeps is refused by looking among that connection's sinks only. A
-- second relation declared on table "t" through the other name took the
-- table as its own: both relations wrote one table, each deleting and
-- overwriting the other's rows (round 29). A table kept through another
-- name of the same file (same device and inode) is now refused too,
-- naming both names and the relation that keeps it; other tables of the
-- file still go through either name.
local runnel = require "runnel"
local H = require "helper"

local COLS = H.SQLITE_COLS

describe("a SQLite file reached through a hard link (round 29)", function()
  after_each(H.cleanup)

  local function setup()
    local dir = H.tmpdir()
    local one, two = dir .. "/one.db", dir .. "/two.db"
    H.sql(one, "CREATE TABLE other (a)")
    assert(os.execute(("ln '%s' '%s'"):format(one, two)))
    local p = runnel.open{ path = dir .. "/st", notes = false }
    return p, one, two
  end

  it("refuses a second relation's sink on a table another sink keeps through the other name", function()
    local p, one, two = setup()
    local t, u = p:table("t", COLS), p:table("u", COLS)
    t:sink(runnel.sqlite(one, "t"))
    assert.equal(('u: sqlite: table "T" in %s is table "t" in %s (one file under two names: a hard link), which a '
                  .. 'sink of t keeps; name another table'):format(two, one),
                 H.error_of(u.sink, u, runnel.sqlite(two, "T")))
    assert.matches('u: sqlite: table "t" in .*two.db is table "t" in .*one.db',
                   H.error_of(u.sink, u, runnel.sqlite(two, "t")))
    t:insert{ id = 1, v = 1 }
    u:insert{ id = 1, v = 10 }
    u:insert{ id = 2, v = 20 }
    t:delete{ id = 1 }
    t:insert{ id = 3, v = 3 }
    p:close()
    assert.equal("3|3\n", H.sql(one, "SELECT id, v FROM t ORDER BY id")) -- t's rows only
  end)

  it("still takes another table of the file through the other name", function()
    local p, one, two = setup()
    local t, u = p:table("t", COLS), p:table("u", COLS)
    t:sink(runnel.sqlite(one, "t"))
    u:sink(runnel.sqlite(two, "u"))
    t:insert{ id = 1, v = 1 }
    u:insert{ id = 2, v = 2 }
    p:close()
    assert.equal("1|1\n", H.sql(one, "SELECT id, v FROM t"))
    assert.equal("2|2\n", H.sql(one, "SELECT id, v FROM u"))
  end)
end)
