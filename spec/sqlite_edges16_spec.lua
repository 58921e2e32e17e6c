-- A SQLite mirror whose waiting groups were dropped (p:drop_outbox, runnel
-- drop-outbox) and that is declared again has no record in the state, as
-- a new sink has none. A new sink writes the relation's rows over what
-- the table holds and deletes nothing (the rows may be another state's or
-- the user's); but runnel_sinks names this state as the table's writer, so
-- its rows are this state's, and a row the dropped groups deleted stayed
-- in the mirror for good. Such a table is written again whole.
local runnel = require "runnel"
local H = require "helper"

local COLS = { {"id","int"}, {"v","int"}, key = "id" }

describe("a SQLite mirror declared again after p:drop_outbox", function()
  after_each(H.cleanup)

  it("holds the relation's rows, not a row the dropped groups deleted", function()
    local dir = H.tmpdir()
    local db = dir .. "/o.db"
    local p = runnel.open{ path = dir .. "/st", notes = false }
    local t = p:table("t", COLS)
    t:sink(runnel.sqlite(db, "t"))
    p:begin(); t:insert{ id = 1, v = 1 }; t:insert{ id = 2, v = 2 }; p:commit()
    -- the deletion cannot be written: its group waits in the outbox
    H.sql(db, "CREATE TRIGGER keep BEFORE DELETE ON t BEGIN SELECT RAISE(ABORT, 'kept'); END")
    p:begin(); t:delete(1); t:insert{ id = 3, v = 3 }; p:commit()
    assert.is_false((pcall(p.deliver, p)))
    p:close()
    H.sql(db, "DROP TRIGGER keep")
    -- a deploy without the sink drops what waits for it
    p = runnel.open{ path = dir .. "/st", notes = false }
    t = p:table("t", COLS)
    local undeclared = p:stats().outbox_undeclared
    assert.are.equal(1, #undeclared)
    p:drop_outbox(undeclared[1].sink)
    p:begin(); t:update{ id = 2, v = 20 }; p:commit()
    p:close()
    -- declared again: the table is the relation's
    p = runnel.open{ path = dir .. "/st", notes = false }
    t = p:table("t", COLS)
    t:sink(runnel.sqlite(db, "t"))
    p:begin(); t:insert{ id = 4, v = 4 }; p:commit()
    p:close()
    assert.are.equal("2|20\n3|3\n4|4\n", H.sql(db, "SELECT id, v FROM t ORDER BY id"))
  end)

  it("still keeps rows it did not write when no state wrote the table", function()
    local dir = H.tmpdir()
    local db = dir .. "/o.db"
    H.sql(db, "CREATE TABLE t (id INTEGER, v INTEGER, PRIMARY KEY (id))")
    H.sql(db, "INSERT INTO t VALUES (9, 9)")
    local p = runnel.open{ path = dir .. "/st", notes = false }
    local t = p:table("t", COLS)
    p:begin(); t:insert{ id = 1, v = 1 }; p:commit()
    t:sink(runnel.sqlite(db, "t"))
    p:close()
    assert.are.equal("1|1\n9|9\n", H.sql(db, "SELECT id, v FROM t ORDER BY id"))
  end)
end)
