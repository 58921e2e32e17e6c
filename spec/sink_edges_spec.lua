-- Adversarial edges of sinks and the outbox (DESIGN §5, §8, §13; OUTBOX-n in
-- core/outbox.c, SINKS-1 in core/sink.c): a sink never shows a group that
-- rolled back, durable sinks get every committed group exactly once, and
-- what they get is read right.
local runnel = require "runnel"
local H = require "helper"

local read = H.text_of

describe("a durable sink with groups waiting (OUTBOX-8)", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  -- A session whose durable sink "d" on t refuses every group: they wait.
  local function leave_waiting(cols)
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", cols)
    p:table("u", { {"x","string"}, {"y","int"}, key = "x" })
    t:sink(function() error("down") end, { durable = true, name = "d" })
    t:insert{ k = 1, a = "A", b = "B" }
    p:close()
  end

  it("is refused on another relation, naming both, and delivers them once declared as it was", function()
    local cols = { {"k","int"}, {"a","string"}, {"b","string"}, key = "k" }
    leave_waiting(cols)
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", cols)
    local u = p:table("u", { {"x","string"}, {"y","int"}, key = "x" })
    local got = {}
    local err = H.error_of(u.sink, u, function(_, row) got[#got + 1] = row end, { durable = true, name = "d" })
    assert.matches("u: durable sink d: group 1 waits for it, recorded for another relation", err, 1, true)
    assert.same({}, got) -- before: t's row read as u's, { x = 1, y = "A" }
    t:sink(function(verb, row, _, info) got[#got + 1] = ("%d %s %s%s"):format(info.seq, verb, row.a, row.b) end,
           { durable = true, name = "d" })
    assert.same({ "1 INSERT AB" }, got)
    p:close()
  end)

  it("is refused when its table was declared again with its columns reordered", function()
    leave_waiting({ {"k","int"}, {"a","string"}, {"b","string"}, key = "k" })
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, {"b","string"}, {"a","string"}, key = "k" })
    local got = {}
    local err = H.error_of(t.sink, t, function(_, row) got[#got + 1] = row.a .. row.b end, { durable = true, name = "d" })
    assert.matches("another declaration of t", err, 1, true)
    assert.same({}, got) -- before: "BA", the columns swapped
    -- under a new name it starts with the next group
    t:sink(function(_, row) got[#got + 1] = row.a .. row.b end, { durable = true, name = "d2" })
    t:insert{ k = 2, a = "C", b = "D" }
    assert.same({ "CD" }, got)
    p:close()
  end)

  it("on an NDJSON path is refused on another relation; the file keeps only t's lines", function()
    local log = dir .. "/out.ndjson"
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, {"a","string"}, key = "k" })
    p:table("u", { {"x","string"}, {"y","int"}, key = "x" })
    t:sink(runnel.ndjson(log))
    t:insert{ k = 1, a = "A" }
    p:close()
    os.remove(log) -- vanished: cut back to nothing, group 1 is not waiting
    p = runnel.open(dir .. "/s")
    t = p:table("t", { {"k","int"}, {"a","string"}, key = "k" })
    local u = p:table("u", { {"x","string"}, {"y","int"}, key = "x" })
    u:sink(runnel.ndjson(log)) -- nothing waits: no refusal
    u:insert{ x = "q", y = 2 }
    p:close()
    assert.equal('{"verb":"INSERT","x":"q","y":2}\n', read(log))
  end)
end)

describe("an SQLite sink with groups waiting when its table is declared otherwise", function()
  local dir, db
  before_each(function() dir = H.tmpdir(); db = dir .. "/out.db" end)
  after_each(H.cleanup)

  it("rewrites its table from the relation instead of being refused (OUTBOX-8, SINK-2)", function()
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
    t:sink(runnel.sqlite(db, "t"))
    t:insert{ k = 1, v = "a" }
    -- SQLite refuses every write from here: group 2 waits in the outbox (OUTBOX-4)
    H.sql(db, "CREATE TRIGGER no BEFORE INSERT ON t BEGIN SELECT RAISE(ABORT, 'refused'); END;")
    t:insert{ k = 2, v = "b" }
    assert.matches("refused", H.error_of(p.deliver, p), 1, true)
    p:close()
    H.sql(db, "DROP TRIGGER no;")
    p = runnel.open(dir .. "/s")
    t = p:table("t", { {"k","int"}, {"v","string", null = true}, key = "k" }) -- same SQLite shape
    t:sink(runnel.sqlite(db, "t"))
    assert.equal("1|a\n2|b\n", H.sql(db, "select * from t order by k"))
    t:insert{ k = 3 }
    assert.equal("1|a\n2|b\n3|\n", H.sql(db, "select * from t order by k"))
    p:close()
  end)
end)

describe("an SQLite sink's table name", function()
  after_each(H.cleanup)

  it("is refused when it is runnel's own runnel_sinks, in any case, and the file stays usable", function()
    local dir = H.tmpdir()
    local db = dir .. "/e.db"
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
    for _, name in ipairs{ "runnel_sinks", "Runnel_Sinks" } do
      local err = H.error_of(t.sink, t, runnel.sqlite(db, name))
      assert.matches(('t: sqlite: table "%s" in %s: runnel keeps its marks in runnel_sinks; name another table')
                     :format(name, db), err, 1, true)
    end
    t:sink(runnel.sqlite(db, "t")) -- before: "table runnel_sinks has no column named tbl", the file spoiled
    t:insert{ k = 1, v = "a" }
    p:close()
    assert.equal("1|a\n", H.sql(db, "select * from t"))
  end)
end)

describe("a durable Lua sink's name", function()
  it("is refused when it holds a NUL byte, rather than cut at it", function()
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, key = "k" })
    local err = H.error_of(t.sink, t, function() end, { durable = true, name = "a\0b" })
    assert.matches("sink: a durable sink's name cannot hold a NUL byte", err, 1, true)
    -- before: "a\0b" was kept as "a", so "a\0c" was "already declared" as sink:a
    t:sink(function() end, { durable = true, name = "a" })
    p:close()
  end)

  it("works at LMDB's key limit and past it (hashed), each kept apart", function()
    local dir = H.tmpdir()
    local names = { string.rep("x", 395), string.rep("x", 396), string.rep("y", 5000), string.rep("y", 4999) .. "z" }
    local got = {}
    local function open()
      local p = runnel.open(dir .. "/s")
      local t = p:table("t", { {"k","int"}, key = "k" })
      for i, name in ipairs(names) do
        t:sink(function(_, row, _, info) got[#got + 1] = ("%d:%d:%d"):format(i, info.seq, row.k) end,
               { durable = true, name = name })
      end
      return p, t
    end
    local p, t = open()
    t:insert{ k = 1 }
    p:close()
    p, t = open() -- nothing delivered again
    t:insert{ k = 2 }
    p:close()
    assert.same({ "1:1:1", "2:1:1", "3:1:1", "4:1:1", "1:2:2", "2:2:2", "3:2:2", "4:2:2" }, got)
    H.cleanup()
  end)
end)

describe("an NDJSON sink on an open file whose write fails mid-run (OUTBOX-6)", function()
  after_each(H.cleanup)

  it("never writes a group twice: the group written before the failure stays delivered", function()
    local dir = H.tmpdir()
    local log, script = dir .. "/out.ndjson", dir .. "/run.lua"
    H.write(script, ([[
local runnel = require "runnel"
local p = runnel.open{ sync = false }
local s = p:stream("s", { {"k","int"}, {"pad","string"} })
local f = assert(io.open(%q, "a"))
s:sink(runnel.ndjson(f, { verb = false }))
local pad = string.rep("x", 1200000)
s:insert{ k = 1, pad = pad } -- carried: both groups go out in one run at the flush
s:insert{ k = 2, pad = pad }
p:flush()                    -- group 1 is written (over 1 MB), group 2 passes the file size limit
assert(not pcall(p.deliver, p))
io.open(%q, "w"):close()     -- room again: only group 2 may be written now
p:deliver()
p:close()
f:close()
]]):format(log, log))
    -- the file may not grow past 2,048,000 bytes (ulimit -f counts 512-byte blocks in sh)
    local _, err, code = H.sh(("sh -c \"trap '' XFSZ; ulimit -f 4000; exec lua5.4 %s\""):format(script))
    assert.equal("", err)
    assert.equal(0, code)
    local ks = {}
    for l in io.lines(log) do ks[#ks + 1] = l:match('^{"k":(%d+),') or "torn" end
    assert.same({ "2" }, ks) -- before: { "1", "torn" }, group 1 written again at every retry
  end)
end)

describe("an NDJSON sink's verb field", function()
  after_each(H.cleanup)

  it("is refused when a column has its name: the name would be in each line twice", function()
    local dir = H.tmpdir()
    local p = runnel.open()
    local t = p:table("t", { {"verb","string"}, {"op","int"}, key = "verb" })
    for _, target in ipairs{ dir .. "/o.ndjson", io.stdout } do
      local err = H.error_of(t.sink, t, runnel.ndjson(target)) -- before: {"verb":"DELETE","verb":"x"}
      assert.matches('t: the verb field "verb" is also a column of t', err, 1, true)
      err = H.error_of(t.sink, t, runnel.ndjson(target, { verb = "op" }))
      assert.matches('the verb field "op" is also a column of t', err, 1, true)
    end
    t:sink(runnel.ndjson(dir .. "/o.ndjson", { verb = "change" }))
    t:sink(runnel.ndjson(dir .. "/plain.ndjson", { verb = false }))
    t:insert{ verb = "x", op = 1 }
    t:delete{ verb = "x" }
    p:close()
    assert.equal('{"change":"INSERT","verb":"x","op":1}\n{"change":"DELETE","verb":"x"}\n', read(dir .. "/o.ndjson"))
    assert.equal('{"verb":"x","op":1}\n{"verb":"x"}\n', read(dir .. "/plain.ndjson"))
  end)
end)

describe("a JetStream sink's verb field", function()
  it("is refused when a column has its name, before any connection is tried", function()
    local p = runnel.open()
    local t = p:table("t", { {"verb","string"}, key = "verb" })
    local err = H.error_of(t.sink, t, runnel.jetstream{ url = "nats://127.0.0.1:1", subject = "s" })
    assert.matches('t: the verb field "verb" is also a column of t', err, 1, true) -- before: a connection error
    p:close()
  end)
end)

describe("a durable sink declared again on a target a live sink holds", function()
  after_each(H.cleanup)

  it("is refused before it touches the NDJSON file: no delivered group is cut away", function()
    local dir = H.tmpdir()
    local log = dir .. "/o.ndjson"
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, key = "k" })
    local u = p:table("u", { {"k","int"}, key = "k" })
    t:sink(runnel.ndjson(log))
    t:insert{ k = 1 }
    t:insert{ k = 2 } -- written; its mark rides with the next group
    local err = H.error_of(u.sink, u, runnel.ndjson(log))
    assert.matches("u: durable sink to .*/o%.ndjson is already declared", err)
    p:begin()
    err = H.error_of(u.sink, u, runnel.ndjson(log))
    assert.matches("u: sinks are added outside groups", err, 1, true)
    p:commit()
    t:insert{ k = 3 }
    p:close()
    -- before: the refused declaration cut the file back to group 1's mark; group 2 was gone
    assert.equal('{"verb":"INSERT","k":1}\n{"verb":"INSERT","k":2}\n{"verb":"INSERT","k":3}\n', read(log))
  end)
end)

describe("an SQLite sink declared again on a table a live sink holds", function()
  after_each(H.cleanup)

  it("is refused before it touches the table: the live sink's rows stay", function()
    local dir = H.tmpdir()
    local db = dir .. "/o.db"
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, key = "k" })
    local u = p:table("u", { {"k","int"}, {"w","string"}, key = "k" })
    t:sink(runnel.sqlite(db, "x"))
    t:insert{ k = 1 }
    u:insert{ k = 7, w = "u" }
    -- before: u's columns differ, so the mirror t's sink made was dropped and made again with u's rows
    local err = H.error_of(u.sink, u, runnel.sqlite(db, "x"))
    assert.matches('u: durable sink to table "x" in .*/o%.db is already declared', err)
    assert.equal("1\n", H.sql(db, "select * from x"))
    t:insert{ k = 2 }
    p:close()
    assert.equal("1\n2\n", H.sql(db, "select * from x order by k"))
  end)
end)

describe("an NDJSON file", function()
  after_each(H.cleanup)

  it("is written by one state at a time: another's sink on it is refused while the first lives", function()
    local dir = H.tmpdir()
    local log = dir .. "/o.ndjson"
    local function open(name)
      local p = runnel.open(dir .. "/" .. name)
      return p, p:table("t", { {"k","int"}, key = "k" })
    end
    local p1, t1 = open("a")
    t1:sink(runnel.ndjson(log))
    t1:insert{ k = 1 }
    t1:insert{ k = 2 } -- its mark rides with the next group
    local p2, t2 = open("b")
    local err = H.error_of(t2.sink, t2, runnel.ndjson(log))
    assert.matches("is the file of another durable sink", err, 1, true)
    t2:insert{ k = 20 }
    p1:close()
    t2:sink(runnel.ndjson(log)) -- the first one is gone: b may take the file over
    t2:insert{ k = 21 }
    p2:close()
    -- before: b's sink was taken while a's lived, both appended, and the next open of
    -- either cut the file back to its own mark, losing the other's lines
    assert.equal('{"verb":"INSERT","k":1}\n{"verb":"INSERT","k":2}\n{"verb":"INSERT","k":21}\n', read(log))
  end)
end)

describe("p:deliver()", function()
  it("reports the first delivery that failed, as runnel.h promises, not the last", function()
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:sink(function() error("first down") end, { durable = true, name = "d" })
    t:sink{ commit = function() error("second down") end, insert = function() end, durable = true, name = "e" }
    t:insert{ k = 1 }
    local err = H.error_of(p.deliver, p)
    assert.matches("first down", err, 1, true) -- before: "second down"
    assert.same({ ["t: durable sink d"] = 1, ["t: durable sink e"] = 1 }, p:stats().outbox)
    p:close()
  end)
end)

describe("sink output of awkward values", function()
  after_each(H.cleanup)

  it("keeps keys with NUL bytes apart and writes -0.0, 1e300 and bytes with NULs exactly", function()
    local dir = H.tmpdir()
    local p = runnel.open()
    local t = p:table("t", { {"k","string"}, {"f","float"}, {"b","bytes", null = true}, key = "k" })
    t:sink(runnel.ndjson(dir .. "/o.ndjson"))
    t:sink(runnel.sqlite(dir .. "/o.db", "t"))
    t:insert{ k = "a\0b", f = -0.0 }
    t:insert{ k = "a\0c", f = 1e300, b = "x\0y" }
    t:insert{ k = "a", f = 0.1 }
    t:delete{ k = "a\0b" }
    p:close()
    assert.equal('{"verb":"INSERT","k":"a\\u0000b","f":-0.0,"b":null}\n'
              .. '{"verb":"INSERT","k":"a\\u0000c","f":1e+300,"b":"eAB5"}\n'
              .. '{"verb":"INSERT","k":"a","f":0.1,"b":null}\n'
              .. '{"verb":"DELETE","k":"a\\u0000b"}\n', read(dir .. "/o.ndjson"))
    assert.equal("61|0.1|\n610063|1.0e+300|780079\n", H.sql(dir .. "/o.db", "select hex(k), f, hex(b) from t order by k"))
  end)
end)
