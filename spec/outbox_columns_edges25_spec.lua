-- An NDJSON sink is a log (OUTBOX-11 in core/outbox.c, since 0.37): groups
-- waiting for it while its table's columns change (a column added,
-- dropped, renamed, widened; another key, the table dropped and declared
-- again) are delivered once, in order, in the columns they were committed
-- with, then the new groups in the new columns; no refusal, no need to
-- declare the table as it was. Its declaration records the columns of its
-- relation (meta "ol:" tag layout) for the groups it then writes.
-- Unchanged: a Lua durable sink gets rows as its relation's rows and is
-- still refused (OUTBOX-8); an SQLite mirror is made again from its table.
-- A state whose waiting groups have no recorded columns (before 0.37)
-- refuses as before: spec/c/test_outbox_columns25.c crafts one.
-- Waiting groups are made by a file ending in a line another program left
-- incomplete (an NDJSON sink will not append after it), or by a process
-- exiting without close (its last marks unrecorded, OUTBOX-3).
local runnel = require "runnel"
local H = require "helper"

local cols = { {"k","int"}, {"g","int"}, key = "k" }

-- what changed, prepare(p) before declaring, the new columns, a row of
-- them and its line.
local changes = {
  { "a column added", nil, { {"k","int"}, {"g","int"}, {"h","string", default = "x"}, key = "k" },
    { k = 5, g = 5, h = "y" }, '{"verb":"INSERT","k":5,"g":5,"h":"y"}' },
  { "a column dropped", nil, { {"k","int"}, key = "k" }, { k = 5 }, '{"verb":"INSERT","k":5}' },
  { "a column renamed", function(p) p:alter("t", { rename = { g = "g2" } }) end,
    { {"k","int"}, {"g2","int"}, key = "k" }, { k = 5, g2 = 5 }, '{"verb":"INSERT","k":5,"g2":5}' },
  { "a column widened from int to float", nil, { {"k","int"}, {"g","float"}, key = "k" },
    { k = 5, g = 5.5 }, '{"verb":"INSERT","k":5,"g":5.5}' },
  { "another key (t dropped and declared again)", function(p) p:drop("t") end,
    { {"k","int"}, {"g","int"}, key = "g" }, { k = 5, g = 6 }, '{"verb":"INSERT","k":5,"g":6}' },
}

-- Group 1 (written), the foreign line, then groups 2 to 4 as committed.
local OLD = '{"verb":"INSERT","k":1,"g":1}\n{"other":1}\n{"verb":"INSERT","k":2,"g":2}\n'
  .. '{"verb":"UPDATE","k":1,"g":3}\n{"verb":"DELETE","k":2}\n'

describe("an NDJSON sink with groups waiting across a change of its table's columns", function()
  local dir, out
  before_each(function() dir = H.tmpdir(); out = dir .. "/out.ndjson" end)
  after_each(H.cleanup)

  local function open() return (H.open_noting(dir .. "/s")) end

  local function waiting(p)
    local n = 0
    for name, c in pairs(p:stats().outbox) do if name:find("out.ndjson", 1, true) then n = n + c end end
    return n
  end

  -- Session 1: group 1 goes out; groups 2 (insert), 3 (update) and 4
  -- (delete) wait behind a foreign incomplete line, mended after close
  -- unless told not to.
  local function leave_waiting(keep_foreign)
    local p = open()
    local t = p:table("t", cols)
    t:sink(runnel.ndjson(out))
    t:insert{ k = 1, g = 1 }
    H.write(out, H.read(out) .. '{"other":1')
    t:insert{ k = 2, g = 2 }
    t:update{ k = 1, g = 3 }
    t:delete{ k = 2 }
    assert.equal(3, waiting(p))
    p:close()
    if not keep_foreign then H.write(out, H.read(out) .. "}\n") end
  end

  for _, c in ipairs(changes) do
    local what, prepare, new, row, line = table.unpack(c)

    it(what .. ": the waiting groups go out once, in order, in their columns, then the new ones in the new", function()
      leave_waiting()
      local p = open()
      if prepare then prepare(p) end
      local t = p:table("t", new)
      t:sink(runnel.ndjson(out))
      assert.equal(0, waiting(p))
      assert.equal(OLD, H.read(out))
      t:insert(row)
      p:close()
      assert.equal(OLD .. line .. "\n", H.read(out))
      p = open()                              -- declared again: nothing twice
      t = p:table("t", new)
      t:sink(runnel.ndjson(out))
      assert.equal(0, waiting(p))
      p:close()
      assert.equal(OLD .. line .. "\n", H.read(out))
    end)
  end

  it("a DELETE waiting across another key carries the key it was committed with", function()
    leave_waiting()
    local p = open()
    p:drop("t")
    local t = p:table("t", changes[5][3])
    t:sink(runnel.ndjson(out))
    t:insert{ k = 7, g = 8 }
    t:delete{ g = 8 }
    p:close()
    assert.equal(OLD .. '{"verb":"INSERT","k":7,"g":8}\n{"verb":"DELETE","g":8}\n', H.read(out))
  end)

  -- Session 1 exits without close: its groups are in the file, their
  -- marks not recorded, so they wait in t's old columns. Session 2, with
  -- a column added, finds them in the file in those columns (not twice),
  -- writes a group in the new ones and exits without close too; session 3
  -- finds that one: every group once.
  it("across processes exiting without close: no group lost or twice", function()
    local script = [[
local runnel = require "runnel"
local p = runnel.open{ path = %q, notes = function() end }
local t = p:table("t", %s)
t:sink(runnel.ndjson(%q))
%s
os.exit(0, false)
]]
    local added = '{ {"k","int"}, {"g","int"}, {"h","string", default = "x"}, key = "k" }'
    H.run_script(dir .. "/one.lua", script:format(dir .. "/s", '{ {"k","int"}, {"g","int"}, key = "k" }', out,
      "t:insert{ k = 1, g = 1 }\nt:insert{ k = 2, g = 2 }\nt:update{ k = 1, g = 3 }"))
    local log = '{"verb":"INSERT","k":1,"g":1}\n{"verb":"INSERT","k":2,"g":2}\n{"verb":"UPDATE","k":1,"g":3}\n'
    assert.equal(log, H.read(out))
    H.run_script(dir .. "/two.lua", script:format(dir .. "/s", added, out, 't:insert{ k = 4, g = 4, h = "y" }'))
    log = log .. '{"verb":"INSERT","k":4,"g":4,"h":"y"}\n'
    assert.equal(log, H.read(out))
    local p = open()
    local t = p:table("t", changes[1][3])
    t:sink(runnel.ndjson(out))
    assert.equal(0, waiting(p))
    p:close()
    assert.equal(log, H.read(out))
  end)

  -- Groups wait behind the foreign line (session 1); session 2, with the
  -- column added, delivers them in their columns and exits without close
  -- after a group in the new ones; session 3 delivers nothing twice.
  it("delivered in their columns by a process that then exits without close: once", function()
    leave_waiting()
    H.run_script(dir .. "/two.lua", ([[
local runnel = require "runnel"
local p = runnel.open{ path = %q, notes = function() end }
local t = p:table("t", { {"k","int"}, {"g","int"}, {"h","string", default = "x"}, key = "k" })
t:sink(runnel.ndjson(%q))
t:insert{ k = 5, g = 5, h = "y" }
os.exit(0, false)
]]):format(dir .. "/s", out))
    local log = OLD .. '{"verb":"INSERT","k":5,"g":5,"h":"y"}\n'
    assert.equal(log, H.read(out))
    local p = open()
    local t = p:table("t", changes[1][3])
    t:sink(runnel.ndjson(out))
    assert.equal(0, waiting(p))
    t:insert{ k = 6, g = 6 }
    p:close()
    assert.equal(log .. '{"verb":"INSERT","k":6,"g":6,"h":"x"}\n', H.read(out))
  end)

  -- Groups wait under t's first columns (session 1) and, the foreign line
  -- still there, under its second (session 2, a column added: the sink is
  -- declared, refused for the line, and keeps what it gets waiting); the
  -- line mended, session 3 (a column renamed) delivers each in its own.
  it("two successive changes with groups waiting under both: each in its own columns", function()
    leave_waiting(true)
    local p = open()
    local t = p:table("t", changes[1][3])
    assert.matches("out.ndjson", H.error_of(t.sink, t, runnel.ndjson(out)), 1, true)
    t:insert{ k = 5, g = 5, h = "y" }
    t:update{ k = 5, g = 6, h = "z" }
    assert.equal(5, waiting(p))
    pcall(p.close, p)
    H.write(out, H.read(out) .. "}\n")
    p = open()
    p:alter("t", { rename = { h = "h2" } })
    t = p:table("t", { {"k","int"}, {"g","int"}, {"h2","string", default = "x"}, key = "k" })
    t:sink(runnel.ndjson(out))
    assert.equal(0, waiting(p))
    t:insert{ k = 7, g = 7, h2 = "w" }
    p:close()
    assert.equal(OLD .. '{"verb":"INSERT","k":5,"g":5,"h":"y"}\n{"verb":"UPDATE","k":5,"g":6,"h":"z"}\n'
                 .. '{"verb":"INSERT","k":7,"g":7,"h2":"w"}\n', H.read(out))
    p = open()                                -- nothing again
    t = p:table("t", { {"k","int"}, {"g","int"}, {"h2","string", default = "x"}, key = "k" })
    t:sink(runnel.ndjson(out))
    p:close()
    assert.equal(OLD .. '{"verb":"INSERT","k":5,"g":5,"h":"y"}\n{"verb":"UPDATE","k":5,"g":6,"h":"z"}\n'
                 .. '{"verb":"INSERT","k":7,"g":7,"h2":"w"}\n', H.read(out))
  end)

  it("a column made not null while a waiting row holds null there: delivered as committed", function()
    local p = open()
    local t = p:table("t", { {"k","int"}, {"g","int", null = true}, key = "k" })
    t:sink(runnel.ndjson(out))
    H.write(out, '{"other":1')
    t:insert{ k = 1 }                         -- group 1: g is null
    t:update{ k = 1, g = 2 }                  -- group 2: the table holds no null any more
    p:close()
    H.write(out, H.read(out) .. "}\n")
    p = open()                                -- same columns, g not null: same layout
    t = p:table("t", { {"k","int"}, {"g","int"}, key = "k" })
    t:sink(runnel.ndjson(out))
    assert.equal(0, waiting(p))
    p:close()
    assert.equal('{"other":1}\n{"verb":"INSERT","k":1,"g":null}\n{"verb":"UPDATE","k":1,"g":2}\n', H.read(out))
  end)
end)

describe("other durable sinks with groups waiting across a change of columns", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  it("a Lua durable sink is still refused (rows as its relation's rows): OUTBOX-8's message", function()
    local p = H.open_noting(dir .. "/s")
    local t = p:table("t", cols)
    t:sink(function() error("down") end, { durable = true, name = "d" })
    t:insert{ k = 1, g = 1 }
    p:close()
    p = H.open_noting(dir .. "/s")
    t = p:table("t", changes[1][3])
    assert.equal("t: durable sink d: group 1 waits for it, recorded for another relation or another declaration of t; "
                 .. "its rows would be read wrong: declare the sink as it was to deliver the waiting groups, or give it "
                 .. "a new name", H.error_of(t.sink, t, function() end, { durable = true, name = "d" }))
    p:close()
  end)

  it("an SQLite mirror is still made again from its table, in the new columns", function()
    local db = dir .. "/out.db"
    local p = H.open_noting(dir .. "/s")
    local t = p:table("t", cols)
    t:sink(runnel.sqlite(db, "t"))
    t:insert{ k = 1, g = 1 }
    H.sql(db, "create trigger no_more before insert on t begin select raise(abort, 'not now'); end")
    t:insert{ k = 2, g = 2 }
    p:close()
    H.sql(db, "drop trigger no_more")
    p = H.open_noting(dir .. "/s")
    t = p:table("t", changes[1][3])
    t:sink(runnel.sqlite(db, "t"))
    t:insert{ k = 3, g = 3, h = "y" }
    p:close()
    assert.equal("1|1|x\n2|2|x\n3|3|y\n", H.sql(db, "select * from t order by k"))
  end)
end)

-- A JetStream subject is a log too (jetstream.c formats rows as NDJSON
-- does): groups waiting while the stream is gone (deleted, then added
-- again) are published in the columns they were committed with once the
-- table has another, then the new groups in the new columns.
describe("a JetStream sink with groups waiting across a change of columns", function()
  local J = require "spec.js_helper"
  local server, why = J.start()
  if not server then
    it("starts nats-server on 127.0.0.1", function() error(why) end)
    return
  end
  local url = server.url
  teardown(function() J.stop(server); H.cleanup() end)

  it("publishes them once in their columns, then the new ones in the new", function()
    J.jsctl(url, "add", "C1", "'c1.>'")
    local dir = H.tmpdir()
    local p = H.open_noting(dir .. "/s")
    local t = p:table("t", cols)
    t:sink(runnel.jetstream{ url = url, subject = "c1.out", timeout = 2 })
    t:insert{ k = 1, g = 1 }
    J.jsctl(url, "delete", "C1")                -- its groups wait: no stream takes them
    t:insert{ k = 2, g = 2 }
    t:delete{ k = 1 }
    local sid = p:state_id()
    pcall(p.close, p)
    J.jsctl(url, "add", "C1", "'c1.>'")
    p = H.open_noting(dir .. "/s")
    t = p:table("t", { {"k","int"}, {"g","int"}, {"h","string", default = "x"}, key = "k" })
    t:sink(runnel.jetstream{ url = url, subject = "c1.out", timeout = 2 })
    t:insert{ k = 3, g = 3, h = "y" }
    p:close()
    local msgs = J.dump(url, "C1", "c1.out")
    local got = {}
    for i, m in ipairs(msgs) do got[i] = m[2] .. " " .. m[3] end
    assert.same({ sid .. ':2:1 {"verb":"INSERT","k":2,"g":2}', sid .. ':3:1 {"verb":"DELETE","k":1}',
                  sid .. ':4:1 {"verb":"INSERT","k":3,"g":3,"h":"y"}' }, got)
  end)
end)
