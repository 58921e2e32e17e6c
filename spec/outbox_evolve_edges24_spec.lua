-- Durable sinks with groups waiting in the outbox while their table is
-- declared again with other columns (added, dropped, renamed) or dropped
-- (round 24). What the design promises (docs/api.md, rel:sink and
-- runnel.sqlite; OUTBOX-3, -4 and -8 in core/outbox.c):
--  * an NDJSON sink is a log: its waiting groups are delivered once, in
--    order, in the columns they were committed with, then the new groups in
--    the new columns (OUTBOX-11, since 0.37; before, the sink was refused
--    until the table was declared as it was: spec/outbox_columns_edges25
--    has the rest);
--  * an SQLite mirror holds the relation's rows: declared on the changed
--    table it is made again and written whole from the relation, its
--    waiting groups covered by that, none applied twice.
-- Waiting groups are made two ways: a file ending in a line another
-- program left incomplete (an NDJSON sink will not append after it) and a
-- trigger (SQLite refuses the row); or a process exiting without close,
-- whose last group's mark is not yet recorded (OUTBOX-3).
local runnel = require "runnel"
local H = require "helper"

local cols = { {"k","int"}, {"g","int"}, key = "k" }

-- The changed declarations of t, each with the one that undoes it:
-- name, prepare(p) before declaring, columns; back (to cols).
local changes = {
  { "a column added", nil, { {"k","int"}, {"g","int"}, {"h","string", default = "x"}, key = "k" },
    nil, cols },
  { "a column dropped", nil, { {"k","int"}, key = "k" },
    nil, { {"k","int"}, {"g","int", default = 0}, key = "k" } },
  { "a column renamed", function(p) p:alter("t", { rename = { g = "g2" } }) end, { {"k","int"}, {"g2","int"}, key = "k" },
    function(p) p:alter("t", { rename = { g2 = "g" } }) end, cols },
}

-- The lines of group 1 (written) and groups 2 and 3 (committed), as committed.
local LOG = '{"verb":"INSERT","k":1,"g":1}\n{"verb":"INSERT","k":2,"g":2}\n{"verb":"UPDATE","k":1,"g":3}\n'

describe("durable sinks with groups waiting, their table changed", function()
  local dir, out, db
  before_each(function() dir = H.tmpdir(); out = dir .. "/out.ndjson"; db = dir .. "/out.db" end)
  after_each(H.cleanup)

  local function open() return (H.open_noting(dir .. "/s")) end

  local function waiting(p)
    local n = {}
    for name, c in pairs(p:stats().outbox) do n[name:find("out.db", 1, true) and "sqlite" or "ndjson"] = c end
    return n
  end

  -- Session 1: t with an NDJSON and an SQLite sink; group 1 goes out,
  -- groups 2 and 3 wait for both (a foreign incomplete line, a trigger).
  local function leave_waiting()
    local p = open()
    local t = p:table("t", cols)
    t:sink(runnel.ndjson(out))
    t:sink(runnel.sqlite(db, "t"))
    t:insert{ k = 1, g = 1 }
    H.write(out, H.read(out) .. '{"other":1')
    H.sql(db, "create trigger no_more before insert on t begin select raise(abort, 'not now'); end")
    t:insert{ k = 2, g = 2 }
    t:update{ k = 1, g = 3 }
    assert.same({ ndjson = 2, sqlite = 2 }, waiting(p))
    p:close()
    H.write(out, H.read(out) .. "}\n")     -- both targets mended
    H.sql(db, "drop trigger no_more")
  end

  local OTHER = '{"verb":"INSERT","k":1,"g":1}\n{"other":1}\n'

  for _, c in ipairs(changes) do
    local what, prepare, new, unprepare, back = table.unpack(c)

    it("NDJSON, " .. what .. ": the waiting groups delivered once in their columns, then the new ones in the new", function()
      leave_waiting()
      local p = open()
      if prepare then prepare(p) end
      local t = p:table("t", new)
      t:sink(runnel.ndjson(out))              -- no refusal since 0.37 (OUTBOX-11)
      assert.equal(0, waiting(p).ndjson)
      local after = OTHER .. '{"verb":"INSERT","k":2,"g":2}\n{"verb":"UPDATE","k":1,"g":3}\n'
      assert.equal(after, H.read(out))
      t:insert(new[3] and { k = 4, g = 4, h = "y" } or new[2] and new[2][1] == "g2" and { k = 4, g2 = 4 } or { k = 4 })
      p:close()
      local last = new[3] and '{"verb":"INSERT","k":4,"g":4,"h":"y"}\n' or new[2] and new[2][1] == "g2" and
        '{"verb":"INSERT","k":4,"g2":4}\n' or '{"verb":"INSERT","k":4}\n'
      assert.equal(after .. last, H.read(out))
      p = open()                             -- declared again: nothing twice
      t = p:table("t", new)
      t:sink(runnel.ndjson(out))
      p:close()
      assert.equal(after .. last, H.read(out))
      p = open()                             -- and as it was (back): its next group in those columns
      if unprepare then unprepare(p) end
      t = p:table("t", back)
      t:sink(runnel.ndjson(out))
      t:insert{ k = 5, g = 5 }
      p:close()
      assert.equal(after .. last .. '{"verb":"INSERT","k":5,"g":5}\n', H.read(out))
    end)

    it("SQLite, " .. what .. ": the mirror is made again from the relation, its waiting groups covered once", function()
      leave_waiting()
      local p = open()
      if prepare then prepare(p) end
      local t = p:table("t", new)
      t:sink(runnel.sqlite(db, "t"))
      assert.equal(0, waiting(p).sqlite)
      local rows = new[3] and "1|3|x\n2|2|x\n" or new[2] and "1|3\n2|2\n" or "1\n2\n"
      assert.equal(rows, H.sql(db, "select * from t order by k"))
      assert.equal((new[3] and "k,g,h" or new[2] and "k," .. new[2][1] or "k") .. "\n",
                   H.sql(db, "select group_concat(name) from pragma_table_info('t')"))
      t:delete{ k = 2 }
      p:close()
      p = open()                             -- nothing again
      if prepare then prepare(p) end
      t = p:table("t", new)
      t:sink(runnel.sqlite(db, "t"))
      p:close()
      assert.equal(new[3] and "1|3|x\n" or new[2] and "1|3\n" or "1\n", H.sql(db, "select * from t order by k"))
      assert.equal("t|4\n", H.sql(db, "select tbl, seq from runnel_sinks"))
    end)
  end

  -- A process that exits without close leaves its last group's mark
  -- unrecorded (OUTBOX-3): the group is in the file, yet waits in the state
  -- in t's old columns; the changed t's sink finds it in the file, in those
  -- columns (OUTBOX-11): not twice.
  it("NDJSON and SQLite after a process exited without close, t with a column added: no group lost or twice", function()
    H.run_script(dir .. "/child.lua", ([[
local runnel = require "runnel"
local p = runnel.open{ path = %q, notes = function() end }
local t = p:table("t", { {"k","int"}, {"g","int"}, key = "k" })
t:sink(runnel.ndjson(%q))
t:sink(runnel.sqlite(%q, "t"))
t:insert{ k = 1, g = 1 }
t:insert{ k = 2, g = 2 }
t:update{ k = 1, g = 3 }
os.exit(0, false)
]]):format(dir .. "/s", out, db))
    assert.equal(LOG, H.read(out))
    local p = open()
    local t = p:table("t", changes[1][3])
    t:sink(runnel.ndjson(out))
    t:sink(runnel.sqlite(db, "t"))
    assert.same({ ndjson = 0, sqlite = 0 }, waiting(p))
    assert.equal("1|3|x\n2|2|x\n", H.sql(db, "select * from t order by k"))
    assert.equal(LOG, H.read(out))
    t:insert{ k = 3, g = 3, h = "y" }
    p:close()
    assert.equal(LOG .. '{"verb":"INSERT","k":3,"g":3,"h":"y"}\n', H.read(out))
  end)

  -- The relation the sink follows: a filter of t has t's columns, so it
  -- changes with t, its waiting groups delivered in their columns as t's
  -- would be (OUTBOX-11); a select keeping the same columns reads its
  -- waiting groups right and delivers them.
  for _, kind in ipairs{ "filter", "select" } do
    it("NDJSON on a " .. kind .. " of t, t with a column added: delivered once" .. (kind == "filter" and ", in their columns" or ""), function()
      local function follow(t)
        if kind == "filter" then return t:filter(function(r) return r.k > 0 end, "f") end
        return t:select({ "k", "g", key = "k" }, "f")
      end
      local p = open()
      local t = p:table("t", cols)
      follow(t):sink(runnel.ndjson(out))
      t:insert{ k = 1, g = 1 }
      H.write(out, H.read(out) .. '{"other":1')
      t:insert{ k = 2, g = 2 }
      p:close()
      H.write(out, H.read(out) .. "}\n")
      p = open()
      t = p:table("t", changes[1][3])
      local f = follow(t)
      f:sink(runnel.ndjson(out))
      assert.equal(0, waiting(p).ndjson)
      t:insert{ k = 3, g = 3 }
      p:close()
      assert.equal(OTHER .. '{"verb":"INSERT","k":2,"g":2}\n{"verb":"INSERT","k":3,"g":3'
                   .. (kind == "filter" and ',"h":"x"' or "") .. '}\n', H.read(out))
    end)
  end

  -- p:drop keeps the waiting groups (OUTBOX-4); the NDJSON sink of t
  -- declared again, with other columns, gets them in the old t's columns
  -- (OUTBOX-11), the mirror holds the new t's rows.
  it("t dropped with groups waiting: NDJSON on other columns delivers them once in theirs; SQLite holds the new t", function()
    leave_waiting()
    local p = open()
    p:drop("t")
    p:close()
    p = open()
    local t = p:table("t", changes[1][3])
    t:sink(runnel.ndjson(out))
    assert.equal(0, waiting(p).ndjson)
    t:sink(runnel.sqlite(db, "t"))
    assert.equal(0, waiting(p).sqlite)
    assert.equal("", H.sql(db, "select * from t"))
    t:insert{ k = 9, g = 9 }
    assert.equal("9|9|x\n", H.sql(db, "select * from t"))
    p:close()
    p = open()
    p:drop("t")
    p:close()
    p = open()
    t = p:table("t", cols)
    t:sink(runnel.ndjson(out))
    assert.equal(0, waiting(p).ndjson)
    t:insert{ k = 5, g = 5 }
    p:close()
    assert.equal(OTHER .. '{"verb":"INSERT","k":2,"g":2}\n{"verb":"UPDATE","k":1,"g":3}\n'
                 .. '{"verb":"INSERT","k":9,"g":9,"h":"x"}\n{"verb":"INSERT","k":5,"g":5}\n', H.read(out))
  end)
end)
