-- A file an older runnel (0.40 and before) let two states write through
-- two spellings of one table: runnel_sinks holds a mark "t" of state A and
-- a mark "T" of state B, and SQLite's "T" is "t". Round 29 refuses a
-- declaration whose table has no mark in its own spelling but one in
-- another (sqlite_case_edges29C2_spec.lua); a state whose own spelling is
-- marked was not checked, so on such a file A and B went on writing one
-- table after the upgrade, each overwriting and deleting the other's rows
-- (SINK-4; round 29 review). A mark in another spelling of another state
-- still there now refuses the declaration, naming that state; one of this
-- very state (it renamed its table under an older runnel), or of a state
-- gone, leaves it as it was.
local runnel = require "runnel"
local H = require "helper"

local COLS = H.SQLITE_COLS

-- Declares table t of the state at dir/name with a SQLite sink to table
-- tbl of db, inserts id = v = n and delivers: the pipeline and t.
local function state(dir, name, db, tbl, n)
  local p = runnel.open{ path = dir .. "/" .. name, notes = false }
  local t = p:table("t", COLS)
  t:sink(runnel.sqlite(db, tbl))
  if n then t:insert{ id = n, v = n } end
  p:deliver()
  return p, t
end

-- The file as an older runnel left it: A writes "t", B writes "T". B's
-- mark is hidden while A declares its table, as no mark of "T" was there
-- to be seen when the older runnel let A in.
local function two_writers(dir, db)
  local pb = state(dir, "B", db, "T", 2)
  pb:close()
  H.sql(db, "UPDATE runnel_sinks SET tbl = 'hidden' WHERE tbl = 'T'")
  local pa = state(dir, "A", db, "t", 1)
  pa:close()
  H.sql(db, "UPDATE runnel_sinks SET tbl = 'T' WHERE tbl = 'hidden'")
  assert.equal("T|B\nt|A\n", H.sql(db, "SELECT tbl, substr(state_path, -1) FROM runnel_sinks ORDER BY tbl"))
end

describe("a SQLite table marked in two spellings by an older runnel (round 29 review)", function()
  after_each(H.cleanup)

  it("refuses each of the two states while the other is there, naming it", function()
    local dir = H.tmpdir()
    local db = dir .. "/o.db"
    two_writers(dir, db)
    local real = H.sh("realpath " .. dir):gsub("\n$", "")
    for _, c in ipairs({ { "A", "t", "T", "B" }, { "B", "T", "t", "A" } }) do
      local p = runnel.open{ path = dir .. "/" .. c[1], notes = false }
      local t = p:table("t", COLS)
      assert.equal(('t: sqlite: table "%s" in %s is table "%s" to SQLite (its names ignore ASCII case), which '
                    .. 'runnel_sinks records as written by the runnel state at %s/%s too (an older runnel let two '
                    .. 'states write it); one state writes a table: remove one of the two states, or the row of '
                    .. 'runnel_sinks naming it'):format(c[2], db, c[3], real, c[4]),
                   H.error_of(t.sink, t, runnel.sqlite(db, c[2])))
      p:close()
    end
  end)

  it("lets the state go on once the other state is removed", function()
    local dir = H.tmpdir()
    local db = dir .. "/o.db"
    two_writers(dir, db)
    H.sh("rm -rf " .. dir .. "/B")
    local p, t = state(dir, "A", db, "t", 3)
    t:update{ id = 1, v = 10 }
    p:deliver()
    assert.truthy(H.sql(db, "SELECT id, v FROM t ORDER BY id"):find("1|10\n", 1, true))
    p:close()
  end)

  it("lets a state go on whose own mark is in the other spelling too", function()
    local dir = H.tmpdir()
    local db = dir .. "/o.db"
    local p = state(dir, "A", db, "t", 1)
    p:close()
    H.sql(db, "INSERT INTO runnel_sinks SELECT 'T', seq, state, state_path, made FROM runnel_sinks WHERE tbl = 't'")
    local t
    p, t = state(dir, "A", db, "t", 2)
    t:delete{ id = 1 }
    p:deliver()
    assert.equal("2|2\n", H.sql(db, "SELECT id, v FROM t ORDER BY id"))
    p:close()
  end)
end)
