-- A SQLite sink's database file moved away, removed or renamed over while
-- the pipeline holds it open (round 25). Round 20 refused the delivery and
-- the groups waited until the pipeline was opened again; a long-running
-- server's mirror stopped until it was restarted. Since 0.37 the next
-- delivery closes the old handle (the moved file left as it was), opens
-- the path (making it when absent) and writes the table whole from the
-- relation's committed rows, as a declaration does: the waiting groups
-- are covered by that rewrite, none applied twice. A file there SQLite
-- cannot use is refused, naming relation, file and table; the groups wait
-- and every delivery tries again.
local runnel = require "runnel"
local H = require "helper"

local COLS = H.SQLITE_COLS

local function rows(db, t) return H.sql(db, "SELECT id, v FROM " .. (t or "t") .. " ORDER BY id") end
local function mark(db, t) return H.sql(db, "SELECT seq FROM runnel_sinks WHERE tbl = '" .. (t or "t") .. "'") end

local function setup(opts) return H.sqlite_mirror(2, opts and opts.carried) end
local reopen = H.sqlite_remirror

-- after close and a new open, the mirror is the same, nothing doubled
local function same_after_reopen(dir, db, want)
  local p, t = reopen(dir, db)
  assert.equal(want, rows(db))
  t:insert{ id = 9, v = 9 }
  assert.equal(want .. "9|9\n", rows(db))
  assert.equal(p:seq() .. "\n", mark(db)) -- SQLite's mark: every group, once
  p:close()
end

describe("a SQLite sink whose file is moved while open (0.37)", function()
  after_each(H.cleanup)

  it("moved away: the next group's delivery writes the table whole at the path; the moved copy is left as it was", function()
    local dir, db, p, t = setup()
    assert(os.rename(db, dir .. "/backup.db"))
    t:insert{ id = 3, v = 3 }
    assert.equal("1|1\n2|2\n3|3\n", rows(db))
    assert.equal("1|1\n2|2\n", rows(dir .. "/backup.db"))
    assert.equal("2\n", mark(dir .. "/backup.db"))
    assert.equal("3\n", mark(db))
    t:update{ id = 1, v = 10 }
    t:delete{ id = 2 }
    p:deliver()
    assert.equal("1|10\n3|3\n", rows(db))
    assert.equal("1|1\n2|2\n", rows(dir .. "/backup.db"))
    p:close()
    same_after_reopen(dir, db, "1|10\n3|3\n")
  end)

  it("removed: the next group's delivery makes the file and writes the table whole", function()
    local dir, db, p, t = setup()
    assert(os.remove(db))
    t:insert{ id = 3, v = 3 }
    assert.equal("1|1\n2|2\n3|3\n", rows(db))
    p:close()
    same_after_reopen(dir, db, "1|1\n2|2\n3|3\n")
  end)

  it("renamed over by another SQLite database: the mirror is made there, its other tables left alone", function()
    local dir, db, p, t = setup()
    H.sql(dir .. "/other.db", "CREATE TABLE x (a); INSERT INTO x VALUES ('kept')")
    assert(os.rename(dir .. "/other.db", db))
    t:insert{ id = 3, v = 3 }
    assert.equal("1|1\n2|2\n3|3\n", rows(db))
    assert.equal("kept\n", H.sql(db, "SELECT a FROM x"))
    p:close()
    same_after_reopen(dir, db, "1|1\n2|2\n3|3\n")
    assert.equal("kept\n", H.sql(db, "SELECT a FROM x"))
  end)

  it("renamed over by a database whose table t has other columns: refused as a declaration is, until it is dropped", function()
    local dir, db, p, t = setup()
    H.sql(dir .. "/other.db", "CREATE TABLE t (a, b); INSERT INTO t VALUES (1, 2)")
    assert(os.rename(dir .. "/other.db", db))
    t:insert{ id = 3, v = 3 }
    local err = H.error_of(function() p:deliver() end)
    assert.matches('t: sqlite table "t" in ' .. db .. ' has columns "a"', err, 1, true)
    assert.matches("the groups for table \"t\" wait, none lost", err, 1, true)
    assert.equal("1|2\n", H.sql(db, "SELECT a, b FROM t"))
    H.sql(db, "DROP TABLE t")
    t:insert{ id = 4, v = 4 }
    assert.equal("1|1\n2|2\n3|3\n4|4\n", rows(db))
    p:close()
    same_after_reopen(dir, db, "1|1\n2|2\n3|3\n4|4\n")
  end)

  it("renamed over by a file that is not a SQLite database: refused naming relation, file and table; caught up once it is removed", function()
    local dir, db, p, t = setup()
    H.write(dir .. "/notes.txt", ("not a database at all\n"):rep(40))
    assert(os.rename(dir .. "/notes.txt", db))
    t:insert{ id = 3, v = 3 }
    local err = H.error_of(function() p:deliver() end)
    assert.matches("t: sqlite: " .. db .. " was replaced (moved, renamed over) while the pipeline held it open, and "
                   .. 'table "t" cannot be made at ' .. db .. " anew: ", err, 1, true)
    assert.matches("file is not a database", err, 1, true)
    assert.matches('the groups for table "t" wait, none lost, and each delivery tries again', err, 1, true)
    assert.equal(("not a database at all\n"):rep(40), H.read(db))
    t:insert{ id = 4, v = 4 }
    assert.matches("file is not a database", H.error_of(function() p:deliver() end), 1, true)
    assert.equal(("not a database at all\n"):rep(40), H.read(db))
    assert(os.remove(db))
    t:delete{ id = 1 }
    assert.equal("2|2\n3|3\n4|4\n", rows(db))
    p:close()
    same_after_reopen(dir, db, "2|2\n3|3\n4|4\n")
  end)

  it("two tables of one file moved: both are written whole at the path", function()
    local dir = H.tmpdir()
    local db = dir .. "/o.db"
    local p = runnel.open{ path = dir .. "/st", notes = false }
    local a, b = p:table("a", COLS), p:table("b", COLS)
    a:sink(runnel.sqlite(db, "a"))
    b:sink(runnel.sqlite(db, "b"))
    p:begin(); a:insert{ id = 1, v = 1 }; b:insert{ id = 1, v = 10 }; p:commit()
    assert(os.rename(db, dir .. "/backup.db"))
    a:insert{ id = 2, v = 2 }
    assert.equal("1|1\n2|2\n", rows(db, "a"))
    assert.equal("1|10\n", rows(db, "b"))
    assert.equal("1|1\n", rows(dir .. "/backup.db", "a"))
    p:close()
  end)

  it("a sink declared on the file beside another after it moved: the path is opened again first, for both", function()
    local dir, db, p, t = setup()
    assert(os.rename(db, dir .. "/backup.db"))
    local u = p:table("u", COLS)
    u:insert{ id = 5, v = 5 }
    u:sink(runnel.sqlite(db, "u")) -- was "attempt to write a readonly database": the old handle's file had moved
    assert.equal("1|1\n2|2\n", rows(db))
    assert.equal("5|5\n", rows(db, "u"))
    assert.equal("1|1\n2|2\n", rows(dir .. "/backup.db"))
    assert.equal("", H.sql(dir .. "/backup.db", "SELECT name FROM sqlite_master WHERE name = 'u'"))
    p:close()
  end)

  it("a stream's log goes on in the new file with the groups that waited, none twice", function()
    local dir = H.tmpdir()
    local db = dir .. "/o.db"
    local function open()
      local p = runnel.open{ path = dir .. "/st", notes = false }
      local s = p:stream("s", { {"k","int"} })
      s:sink(runnel.sqlite(db, "s"))
      return p, s
    end
    local p, s = open()
    s:insert{ k = 1 }
    assert(os.rename(db, dir .. "/backup.db"))
    s:insert{ k = 2 }
    s:insert{ k = 3 }
    assert.equal("2\n3\n", H.sql(db, "SELECT k FROM s ORDER BY runnel_id"))
    assert.equal("1\n", H.sql(dir .. "/backup.db", "SELECT k FROM s ORDER BY runnel_id"))
    p:close()
    p, s = open()
    s:insert{ k = 4 }
    assert.equal("2\n3\n4\n", H.sql(db, "SELECT k FROM s ORDER BY runnel_id"))
    p:close()
  end)
end)

describe("a SQLite sink whose file was opened again, then the process ended without closing", function()
  after_each(H.cleanup)

  it("the next open finds the tables in step: the waiting groups are not written again", function()
    local dir = H.tmpdir()
    local db = dir .. "/o.db"
    local decl = ([[
      local runnel = require "runnel"
      local p = runnel.open{ path = %q, notes = false }
      local t = p:table("t", { {"id","int"}, {"v","int"}, key = "id" })
      local s = p:stream("s", { {"k","int"} })
      t:sink(runnel.sqlite(%q, "t"))
      s:sink(runnel.sqlite(%q, "s"))
    ]]):format(dir .. "/st", db, db)
    H.run_script(dir .. "/a.lua", decl .. ([[
      p:begin(); t:insert{ id = 1, v = 1 }; s:insert{ k = 1 }; p:commit()
      assert(os.rename(%q, %q))
      p:begin(); t:insert{ id = 2, v = 2 }; s:insert{ k = 2 }; p:commit() -- opened again, written
      os.exit(0) -- no close: the outbox's marks in the state lag behind SQLite's
    ]]):format(db, dir .. "/backup.db"))
    assert.equal("1|1\n2|2\n", rows(db))
    assert.equal("2\n", H.sql(db, "SELECT k FROM s ORDER BY runnel_id"))
    H.run_script(dir .. "/b.lua", decl .. [[
      p:deliver()
      p:begin(); t:insert{ id = 3, v = 3 }; s:insert{ k = 3 }; p:commit()
      p:close()
    ]])
    assert.equal("1|1\n2|2\n3|3\n", rows(db))
    assert.equal("2\n3\n", H.sql(db, "SELECT k FROM s ORDER BY runnel_id"))
    assert.equal("1\n", H.sql(dir .. "/backup.db", "SELECT k FROM s ORDER BY runnel_id"))
  end)
end)

describe("a SQLite sink whose file is moved while open, with sync = false (carried transactions)", function()
  after_each(H.cleanup)


  it("moved away: nothing goes to the moved file; the delivery after the carried groups commit writes the table whole", function()
    local dir, db, p, t = setup{ carried = true }
    assert(os.rename(db, dir .. "/backup.db"))
    t:insert{ id = 3, v = 3 } -- carried
    t:update{ id = 2, v = 20 }
    assert.equal("1|1\n2|2\n", rows(dir .. "/backup.db"))
    p:deliver() -- commits the carried groups, then delivers
    assert.equal("1|1\n2|20\n3|3\n", rows(db))
    assert.equal("1|1\n2|2\n", rows(dir .. "/backup.db"))
    t:insert{ id = 4, v = 4 }
    p:flush()
    assert.equal("1|1\n2|20\n3|3\n4|4\n", rows(db))
    p:close()
    assert.equal("1|1\n2|2\n", rows(dir .. "/backup.db"))
    same_after_reopen(dir, db, "1|1\n2|20\n3|3\n4|4\n")
  end)

  it("removed: the table is written whole at the path", function()
    local dir, db, p, t = setup{ carried = true }
    assert(os.remove(db))
    t:insert{ id = 3, v = 3 }
    p:flush()
    assert.equal("1|1\n2|2\n3|3\n", rows(db))
    p:close()
    same_after_reopen(dir, db, "1|1\n2|2\n3|3\n")
  end)

  it("renamed over by a file that is not a SQLite database: refused, caught up once it is removed", function()
    local dir, db, p, t = setup{ carried = true }
    H.write(db .. ".tmp", ("garbage, not SQLite\n"):rep(40))
    assert(os.rename(db .. ".tmp", db))
    t:insert{ id = 3, v = 3 }
    local err = H.error_of(function() p:deliver() end)
    assert.matches('t: sqlite: ' .. db .. ' was replaced (moved, renamed over) while the pipeline held it open', err, 1, true)
    assert.matches("file is not a database", err, 1, true)
    assert.equal(("garbage, not SQLite\n"):rep(40), H.read(db))
    assert(os.remove(db))
    t:insert{ id = 4, v = 4 }
    p:deliver()
    assert.equal("1|1\n2|2\n3|3\n4|4\n", rows(db))
    p:close()
    same_after_reopen(dir, db, "1|1\n2|2\n3|3\n4|4\n")
  end)
end)
