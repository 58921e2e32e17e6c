-- SQLite's table names ignore ASCII case; runnel_sinks' tbl column does
-- not. A second state declaring table "T" where another state writes "t"
-- found no mark of "T", took the table as new (SINK-3) and wrote into it:
-- the two states' rows mixed in one table, each overwriting the other's,
-- the promise "one state writes a table" (SINK-4) broken. The same state
-- naming its table "T" after "t" kept two marks of one table. A mark of
-- the table spelled otherwise now refuses the declaration, naming the
-- spelling the mark holds and the state that writes it.
local runnel = require "runnel"
local H = require "helper"

local COLS = H.SQLITE_COLS
local function rows(db) return H.sql(db, "SELECT id, v FROM t ORDER BY id") end

describe("a SQLite sink naming a table spelled in another case (round 29)", function()
  after_each(H.cleanup)

  it("a second state is refused the table another state writes, whatever the case", function()
    local dir, db, pa, ta = H.sqlite_mirror(1)
    local pb = runnel.open{ path = dir .. "/other", notes = false }
    local tb = pb:table("t", COLS)
    tb:insert{ id = 2, v = 20 }
    local err = H.error_of(tb.sink, tb, runnel.sqlite(db, "T"))
    assert.equal(('t: sqlite: table "T" in %s is table "t" to SQLite (its names ignore ASCII case), which runnel_sinks '
                  .. 'records as written by the runnel state at %s; one state writes a table: name it "t" (the '
                  .. 'spelling its mark holds), or name another table'):format(db, H.sh("realpath " .. dir .. "/st"):gsub("\n$", "")),
                 err)
    assert.equal("1|1\n", rows(db)) -- B's row 2 never reached A's table
    ta:insert{ id = 2, v = 2 }
    tb:update{ id = 2, v = 21 }
    pb:deliver()
    assert.equal("1|1\n2|2\n", rows(db)) -- A's table holds A's rows only
    assert.equal("t|2\n", H.sql(db, "SELECT tbl, seq FROM runnel_sinks ORDER BY tbl"))
    pa:close()
    pb:close()
  end)

  it("the state that writes the table is told the spelling its mark holds; that spelling goes on", function()
    local dir, db, p = H.sqlite_mirror(2)
    p:close()
    p = runnel.open{ path = dir .. "/st", notes = false }
    local t = p:table("t", COLS)
    assert.matches('table "T" in .* is table "t" to SQLite', H.error_of(t.sink, t, runnel.sqlite(db, "T")))
    t:sink(runnel.sqlite(db, "t"))
    t:delete{ id = 1 }
    p:deliver()
    assert.equal("2|2\n", rows(db))
    assert.equal("t|3\n", H.sql(db, "SELECT tbl, seq FROM runnel_sinks ORDER BY tbl")) -- one mark
    p:close()
  end)

  it("a table the user made, with no mark, is taken under any spelling", function()
    local dir = H.tmpdir()
    local db = dir .. "/o.db"
    H.sql(db, 'CREATE TABLE t ("id" INTEGER, "v" INTEGER, PRIMARY KEY ("id"))')
    local p = runnel.open{ path = dir .. "/st", notes = false }
    local t = p:table("t", COLS)
    t:sink(runnel.sqlite(db, "T"))
    t:insert{ id = 1, v = 1 }
    assert.equal("1|1\n", rows(db))
    assert.equal("T|1\n", H.sql(db, "SELECT tbl, seq FROM runnel_sinks"))
    p:close()
  end)
end)
