-- (round 25, a review of SINK-7) A sink declared on a file whose connection's file moved
-- (conn_renew) opens the path again with e == &p->err; write_again saves
-- p->err, lets rewrite fail into it, copies it to *e (itself) and then
-- restores the saved p->err over it: the reason (the refused row) is lost
-- and the declaration's error said "cannot be made at ... anew: ;".
local runnel = require "runnel"
local H = require "helper"

local COLS = { {"id","int"}, {"v","int"}, key = "id" }

describe("SQLite reopen at a declaration", function()
  after_each(H.cleanup)

  local function setup()
    local dir = H.tmpdir()
    local db = dir .. "/o.db"
    local p = runnel.open{ path = dir .. "/st", notes = false }
    local t = p:table("t", COLS)
    local u = p:table("u", COLS)
    t:sink(runnel.sqlite(db, "t"))
    t:insert{ id = 1, v = 1 }
    t:insert{ id = 2, v = 2 }
    assert(os.rename(db, dir .. "/backup.db"))
    H.sql(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER CHECK (v < 2))")
    return p, t, u, db
  end

  it("a delivery names the refused row", function()
    local p, t = setup()
    local ok, err = pcall(p.deliver, p)
    assert.is_false(ok)
    assert.matches("CHECK constraint failed", tostring(err))
    p:close()
  end)

  it("a declaration on the same file names the refused row too", function()
    local p, _, u, db = setup()
    local ok, err = pcall(u.sink, u, runnel.sqlite(db, "u"))
    assert.is_false(ok)
    assert.matches("CHECK constraint failed", tostring(err)) -- was "... anew: ; the groups ..."
    p:close()
  end)
end)
