-- runnel.sqlite at its edges (round 2): a mirror the user changed, two
-- states and one table, rows SQLite refuses. Checked through SQLite itself
-- (the sqlite3 tool).
local runnel = require "runnel"
local H = require "helper"

local sql = H.sql

local function decl(p, extra)
  local cols = { {"k","int"}, {"v","int"}, key = "k" }
  if extra then cols[#cols + 1] = extra end
  return p:table("t", cols)
end

describe("runnel.sqlite: a mirror changed outside runnel", function()
  local dir, db
  before_each(function() dir = H.tmpdir(); db = dir .. "/out.db" end)
  after_each(H.cleanup)
  local function open() return runnel.open{ path = dir .. "/st", notes = false } end

  -- it was dropped and made again, silently: the user's column and its values gone
  it("is refused, naming the table and what differs, when the user added a column; nothing is dropped", function()
    local p = open()
    local t = decl(p)
    t:sink(runnel.sqlite(db, "t"))
    t:insert{ k = 1, v = 1 }
    p:close()
    sql(db, "alter table t add column note text; update t set note = 'mine' where k = 1")
    p = open()
    t = decl(p)
    local err = H.error_of(t.sink, t, runnel.sqlite(db, "t"))
    assert.equal(('t: sqlite table "t" in %s was changed since runnel made it: it has column "note" TEXT, which the '
                  .. 'relation has not; runnel drops no table it did not make as it is: drop or rename it (runnel then '
                  .. "makes it and writes the relation's rows), or name another table"):format(db), err)
    assert.equal("1|1|mine\n", sql(db, "select * from t"))
    t:insert{ k = 2, v = 2 } -- the state goes on; the table waits for the user
    p:close()
    assert.equal("1|1|mine\n", sql(db, "select * from t"))
  end)

  it("is refused when the user changed a column's type, even as the relation changes too", function()
    local p = open()
    local t = decl(p)
    t:sink(runnel.sqlite(db, "t"))
    t:insert{ k = 1, v = 1 }
    p:close()
    sql(db, "alter table t rename column v to w")
    p = open()
    t = decl(p, {"x","int", null = true})
    local err = H.error_of(t.sink, t, runnel.sqlite(db, "t"))
    assert.matches('t: sqlite table "t" in .- was changed since runnel made it: it has column "w" INTEGER, which the '
                   .. 'relation has not; it lacks the relation\'s columns "v" INTEGER, "x" INTEGER; ', err)
    assert.equal("1|1\n", sql(db, "select * from t"))
    p:close()
  end)

  it("is refused when the relation changed but the user added a constraint or an index to the mirror", function()
    local p = open()
    local t = decl(p)
    t:sink(runnel.sqlite(db, "t"))
    t:insert{ k = 1, v = 1 }
    p:close()
    sql(db, "create index by_v on t (v)")
    p = open()
    t = decl(p, {"x","int", null = true})
    assert.matches('t: sqlite table "t" in .- has index "by_v", which runnel did not make: to follow the relation\'s '
                   .. 'columns runnel would drop the table, and it with it: drop the index %(runnel then makes the '
                   .. 'table anew%), or name another table', H.error_of(t.sink, t, runnel.sqlite(db, "t")))
    assert.equal("1\n", sql(db, "select count(*) from sqlite_master where name = 'by_v'"))
    sql(db, "drop index by_v")
    t:sink(runnel.sqlite(db, "t")) -- now it follows the relation
    assert.equal("1|1|\n", sql(db, "select * from t"))
    p:close()
  end)

  it("still follows the relation when nobody touched the mirror, also one an older runnel made", function()
    local p = open()
    local t = decl(p)
    t:sink(runnel.sqlite(db, "t"))
    t:insert{ k = 1, v = 1 }
    p:close()
    -- an older runnel's runnel_sinks: (tbl, seq) only, no record of what it made
    sql(db, "create table old as select tbl, seq from runnel_sinks; drop table runnel_sinks; "
            .. "create table runnel_sinks (tbl TEXT PRIMARY KEY, seq INTEGER NOT NULL); "
            .. "insert into runnel_sinks select * from old; drop table old")
    p = open()
    t = decl(p, {"x","int", null = true})
    assert.matches('t: sqlite table "t" in .- differs from the relation, and runnel has no record of making it as it '
                   .. 'is %(an older runnel made it, or it was changed, or it was there before the sink%): it lacks the '
                   .. 'relation\'s column "x" INTEGER; ', H.error_of(t.sink, t, runnel.sqlite(db, "t")))
    p:close()
    p = open()
    t = decl(p)
    t:sink(runnel.sqlite(db, "t")) -- as made: recorded now
    p:close()
    p = open()
    t = decl(p, {"x","int", null = true})
    t:sink(runnel.sqlite(db, "t"))
    t:insert{ k = 2, v = 2, x = 3 }
    assert.equal("1|1|\n2|2|3\n", sql(db, "select * from t order by k"))
    p:close()
  end)
end)

describe("runnel.sqlite: two states and one table", function()
  local dir, db
  before_each(function() dir = H.tmpdir(); db = dir .. "/out.db" end)
  after_each(H.cleanup)

  -- runnel_sinks was keyed by the table alone: the second state's mark was
  -- read as the first's, which then skipped its groups or wiped the table
  it("refuses a second state writing a table, naming the table, the file and the other state", function()
    local one = runnel.open(dir .. "/one")
    local t1 = decl(one)
    t1:sink(runnel.sqlite(db, "t"))
    t1:insert{ k = 1, v = 1 }
    local two = runnel.open(dir .. "/two")
    local t2 = decl(two)
    for k = 10, 14 do t2:insert{ k = k, v = k } end
    local err = H.error_of(t2.sink, t2, runnel.sqlite(db, "t"))
    assert.equal(('t: sqlite table "t" in %s is written by another runnel state (%s, id ID); one state writes a table: '
                  .. 'name another table (or, when that state is no more, remove its directory: the table then goes to '
                  .. 'the next state that declares it)'):format(db, dir .. "/one"), (err:gsub("id %x+%)", "id ID)")))
    assert.equal("1|1\n", sql(db, "select * from t order by k"))
    one:close()
    assert.matches("is written by another runnel state", H.error_of(t2.sink, t2, runnel.sqlite(db, "t"))) -- closed, not gone
    two:close()
    one = runnel.open(dir .. "/one")
    t1 = decl(one)
    t1:sink(runnel.sqlite(db, "t"))
    t1:insert{ k = 2, v = 2 }
    one:close()
    assert.equal("1|1\n2|2\n", sql(db, "select * from t order by k"))
  end)

  it("hands the table to a new state once the state that wrote it is gone, deleting none of its rows", function()
    local one = runnel.open(dir .. "/one")
    local t1 = decl(one)
    t1:sink(runnel.sqlite(db, "t"))
    t1:insert{ k = 1, v = 1 }
    one:close()
    H.sh("rm -rf " .. dir .. "/one")
    local two = runnel.open(dir .. "/two")
    local t2 = decl(two)
    t2:insert{ k = 2, v = 2 }
    t2:sink(runnel.sqlite(db, "t"))
    t2:insert{ k = 3, v = 3 }
    two:close()
    assert.equal("1|1\n2|2\n3|3\n", sql(db, "select * from t order by k"))
    H.sh("rm -rf " .. dir .. "/two")
    -- temporary states are gone once closed
    for k = 4, 5 do
      local p = runnel.open()
      local t = decl(p)
      t:sink(runnel.sqlite(db, "t"))
      t:insert{ k = k, v = k }
      p:close()
    end
    assert.equal("1|1\n2|2\n3|3\n4|4\n5|5\n", sql(db, "select * from t order by k"))
  end)

  it("upgrades an older runnel's runnel_sinks in place: the table stays in step, its state is recorded", function()
    local one = runnel.open(dir .. "/one")
    local t1 = decl(one)
    t1:sink(runnel.sqlite(db, "t"))
    t1:insert{ k = 1, v = 1 }
    t1:insert{ k = 2, v = 2 }
    one:close()
    sql(db, "create table old as select tbl, seq from runnel_sinks; drop table runnel_sinks; "
            .. "create table runnel_sinks (tbl TEXT PRIMARY KEY, seq INTEGER NOT NULL); "
            .. "insert into runnel_sinks select * from old; drop table old; insert into t values (7, 7)")
    one = runnel.open(dir .. "/one")
    t1 = decl(one)
    t1:sink(runnel.sqlite(db, "t")) -- in step: no rewrite (row 7, not runnel's, stays)
    t1:insert{ k = 3, v = 3 }
    assert.equal("1|1\n2|2\n3|3\n7|7\n", sql(db, "select * from t order by k"))
    assert.equal("t|3|1\n", sql(db, "select tbl, seq, state is not null from runnel_sinks"))
    local two = runnel.open(dir .. "/two")
    local t2 = decl(two)
    assert.matches("is written by another runnel state", H.error_of(t2.sink, t2, runnel.sqlite(db, "t")))
    two:close()
    one:close()
  end)
end)

describe("runnel.sqlite: rows the table refuses", function()
  local dir, db, p
  before_each(function()
    dir = H.tmpdir()
    db = dir .. "/out.db"
    p = runnel.open(dir .. "/st")
  end)
  after_each(function() p:close(); H.cleanup() end)

  -- the group waited behind its bad row for good: a later group fixing the
  -- row in runnel was delivered with it and refused with it, every time
  it("names the table, the group and the row; a later group fixing the row lets both through, once", function()
    sql(db, "create table t (k INTEGER, v INTEGER CHECK (v >= 0), PRIMARY KEY (k))")
    local t = decl(p)
    t:sink(runnel.sqlite(db, "t"))
    t:insert{ k = 1, v = 1 }
    p:batch(function() t:insert{ k = 2, v = -5 }; t:insert{ k = 3, v = 3 } end) -- committed in runnel
    local seq = p:seq()
    local err = H.error_of(p.deliver, p)
    assert.equal(('t: sqlite: writing: CHECK constraint failed: v >= 0 (table "t" in %s, group %d, row k = 2); the group '
                  .. 'waits in the outbox: fix the row or the table, and a later delivery writes it'):format(db, seq), err)
    assert.equal(err, H.error_of(p.deliver, p)) -- every attempt says it
    assert.equal("1|1\n", sql(db, "select * from t order by k")) -- nothing of the group: row 3 waits too
    t:update{ k = 2, v = 5 } -- the fix rides in the same SQLite transaction
    p:deliver()
    assert.equal("1|1\n2|5\n3|3\n", sql(db, "select * from t order by k"))
    assert.equal(0, p:stats().outbox[next(p:stats().outbox)])
    assert.equal("t|" .. p:seq() .. "\n", sql(db, "select tbl, seq from runnel_sinks"))
  end)

  it("names the column of a NOT NULL the table adds; deleting the row fixes it too", function()
    sql(db, "create table t (k INTEGER, v INTEGER NOT NULL, PRIMARY KEY (k))")
    local t = p:table("t", { {"k","int"}, {"v","int", null = true}, key = "k" })
    t:sink(runnel.sqlite(db, "t"))
    t:insert{ k = 1 }
    assert.matches("t: sqlite: writing: NOT NULL constraint failed: t.v (table \"t\" in " .. db .. ", group 1, row k = 1)",
                   H.error_of(p.deliver, p), 1, true)
    t:insert{ k = 2, v = 2 }
    t:delete{ k = 1 }
    p:deliver()
    assert.equal("2|2\n", sql(db, "select * from t order by k"))
  end)
end)

describe("runnel.sqlite: values of any type", function()
  local dir, db, p
  before_each(function()
    dir = H.tmpdir()
    db = dir .. "/out.db"
    p = runnel.open()
  end)
  after_each(function() p:close(); H.cleanup() end)

  -- a string was written as it is: "hello" was no JSON, and the string
  -- "[1,2]" read back as a list; true was written as 1
  it("writes them as JSON text, as documented, so sqlite_source reads back what was written", function()
    local cols = { {"k","int"}, {"a","any", null = true}, key = "k" }
    local t = p:table("t", cols)
    t:sink(runnel.sqlite(db, "t"))
    local values = { "hello", true, { 1, 2 }, "[1,2]", 2.5, 7, false }
    for k = 1, 7 do t:insert{ k = k, a = values[k] } end
    t:insert{ k = 8 }
    assert.equal('1|"hello"\n2|true\n3|[1,2]\n4|"[1,2]"\n5|2.5\n6|7\n7|false\n8|\n', sql(db, "select k, a from t order by k"))
    cols.source = runnel.sqlite_source(db, "t")
    local lk = p:lookup("lk", cols)
    local s = p:stream("s", { {"k","int"} })
    local got = {}
    s:join(lk, { on = "k", kind = "left" }):sink(function(_, row) got[row.k] = row.a end)
    for k = 1, 8 do s:insert{ k = k } end
    assert.same({ "hello", true, { 1, 2 }, "[1,2]", 2.5, 7, false }, got)
  end)
end)

describe("runnel.sqlite: a database that cannot be opened", function()
  after_each(H.cleanup)

  -- the message named the file only: "sqlite: /…/x.db: unable to open database file"
  it("is refused naming the relation, the line and the file", function()
    local dir = H.tmpdir()
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, key = "k" })
    local ok, err = pcall(function() t:sink(runnel.sqlite(dir .. "/no/such/dir/x.db", "t")) end)
    assert.is_false(ok)
    assert.equal(("sqlite_edges2_spec.lua:%d: t: sqlite: %s/no/such/dir/x.db: unable to open database file")
                 :format(debug.getinfo(1, "l").currentline - 3, dir), (err:gsub("^.-(sqlite_edges2)", "%1")))
    t:sink(runnel.sqlite(dir .. "/x.db", "t")) -- the pipeline goes on
    t:insert{ k = 1 }
    assert.equal("1\n", sql(dir .. "/x.db", "select k from t"))
    p:close()
  end)
end)

describe("runnel.sqlite: its options", function()
  after_each(H.cleanup)

  -- math.huge and NaN failed inside runnel ("io.lua:52: bad argument #4 to
  -- '_sqlite_sink'"), options not a table with "attempt to index a number
  -- value", and an unknown option was ignored
  it("refuses what is no option at the user's line, and waits as long as it can for math.huge", function()
    local dir = H.tmpdir()
    local db = dir .. "/out.db"
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, key = "k" })
    local function refused(opts, want)
      local ok, err = pcall(function() t:sink(runnel.sqlite(db, "t", opts)) end)
      assert.is_false(ok)
      assert.equal("sqlite_edges2_spec.lua:" .. (debug.getinfo(1, "l").currentline - 2) .. ": " .. want,
                   err:match("[^/]*$"))
    end
    refused(0/0, "sqlite: options must be a table")
    refused({ busy_timeout = 0/0 }, "sqlite: busy_timeout must be a number of seconds, at least 0")
    refused({ busy = 1 }, "sqlite: unknown option busy (busy_timeout)")
    t:sink(runnel.sqlite(db, "t", { busy_timeout = math.huge }))
    t:insert{ k = 1 }
    assert.equal("1\n", sql(db, "select k from t"))
    p:close()
  end)
end)

describe("runnel.sqlite: a table whose key compares otherwise", function()
  after_each(H.cleanup)

  -- keys "A" and "a" were one row to the table: the upsert of "a"
  -- overwrote "A", and deleting "a" deleted both
  it("is refused when a key column's collation is not BINARY, naming the column", function()
    local dir = H.tmpdir()
    local db = dir .. "/out.db"
    sql(db, "create table t (k TEXT COLLATE NOCASE, v INTEGER, PRIMARY KEY (k))")
    local p = runnel.open()
    local t = p:table("t", { {"k","string"}, {"v","int"}, key = "k" })
    t:insert{ k = "A", v = 1 }
    t:insert{ k = "a", v = 2 }
    assert.equal(('t: sqlite table "t" in %s compares its key column "k" with collation NOCASE: keys the relation '
                  .. 'holds apart would be one row there; make the key BINARY (drop the table: runnel then makes '
                  .. 'it), or name another table'):format(db), H.error_of(t.sink, t, runnel.sqlite(db, "t")))
    assert.equal("", sql(db, "select * from t"))
    sql(db, "create table u (k TEXT, v INTEGER, PRIMARY KEY (k COLLATE BINARY))") -- as good as runnel's own
    t:sink(runnel.sqlite(db, "u"))
    assert.equal("A|1\na|2\n", sql(db, "select * from u order by k"))
    p:close()
  end)
end)
