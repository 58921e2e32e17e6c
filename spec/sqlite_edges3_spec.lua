-- runnel.sqlite at its edges (round 3): a state copied (cp, runnel
-- snapshot) keeps its state id, so it must not pass for the state that
-- writes a table; a state moved (mv) keeps its tables. Checked through
-- SQLite itself (the sqlite3 tool).
local runnel = require "runnel"
local H = require "helper"

local sql = H.sql

local function decl(p)
  return p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
end

-- The message refusing the state at copy the table written by the state at
-- owner, both with one state id (shown as ID).
local function copy_refused(db, owner, copy)
  return ('t: sqlite table "t" in %s is written by the runnel state at %s, and the state at %s has its state id '
          .. '(ID): one is a copy of the other (cp, runnel snapshot); one state writes a table: name another table, '
          .. 'or remove the state at %s (a state moved, not copied, keeps its tables)'):format(db, owner, copy, owner)
end

local function without_id(err) return (err:gsub("%(%x+%)", "(ID)")) end

describe("runnel.sqlite: a copied state", function()
  local dir, db
  before_each(function() dir = H.tmpdir(); db = dir .. "/out.db" end)
  after_each(H.cleanup)

  -- the copy kept the state id, passed for the table's writer, and both
  -- wrote the table: a mixture of two states' rows and marks
  it("refuses a copy made with cp while the original is there, naming the table, the file and both states", function()
    local one = runnel.open(dir .. "/one")
    local t1 = decl(one)
    t1:sink(runnel.sqlite(db, "t"))
    t1:insert{ k = 1, v = 1 }
    one:close()
    H.sh(("cp -r '%s/one' '%s/copy'"):format(dir, dir))
    one = runnel.open(dir .. "/one") -- open in this process too: its id is read beside its writer
    t1 = decl(one)
    t1:sink(runnel.sqlite(db, "t"))
    local copy = runnel.open(dir .. "/copy")
    local tc = decl(copy)
    tc:insert{ k = 5, v = 5 }
    assert.equal(copy_refused(db, dir .. "/one", dir .. "/copy"),
                 without_id(H.error_of(tc.sink, tc, runnel.sqlite(db, "t"))))
    tc:insert{ k = 6, v = 6 } -- the copy goes on; the table is not its
    copy:close()
    t1:insert{ k = 2, v = 2 }
    one:close()
    assert.equal("1|1\n2|2\n", sql(db, "select * from t order by k"))
    assert.equal(("t|2|%s/one\n"):format(dir), sql(db, "select tbl, seq, state_path from runnel_sinks"))
    copy = runnel.open(dir .. "/copy") -- closed is not gone: still refused
    tc = decl(copy)
    assert.equal(copy_refused(db, dir .. "/one", dir .. "/copy"),
                 without_id(H.error_of(tc.sink, tc, runnel.sqlite(db, "t"))))
    copy:close()
  end)

  it("refuses the original once its snapshot declared the table first", function()
    local one = runnel.open(dir .. "/one")
    local t1 = decl(one)
    t1:insert{ k = 1, v = 1 }
    local id = one:state_id() -- made at its first use: the snapshot keeps it
    one:close()
    local _, err, code = H.sh(("%s snapshot '%s/one' '%s/snap'"):format(H.runnel_bin, dir, dir))
    assert.equal(0, code, err)
    local snap = runnel.open(dir .. "/snap")
    assert.equal(id, snap:state_id())
    local ts = decl(snap)
    ts:sink(runnel.sqlite(db, "t"))
    ts:insert{ k = 2, v = 2 }
    snap:close()
    one = runnel.open(dir .. "/one")
    t1 = decl(one)
    t1:insert{ k = 3, v = 3 }
    assert.equal(copy_refused(db, dir .. "/snap", dir .. "/one"),
                 without_id(H.error_of(t1.sink, t1, runnel.sqlite(db, "t"))))
    one:close()
    assert.equal("1|1\n2|2\n", sql(db, "select * from t order by k"))
  end)

  it("hands the table to the copy once the original is removed, rewriting it from the copy's rows", function()
    local one = runnel.open(dir .. "/one")
    local t1 = decl(one)
    t1:sink(runnel.sqlite(db, "t"))
    t1:insert{ k = 1, v = 1 }
    local _, err, code = H.sh(("%s snapshot '%s/one' '%s/snap'"):format(H.runnel_bin, dir, dir))
    assert.equal(0, code, err)
    t1:insert{ k = 2, v = 2 } -- after the snapshot: the copy has not this row
    one:close()
    H.sh(("rm -rf '%s/one'"):format(dir))
    local snap = runnel.open(dir .. "/snap")
    local ts = decl(snap)
    ts:sink(runnel.sqlite(db, "t"))
    assert.equal("1|1\n", sql(db, "select * from t order by k"))
    ts:insert{ k = 3, v = 3 }
    snap:close()
    assert.equal("1|1\n3|3\n", sql(db, "select * from t order by k"))
    assert.equal(("%s/snap\n"):format(dir), sql(db, "select state_path from runnel_sinks"))
  end)
end)

describe("runnel.sqlite: a copy that took the table", function()
  local dir, db
  before_each(function() dir = H.tmpdir(); db = dir .. "/out.db" end)
  after_each(H.cleanup)

  -- the original's marks were written over the copy's row (same state id)
  it("refuses the deliveries of the original still running, its directory removed under it", function()
    local one = runnel.open(dir .. "/one")
    local t1 = decl(one)
    t1:sink(runnel.sqlite(db, "t"))
    t1:insert{ k = 1, v = 1 }
    local _, err, code = H.sh(("%s snapshot '%s/one' '%s/snap'"):format(H.runnel_bin, dir, dir))
    assert.equal(0, code, err)
    H.sh(("rm -rf '%s/one'"):format(dir))
    local snap = runnel.open(dir .. "/snap")
    local ts = decl(snap)
    ts:sink(runnel.sqlite(db, "t"))
    ts:insert{ k = 5, v = 5 }
    t1:insert{ k = 2, v = 2 } -- committed in the original; its delivery is refused
    assert.equal(('t: sqlite table "t" in %s was taken by another runnel state while this one wrote it; one state '
                  .. 'writes a table: name another table'):format(db), H.error_of(one.deliver, one))
    assert.equal("1|1\n5|5\n", sql(db, "select * from t order by k"))
    assert.equal(("t|2|%s/snap\n"):format(dir), sql(db, "select tbl, seq, state_path from runnel_sinks"))
    one:close()
    snap:close()
  end)
end)

describe("runnel.sqlite: a moved state", function()
  local dir, db
  before_each(function() dir = H.tmpdir(); db = dir .. "/out.db" end)
  after_each(H.cleanup)

  it("keeps its table: in step, nothing rewritten, its new directory recorded", function()
    local one = runnel.open(dir .. "/one")
    local t1 = decl(one)
    t1:sink(runnel.sqlite(db, "t"))
    t1:insert{ k = 1, v = 1 }
    one:close()
    sql(db, "insert into t values (7, 7)") -- the user's row: a rewrite would delete it
    H.sh(("mv '%s/one' '%s/moved'"):format(dir, dir))
    local moved = runnel.open(dir .. "/moved")
    local tm = decl(moved)
    tm:sink(runnel.sqlite(db, "t"))
    tm:insert{ k = 2, v = 2 }
    moved:close()
    assert.equal("1|1\n2|2\n7|7\n", sql(db, "select * from t order by k"))
    assert.equal(("t|2|%s/moved\n"):format(dir), sql(db, "select tbl, seq, state_path from runnel_sinks"))
    -- a new state made where it was is another state: refused
    local again = runnel.open(dir .. "/one")
    local ta = decl(again)
    assert.matches("is written by another runnel state", H.error_of(ta.sink, ta, runnel.sqlite(db, "t")))
    again:close()
    moved = runnel.open(dir .. "/moved") -- and the moved state keeps it
    tm = decl(moved)
    tm:sink(runnel.sqlite(db, "t"))
    tm:insert{ k = 3, v = 3 }
    moved:close()
    assert.equal("1|1\n2|2\n3|3\n7|7\n", sql(db, "select * from t order by k"))
  end)

  it("keeps its table when a new state was made where it was before it came back", function()
    local one = runnel.open(dir .. "/one")
    local t1 = decl(one)
    t1:sink(runnel.sqlite(db, "t"))
    t1:insert{ k = 1, v = 1 }
    one:close()
    H.sh(("mv '%s/one' '%s/moved'"):format(dir, dir))
    local other = runnel.open(dir .. "/one") -- another state (another id) where the owner was
    decl(other):insert{ k = 9, v = 9 }
    other:close()
    local moved = runnel.open(dir .. "/moved")
    local tm = decl(moved)
    tm:sink(runnel.sqlite(db, "t"))
    tm:insert{ k = 2, v = 2 }
    moved:close()
    assert.equal("1|1\n2|2\n", sql(db, "select * from t order by k"))
    assert.equal(("%s/moved\n"):format(dir), sql(db, "select state_path from runnel_sinks"))
  end)
end)
