-- Exactly once at the edges (DESIGN §13): the outbox and SQLite under
-- kills placed at each step between the LMDB commit and the outside write,
-- SQLite files that fight back (locks, a full disk, constraints, tables of
-- another shape) and values SQLite stores its own way. Checked through
-- SQLite itself (the sqlite3 tool) and the NDJSON file's bytes.
local runnel = require "runnel"
local H = require "helper"

local sql = H.sql
local function read(path) return H.read(path) or "" end

-- Group i inserts k = i and negates k = i - 1 (as outbox_crash_spec).
local expected_log, expected_rows = H.outbox_log, H.outbox_rows

-- The child: sinks declared in the order `order` gives ("kill" is a durable
-- Lua sink that sends SIGKILL to its own process when it is handed group
-- `at`), then groups until it dies. With sync = false it flushes every
-- third group, so deliveries come in runs.
local CHILD = [[
local runnel = require "runnel"
local pid = assert(io.open("/proc/self/stat")):read("a"):match("^(%%d+)")
local p = runnel.open{ path = %q, sync = %s }
local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
for _, which in ipairs{ %s } do
  if which == "ndjson" then t:sink(runnel.ndjson(%q))
  elseif which == "sqlite" then t:sink(runnel.sqlite(%q, "t"))
  else
    t:sink{ durable = true, name = "kill", insert = function(_, info)
      if info.seq == %d then os.execute("kill -9 " .. pid) end
    end }
  end
end
local i = p:seq()
while true do
  i = i + 1
  p:batch(function()
    t:insert{ k = i, v = i }
    if i > 1 then t:update{ k = i - 1, v = -(i - 1) } end
  end)
  if i %% 3 == 0 then p:flush() end
  if i > %d + 10 then error("never killed") end
end
]]

describe("durable sinks killed at each step between the LMDB commit and the outside write", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  -- kill first: LMDB holds group `at`, no sink has it; kill between: the
  -- NDJSON file has it, SQLite not; kill last: both have it, no mark in
  -- LMDB says so (the marks ride with the next group's transaction).
  local orders = {
    first = '"kill", "ndjson", "sqlite"',
    between = '"ndjson", "kill", "sqlite"',
    last = '"ndjson", "sqlite", "kill"',
    ["between, SQLite first"] = '"sqlite", "kill", "ndjson"',
  }
  for _, sync in ipairs{ true, false } do
    for _, where in ipairs{ "first", "between", "between, SQLite first", "last" } do
      it(("lose and double nothing (kill %s, sync = %s)"):format(where, tostring(sync)), function()
        local state, log, db, script = dir .. "/st", dir .. "/out.ndjson", dir .. "/out.db", dir .. "/child.lua"
        local last = 0
        for round = 1, 2 do
          local at = last + 2 + round -- 3, then 4 past the first round's end
          H.write(script, CHILD:format(state, tostring(sync), orders[where], log, db, at, at))
          local _, err, code = H.sh("lua5.4 " .. script)
          assert.equal(137, code, err) -- the shell reports SIGKILL as 128 + 9
          -- before the reopen: nothing ahead of LMDB, nothing twice
          local p = runnel.open{ path = state, sync = sync }
          local n = p:seq()
          assert.is_true(n >= at, ("round %d: group %d was handed to a sink, LMDB holds %d"):format(round, at, n))
          local text = read(log)
          assert.equal(expected_log(n):sub(1, #text), text)
          local marked = tonumber(sql(db, "select seq from runnel_sinks"):match("%d+") or "0")
          assert.is_true(marked <= n, ("round %d: SQLite holds group %d, LMDB %d"):format(round, marked, n))
          local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
          t:sink(runnel.ndjson(log))
          t:sink(runnel.sqlite(db, "t"))
          assert.equal(expected_log(n), read(log))
          assert.equal(expected_rows(n), sql(db, "select * from t order by k"))
          assert.equal("t|" .. n .. "\n", sql(db, "select tbl, seq from runnel_sinks"))
          p:close()
          last = n
        end
      end)
    end
  end
end)

describe("runnel.sqlite against its file", function()
  local dir, state, db
  before_each(function()
    dir = H.tmpdir()
    state, db = dir .. "/st", dir .. "/out.db"
  end)
  after_each(H.cleanup)

  local function open()
    local p = runnel.open(state)
    local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
    t:sink(runnel.sqlite(db, "t"))
    return p, t
  end

  -- runnel_sinks still marked the table in step, so the table made anew
  -- held only the groups after the drop (rows 1 and 2 were gone for good)
  it("writes a mirror dropped outside runnel whole again at the next declaration", function()
    local p, t = open()
    t:insert{ k = 1, v = 1 }
    t:insert{ k = 2, v = 2 }
    p:close()
    sql(db, "drop table t")
    p, t = open()
    assert.equal("1|1\n2|2\n", sql(db, "select * from t order by k"))
    t:insert{ k = 3, v = 3 }
    sql(db, "drop table t") -- while the sink is live: its groups wait, then the reopen writes everything
    t:insert{ k = 4, v = 4 }
    assert.matches("t: sqlite: writing: no such table: t", H.error_of(p.deliver, p), 1, true)
    p:close()
    p = open()
    assert.equal("1|1\n2|2\n3|3\n4|4\n", sql(db, "select * from t order by k"))
    assert.equal("t|4\n", sql(db, "select tbl, seq from runnel_sinks"))
    p:close()
  end)

  it("refuses a declaration while another connection holds the write lock, naming the relation; nothing is lost", function()
    sql(db, "create table other(x)")
    local p = runnel.open(state)
    local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
    t:insert{ k = 1, v = 1 }
    local marker = dir .. "/locked"
    local holder = io.popen(("sqlite3 %s > /dev/null"):format(db), "w")
    holder:write(("BEGIN IMMEDIATE;\nINSERT INTO other VALUES (1);\n.shell touch %s\n"):format(marker))
    holder:flush()
    local locked = false
    for _ = 1, 500 do -- up to 10 s on a slow machine, not a timing assertion
      if H.read(marker) then locked = true; break end
      os.execute("sleep 0.02")
    end
    local ok, err = pcall(function() t:sink(runnel.sqlite(db, "t", { busy_timeout = 0.2 })) end)
    t:insert{ k = 2, v = 2 }
    holder:write("COMMIT;\n")
    holder:close()
    assert.is_true(locked, "the other connection never locked the file")
    assert.is_false(ok)
    assert.matches("outbox_edges_spec.lua:%d+: t: sqlite table ", err)
    assert.matches(('t: sqlite table "t" in %s: preparing the table: database is locked'):format(db), err, 1, true)
    t:sink(runnel.sqlite(db, "t", { busy_timeout = 0.2 }))
    t:insert{ k = 3, v = 3 }
    assert.equal("1|1\n2|2\n3|3\n", sql(db, "select * from t order by k"))
    assert.equal("t|3\n", sql(db, "select tbl, seq from runnel_sinks"))
    p:close()
  end)

  -- "T" and "t" were two sinks writing one table (each relation's rows
  -- overwrote the other's); a file spelled two ways had two connections,
  -- so its tables' groups were no longer one SQLite transaction
  it("refuses a table another sink keeps under another case, and writes one file's tables together however it is spelled", function()
    local p = runnel.open(state)
    local a = p:table("a", { {"k","int"}, {"v","int"}, key = "k" })
    local b = p:table("b", { {"k","int"}, {"v","int"}, key = "k" })
    a:sink(runnel.sqlite(db, "T"))
    local other = dir .. "/./../" .. dir:match("[^/]+$") .. "/out.db"
    local err = H.error_of(function() b:sink(runnel.sqlite(other, "t")) end)
    assert.equal(('b: sqlite: table "t" in %s is table "T" to SQLite (its names ignore ASCII case), which a sink of '
                  .. 'a keeps; name another table'):format(other), err)
    b:sink(runnel.sqlite(other, "u"))
    sql(db, "create trigger no_3 before insert on u when new.k = 3 begin select raise(abort, 'not 3'); end")
    p:batch(function() a:insert{ k = 3, v = 3 }; b:insert{ k = 3, v = 3 } end)
    assert.matches("b: sqlite: writing: not 3", H.error_of(p.deliver, p), 1, true)
    assert.equal("", sql(db, "select * from T")) -- one transaction: a's write went back with b's
    sql(db, "drop trigger no_3")
    p:deliver()
    assert.equal("3|3\n", sql(db, "select * from T"))
    assert.equal("3|3\n", sql(db, "select * from u"))
    p:close()
  end)

  -- SQLite said "duplicate column name: k" from deep in its CREATE TABLE
  it("refuses columns SQLite takes for one (names differing in ASCII case, runnel_id without a key), naming them", function()
    local p = runnel.open(state)
    local u = p:table("u", { {"K","int"}, {"k","int"}, key = "K" })
    local ok, err = pcall(function() u:sink(runnel.sqlite(db, "u")) end)
    assert.is_false(ok)
    assert.matches('outbox_edges_spec.lua:%d+: u: sqlite: columns "K" and "k" are one column to SQLite %(its names '
                   .. 'ignore ASCII case%); rename one %(select%)', err)
    local v = p:table("v", { {"Runnel_ID","int"}, {"x","int"} })
    err = H.error_of(function() v:sink(runnel.sqlite(db, "v")) end)
    assert.equal('v: sqlite: column "Runnel_ID" is the name of the row id column that keys the table of a relation '
                 .. 'without a key; rename it (select) or give the relation a key', err)
    v:select{ {"rid","Runnel_ID"}, "x" }:sink(runnel.sqlite(db, "v"))
    v:insert{ Runnel_ID = 7, x = 1 }
    assert.equal("1|7|1\n", sql(db, "select * from v"))
    assert.equal("", sql(db, "select name from sqlite_master where name = 'u'"))
    p:close()
  end)

  -- SQLite has no NaN (it stores NULL) and keeps 64-bit integers, blobs
  -- and infinities exactly; lists go as JSON text
  it("stores NULLs, blobs, the int extremes, infinities and NaN as SQLite can", function()
    local p = runnel.open(state)
    local t = p:table("t", { {"k","int"}, {"f","float", null = true}, {"b","bytes", null = true},
                             {"i","int", null = true}, {"l","list", null = true}, key = "k" })
    t:sink(runnel.sqlite(db, "t"))
    t:insert{ k = 1, f = 0/0, b = "\0\1\255", i = math.maxinteger }
    t:insert{ k = 2, f = 1/0, i = math.mininteger, l = { 1, runnel.null, "x" } }
    t:insert{ k = 3, f = -1/0 }
    t:insert{ k = math.mininteger, f = 2.5 }
    assert.equal("-9223372036854775808|2.5|real|||\n" ..
                 "1||null|0001FF|9223372036854775807|\n" ..
                 "2|Inf|real||-9223372036854775808|[1,null,\"x\"]\n" ..
                 "3|-Inf|real|||\n",
                 sql(db, "select k, f, typeof(f), hex(b), i, l from t order by k"))
    p:close()
  end)

  it("keeps the groups a full disk refused waiting and writes them once when there is room", function()
    local script = dir .. "/full.lua"
    H.write(script, ([[
local runnel = require "runnel"
local p = runnel.open(%q)
local s = p:stream("s", { {"k","int"}, {"pad","string"} })
s:sink(runnel.sqlite(%q, "s"))
local failed_at
for k = 1, 200 do
  s:insert{ k = k, pad = string.rep("x", 3000) } -- commits whatever SQLite does
  if not failed_at then
    local ok, err = pcall(p.deliver, p)
    if not ok then failed_at = k; assert(err:find('s: sqlite table "s" in ', 1, true), err) end
  elseif k == failed_at + 3 then break end
end
assert(failed_at, "the file never filled")
io.write(p:seq())
p:close()
]]):format(state, db))
    -- SQLite's file may not pass 150 kB (ulimit -f counts 512-byte blocks in sh)
    local out, err, code = H.sh(("sh -c \"trap '' XFSZ; ulimit -f 300; exec lua5.4 %s\""):format(script))
    assert.equal(0, code, err)
    local n = tonumber(out)
    local held = tonumber((sql(db, "select count(*) from s"):match("%d+")))
    assert.is_true(held < n, ("%d of %d"):format(held, n))
    assert.equal(("%d|%d|%d\n"):format(held, held, held), sql(db, "select count(distinct k), min(k) + count(*) - 1, max(k) from s"))
    local p = runnel.open(state) -- no limit now: the waiting groups go out, once
    p:stream("s", { {"k","int"}, {"pad","string"} }):sink(runnel.sqlite(db, "s"))
    p:close()
    assert.equal(("%d|1|%d\n"):format(n, n), sql(db, "select count(distinct k), min(k), count(*) from s"))
    assert.equal("s|" .. n .. "\n", sql(db, "select tbl, seq from runnel_sinks"))
  end)
end)

describe("runnel.sqlite_source", function()
  local dir, db, p
  before_each(function()
    dir = H.tmpdir()
    db = dir .. "/src.db"
    p = runnel.open()
  end)
  after_each(function() p:close(); H.cleanup() end)

  local function lookup_on(cols)
    cols.key = "k"
    cols.source = runnel.sqlite_source(db, "src")
    local lk = p:lookup("lk", cols)
    local s = p:stream("s", { {"k","int"} })
    local got = {}
    s:join(lk, { on = "k", kind = "left" }):sink(function(_, row) got[#got + 1] = row end)
    return s, got
  end

  -- A row the lookup refuses left its SELECT stepping: SQLite's read lock
  -- stayed on the file until the next lookup, so every writer got "database
  -- is locked". And bad JSON named neither the lookup nor the column.
  it("names the lookup, the column and the table for a bad row, and leaves the file unlocked", function()
    sql(db, "create table src(k integer primary key, l text, v integer); insert into src values (1, 'not json', 1), (2, '[1,2]', 2), (3, '[]', 'three')")
    local s, got = lookup_on{ {"k","int"}, {"l","list"}, {"v","int"} }
    local ok, err = pcall(function() s:insert{ k = 1 } end)
    assert.is_false(ok)
    assert.matches('outbox_edges_spec.lua:%d+: lk: source returned a bad row for key %(k = 1%): column "l": sqlite_source table "src": malformed JSON', err)
    -- another process writes the file at once (a 0.2 s busy timeout, not 5 s)
    local _, serr, code = H.sh(("sqlite3 -cmd '.timeout 200' %s \"insert into src values (9, '[]', 9)\""):format(db))
    assert.equal("", serr)
    assert.equal(0, code)
    ok, err = pcall(function() s:insert{ k = 3 } end)
    assert.is_false(ok)
    assert.matches('lk: source returned a bad row for key (k = 3): column "v": expected int, got string', err, 1, true)
    _, serr, code = H.sh(("sqlite3 -cmd '.timeout 200' %s \"insert into src values (10, '[]', 10)\""):format(db))
    assert.equal("", serr)
    assert.equal(0, code)
    s:insert{ k = 2 }
    s:insert{ k = 9 }
    assert.same({ 1, 2 }, got[1].l)
    assert.same({ }, got[2].l)
    assert.equal(9, got[2].v)
  end)
end)
