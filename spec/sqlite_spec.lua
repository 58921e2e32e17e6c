-- runnel.sqlite: a relation kept in a real SQLite table, checked through
-- SQLite itself (the sqlite3 tool), not through runnel.
local runnel = require "runnel"
local H = require "helper"

local sql = H.sql

describe("runnel.sqlite", function()
  local dir, db, p
  before_each(function()
    dir = H.tmpdir()
    db = dir .. "/out.db"
    p = runnel.open()
  end)
  after_each(function() p:close(); H.cleanup() end)

  it("creates the table with quoted names and the key as primary key, and applies each group", function()
    local t = p:table("odd", { {"@ID","int"}, {"SELECT","string"}, {"a b","float", null = true},
                               {"tags","list", null = true}, {"ok","bool", null = true}, key = "@ID" })
    t:sink(runnel.sqlite(db, "odd table"))
    t:insert{ ["@ID"] = 1, SELECT = "x", ["a b"] = 1.5, tags = { "a", runnel.null }, ok = true }
    p:batch(function()
      t:insert{ ["@ID"] = 2, SELECT = "y" }
      t:update{ ["@ID"] = 2, SELECT = "z" }
      t:insert{ ["@ID"] = 3, SELECT = "gone" }
      t:delete{ ["@ID"] = 3 }
    end)
    assert.equal('CREATE TABLE IF NOT EXISTS "odd table" ("@ID" INTEGER, "SELECT" TEXT, "a b" REAL, "tags" TEXT, "ok" INTEGER, PRIMARY KEY ("@ID"));\n',
                 sql(db, '.schema "odd table"'))
    assert.equal("odd table|2\n", sql(db, "select tbl, seq from runnel_sinks")) -- the mark: the last group written
    assert.equal('1|x|1.5|["a",null]|1\n2|z|||\n', sql(db, 'select * from "odd table" order by 1'))
    t:delete{ ["@ID"] = 1 }
    assert.equal("2|z|||\n", sql(db, 'select * from "odd table"'))
  end)

  it("applies a first group that only deletes (regression: it sorted a list never allocated, UBSan under make asan)", function()
    local q = runnel.open(dir .. "/st")
    local t = q:table("t", { {"id","int"}, {"v","string"}, key = "id" })
    t:insert{ id = 1, v = "a" }
    t:insert{ id = 2, v = "b" }
    q:close()
    q = runnel.open(dir .. "/st")
    t = q:table("t", { {"id","int"}, {"v","string"}, key = "id" })
    t:sink(runnel.sqlite(db, "t"))
    t:delete{ id = 1 }
    assert.equal("2|b\n", sql(db, "select * from t"))
    q:close()
  end)

  it("never loses a row when a group moves rows between keys", function()
    local t = p:table("seats", { {"person","string"}, {"seat","int"}, key = "person" })
    local by_seat = t:map(function(r) return { seat = r.seat, person = r.person } end,
                          { {"seat","int"}, {"person","string"}, key = "seat" })
    by_seat:sink(runnel.sqlite(db, "seats"))
    t:insert{ person = "ann", seat = 1 }
    t:insert{ person = "bob", seat = 2 }
    p:batch(function() -- swap: ann to 2, bob to 1
      t:update{ person = "ann", seat = 2 }
      t:update{ person = "bob", seat = 1 }
    end)
    assert.equal("1|bob\n2|ann\n", sql(db, "select * from seats order by seat"))
    p:batch(function() t:update{ person = "ann", seat = 3 } end) -- seat 2 is free now
    assert.equal("1|bob\n3|ann\n", sql(db, "select * from seats order by seat"))
  end)

  it("leaves SQLite untouched by a group that rolls back; a failing SQLite write keeps the group waiting", function()
    local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
    t:sink(runnel.sqlite(db, "t"))
    t:insert{ k = 1, v = 1 }
    pcall(p.batch, p, function() t:insert{ k = 2, v = 2 }; error("changed my mind") end)
    assert.equal("1|1\n", sql(db, "select * from t"))
    sql(db, "create trigger no_big before insert on t when new.v > 100 begin select raise(abort, 'too big'); end")
    t:insert{ k = 3, v = 999 } -- committed: SQLite failing after durability cannot undo it (OUTBOX-4)
    assert.same({ k = 3, v = 999 }, t:get(3))
    assert.equal("1|1\n", sql(db, "select * from t"))
    local name = next(p:stats().outbox)
    assert.equal(1, p:stats().outbox[name])
    assert.matches("t: sqlite: writing: too big", H.error_of(p.deliver, p), 1, true)
    sql(db, "drop trigger no_big")
    p:deliver()
    assert.equal(0, p:stats().outbox[name])
    assert.equal("1|1\n3|999\n", sql(db, "select * from t order by k"))
    assert.equal("t|2\n", sql(db, "select tbl, seq from runnel_sinks")) -- seq 2: the rolled back group has none
  end)

  it("keys a keyless relation by its row id", function()
    local log = p:table("log", { {"msg","string"} })
    log:sink(runnel.sqlite(db, "log"))
    log:insert{ msg = "a" }
    log:insert{ msg = "a" }
    log:delete{ msg = "a" }
    assert.equal("2|a\n", sql(db, "select * from log"))
  end)

  it("shares one transaction among the sinks of one database file", function()
    local t = p:table("t", { {"k","int"}, key = "k" })
    local u = p:table("u", { {"k","int"}, key = "k" })
    t:sink(runnel.sqlite(db, "t"))
    u:sink(runnel.sqlite(db, "u"))
    p:batch(function() t:insert{ k = 1 }; u:insert{ k = 2 } end)
    assert.equal("1|2\n", sql(db, "select t.k, u.k from t, u"))
    sql(db, "create trigger no_3 before insert on u when new.k = 3 begin select raise(abort, 'not 3'); end")
    p:batch(function() t:insert{ k = 3 }; u:insert{ k = 3 } end) -- committed; u's write fails, so t's waits too
    assert.equal("1\n", sql(db, "select k from t order by k"))
    assert.matches("u: sqlite: writing: not 3", H.error_of(p.deliver, p), 1, true)
    sql(db, "drop trigger no_3")
    p:deliver()
    assert.equal("1\n3\n", sql(db, "select k from t order by k"))
    assert.equal("2\n3\n", sql(db, "select k from u order by k"))
    assert.equal("t|2\nu|2\n", sql(db, "select tbl, seq from runnel_sinks order by tbl"))
  end)

  it("commits the group when SQLite refuses its COMMIT (a reader holds the file) and delivers it later", function()
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:sink(runnel.sqlite(db, "t", { busy_timeout = 0.2 }))
    t:insert{ k = 1 }
    -- another process in a read transaction: the COMMIT cannot take its exclusive lock
    local marker = dir .. "/reading"
    local reader = io.popen(("sqlite3 %s > /dev/null"):format(db), "w")
    reader:write(("BEGIN;\nSELECT count(*) FROM t;\n.shell touch %s\n"):format(marker))
    reader:flush()
    local reading = false
    for _ = 1, 1000 do -- up to 20 s: a slow machine, not a timing assertion
      local m = io.open(marker)
      if m then m:close(); reading = true; break end
      os.execute("sleep 0.02")
    end
    t:insert{ k = 2 } -- committed in runnel; its delivery waits (OUTBOX-4)
    local err = H.error_of(p.deliver, p)
    reader:write("COMMIT;\n")
    reader:close()
    assert.is_true(reading, "the reader never started")
    assert.matches(('t: sqlite table "t" in %s: COMMIT: database is locked'):format(db), err, 1, true)
    assert.same({ k = 2 }, t:get(2))
    assert.equal("1\n", sql(db, "select k from t"))
    t:insert{ k = 3 } -- the reader is gone: the waiting group goes first, then this one
    assert.equal("1\n2\n3\n", sql(db, "select k from t order by k"))
  end)

  it("writes carried groups only once LMDB holds them, so lost ones never reach SQLite", function()
    local q = runnel.open{ sync = false }
    local t = q:table("t", { {"k","int"}, key = "k" })
    local refuse = false
    t:filter(function() if refuse then error("refused now") end return true end)
    t:sink(runnel.sqlite(db, "t"))
    t:insert{ k = 1 }
    q:flush()
    t:insert{ k = 2 } -- carried: not yet in LMDB, so not in SQLite either
    assert.equal("1\n", sql(db, "select k from t order by k"))
    refuse = true
    assert.matches("were lost", H.error_of(t.insert, t, { k = 3 }), 1, true) -- the replay of 2 fails too
    refuse = false
    t:insert{ k = 4 }
    q:flush()
    assert.equal("1\n4\n", sql(db, "select k from t order by k")) -- 2 went with LMDB, never reached SQLite
    q:close()
  end)

  it("writes a relation's current rows when a sink starts on it, keeping rows already in the table", function()
    local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
    t:insert{ k = 1, v = "a" }
    t:insert{ k = 2, v = "b" }
    sql(db, "create table t (k integer primary key, v text); insert into t values (9, 'mine')")
    t:sink(runnel.sqlite(db, "t"))
    assert.equal("1|a\n2|b\n9|mine\n", sql(db, "select * from t order by k"))
    t:update{ k = 2, v = "c" }
    assert.equal("1|a\n2|c\n9|mine\n", sql(db, "select * from t order by k"))
  end)
end)

describe("runnel.sqlite across sessions", function()
  after_each(H.cleanup)

  -- Runs a script in its own process on a state dir (default: dir/state)
  -- and the database dir/out.db.
  local function session(dir, body, state)
    local script = dir .. "/session.lua"
    local f = assert(io.open(script, "w"))
    f:write(([[
local runnel = require "runnel"
local p = runnel.open{ path = %q, sync = false }
local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
local function sink() t:sink(runnel.sqlite(%q, "t")) end
]]):format(state or dir .. "/state", dir .. "/out.db") .. body)
    f:close()
    local _, err, code = H.sh(("%s run %s"):format(H.runnel_bin, script))
    assert.equal("", err)
    assert.equal(0, code)
  end

  it("resyncs a table whose sink was not declared for some groups", function()
    local dir = H.tmpdir()
    session(dir, "sink(); for k = 1, 3 do t:insert{ k = k, v = k } end p:close()")
    session(dir, "t:update{ k = 1, v = 10 }; t:delete{ k = 2 }; t:insert{ k = 4, v = 4 }; p:close()") -- no sink
    assert.equal("1|1\n2|2\n3|3\n", sql(dir .. "/out.db", "select * from t order by k"))
    session(dir, "sink(); p:close()")
    assert.equal("1|10\n3|3\n4|4\n", sql(dir .. "/out.db", "select * from t order by k"))
  end)

  it("never shows SQLite the groups a crash took from runnel (sync = false)", function()
    local dir = H.tmpdir()
    session(dir, "sink(); t:insert{ k = 1, v = 1 }; p:close()")
    -- carried groups reach SQLite only after LMDB; exit without closing
    session(dir, "sink(); t:insert{ k = 2, v = 2 }; t:update{ k = 1, v = 5 }; os.exit(0, false)")
    assert.equal("1|1\n", sql(dir .. "/out.db", "select * from t order by k"))
    session(dir, "assert(t:get{ k = 2 } == nil, 'the crash kept a carried group'); sink(); p:close()")
    assert.equal("1|1\n", sql(dir .. "/out.db", "select * from t order by k"))
  end)

  it("repairs a crash that came before any group reached LMDB", function()
    local dir = H.tmpdir()
    session(dir, "sink(); t:insert{ k = 1, v = 1 }; os.exit(0, false)")
    assert.equal("", sql(dir .. "/out.db", "select * from t"))
    session(dir, "assert(t:count() == 0); sink(); p:close()")
    assert.equal("", sql(dir .. "/out.db", "select * from t"))
  end)

  -- one state writes a table (SINK-4): the next takes it once the first is gone
  it("keeps the rows another state wrote when a new state's sink starts on the file", function()
    local dir = H.tmpdir()
    session(dir, "sink(); t:insert{ k = 1, v = 1 }; p:close()", dir .. "/one")
    H.sh("rm -rf " .. dir .. "/one")
    session(dir, "sink(); t:insert{ k = 2, v = 2 }; p:close()", dir .. "/two")
    assert.equal("1|1\n2|2\n", sql(dir .. "/out.db", "select * from t order by k"))
  end)

  it("leaves a table in step alone across a reopen", function()
    local dir = H.tmpdir()
    session(dir, "sink(); t:insert{ k = 1, v = 1 }; p:close()")
    sql(dir .. "/out.db", "insert into t values (7, 7)") -- not runnel's: a resync would remove it
    session(dir, "sink(); t:insert{ k = 2, v = 2 }; p:close()")
    assert.equal("1|1\n2|2\n7|7\n", sql(dir .. "/out.db", "select * from t order by k"))
  end)
end)

describe("runnel.sqlite after the relation's schema changed", function()
  after_each(H.cleanup)

  local function open(dir) return runnel.open{ path = dir .. "/st", notes = false } end

  it("follows it: the mirror runnel made is made again with the new columns and key, and written whole", function()
    local dir = H.tmpdir()
    local db = dir .. "/out.db"
    local p = open(dir)
    local players = p:table("players", { {"id","int"}, {"team","int"}, key = "id" })
    players:sink(runnel.sqlite(db, "players"))
    local j = players:join(p:table("teams", { {"id","int"}, key = "id" }), { on = "team", name = "j" })
    j:aggregate{ by = "team", n = runnel.count(), name = "per_team" }:sink(runnel.sqlite(db, "per_team"))
    p:relation("teams"):insert{ id = 7 }
    players:insert{ id = 1, team = 7 }
    players:insert{ id = 2, team = 7 }
    p:close()
    assert.equal("1|7\n2|7\n", sql(db, "select * from players order by id"))
    p = open(dir)
    players = p:table("players", { {"id","int"}, {"team","int"}, {"level","int", default = 1}, key = "id" })
    players:sink(runnel.sqlite(db, "players"))
    j = players:join(p:table("teams", { {"id","int"}, key = "id" }), { on = "team", name = "j" })
    j:aggregate{ by = "team", n = runnel.count(), key = "team", name = "per_team" }:sink(runnel.sqlite(db, "per_team"))
    players:insert{ id = 3, team = 7, level = 4 }
    p:close()
    assert.equal('CREATE TABLE IF NOT EXISTS "players" ("id" INTEGER, "team" INTEGER, "level" INTEGER, PRIMARY KEY ("id"));\n',
                 sql(db, ".schema players"))
    assert.equal("1|7|1\n2|7|1\n3|7|4\n", sql(db, "select * from players order by id"))
    assert.equal('CREATE TABLE IF NOT EXISTS "per_team" ("team" INTEGER, "n" INTEGER, PRIMARY KEY ("team"));\n',
                 sql(db, ".schema per_team"))
    assert.equal("7|3\n", sql(db, "select * from per_team"))
  end)

  it("refuses a table runnel did not make, or a stream's log, naming it and what to do; nothing is dropped", function()
    local dir = H.tmpdir()
    local db = dir .. "/out.db"
    sql(db, "create table mine (id INTEGER PRIMARY KEY, note TEXT); insert into mine values (1, 'keep')")
    local p = open(dir)
    local t = p:table("t", { {"id","int"}, {"v","int"}, key = "id" })
    assert.equal(('t: sqlite table "mine" in %s has columns "id" INTEGER, "note" TEXT; key ("id"), the relation '
                  .. '"id" INTEGER, "v" INTEGER; key ("id"): runnel did not make that table, so it leaves it alone: '
                  .. "drop or rename it (runnel then makes it and writes the relation's rows), or name another table")
                 :format(db), H.error_of(t.sink, t, runnel.sqlite(db, "mine")))
    assert.equal("1|keep\n", sql(db, "select * from mine"))
    local s = p:stream("s", { {"v","int"} })
    s:sink(runnel.sqlite(db, "log"))
    s:insert{ v = 1 }
    p:close()
    p = open(dir)
    s = p:stream("s", { {"v","int"}, {"w","int", null = true} })
    assert.matches('s: sqlite table "log" in .- a stream\'s table is its log, kept as written: rename it %(or drop '
                   .. 'it%), or name another table', H.error_of(s.sink, s, runnel.sqlite(db, "log")))
    assert.equal("1\n", sql(db, "select v from log"))
    p:close()
  end)
end)
