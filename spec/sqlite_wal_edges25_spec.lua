-- A WAL-mode SQLite mirror moved or renamed over (round 25, found by a
-- review of SINK-7): the path was opened again while the old handle (on
-- the moved file) still held its WAL. SQLite names a database's -wal and -shm by
-- the path, not the file: with the mirror in WAL mode (a user's
-- PRAGMA journal_mode=WAL, kept in the file, so readers never block the
-- sink) the new handle finds the OLD database's o.db-wal/-shm beside the
-- file renamed over, and reads the old database's frames as its own pages
-- (the user's database is replaced by the old mirror); with the file moved
-- away, the new empty file's open deletes the old WAL (SQLite does so for a
-- zero-length database), so the moved copy loses every frame not yet
-- checkpointed. (0.36 stranded that WAL as o.db-wal, recoverable by hand.)
-- The old handle's WAL is now emptied into the moved file first.
local runnel = require "runnel"
local H = require "helper"

local COLS = { {"id","int"}, {"v","int"}, key = "id" }

describe("SQLite reopen with a WAL-mode mirror", function()
  after_each(H.cleanup)

  it("renamed over by another WAL database: that database is left whole", function()
    local dir = H.tmpdir()
    local db = dir .. "/o.db"
    H.sql(db, "PRAGMA journal_mode=WAL; CREATE TABLE keep (a)")
    local p = runnel.open{ path = dir .. "/st", notes = false }
    local t = p:table("t", COLS)
    t:sink(runnel.sqlite(db, "t"))
    for i = 1, 50 do t:insert{ id = i, v = i } end
    assert.is_truthy(io.open(db .. "-wal")) -- the old handle's WAL, frames not checkpointed
    H.sql(dir .. "/other.db", "PRAGMA journal_mode=WAL; CREATE TABLE x (a); INSERT INTO x VALUES ('kept')")
    assert(os.rename(dir .. "/other.db", db))
    t:insert{ id = 51, v = 51 }
    assert.equal("ok\n", H.sql(db, "PRAGMA integrity_check"))
    assert.equal("kept\n", H.sql(db, "SELECT a FROM x"))
    assert.equal("51\n", H.sql(db, "SELECT count(*) FROM t"))
    p:close()
    assert.equal("ok\n", H.sql(db, "PRAGMA integrity_check"))
    assert.equal("kept\n", H.sql(db, "SELECT a FROM x"))
    assert.equal("51\n", H.sql(db, "SELECT count(*) FROM t"))
  end)

  it("moved away: the moved copy keeps every group delivered to it", function()
    local dir = H.tmpdir()
    local db = dir .. "/o.db"
    H.sql(db, "PRAGMA journal_mode=WAL")
    local p = runnel.open{ path = dir .. "/st", notes = false }
    local t = p:table("t", COLS)
    t:sink(runnel.sqlite(db, "t"))
    for i = 1, 50 do t:insert{ id = i, v = i } end
    assert(os.rename(db, dir .. "/backup.db"))
    t:insert{ id = 51, v = 51 }
    assert.equal("51\n", H.sql(db, "SELECT count(*) FROM t"))
    p:close()
    assert.equal("ok\n", H.sql(db, "PRAGMA integrity_check"))
    assert.equal("51\n", H.sql(db, "SELECT count(*) FROM t"))
    assert.equal("50\n", H.sql(dir .. "/backup.db", "SELECT count(*) FROM t"))
  end)
end)
