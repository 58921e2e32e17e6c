-- A stream's SQLite table is the log of its events: an id met again is
-- refused, never written over an event a state wrote before.
local H = require "helper"
local runnel = require "runnel"

local function log_of(db)
  return H.sql(db, "SELECT runnel_id, v FROM ev ORDER BY runnel_id")
end

local function write_events(state, db, from, n)
  local p = runnel.open{ path = state, notes = false }
  local ev = p:stream("ev", { {"v","string"} })
  ev:sink(runnel.sqlite(db, "ev"))
  for i = from, from + n - 1 do ev:insert{ v = "e" .. i } end
  local ok, err = pcall(p.deliver, p)
  p:close()
  return ok, err
end

describe("a stream's SQLite log", function()
  after_each(H.cleanup)

  it("refuses an event whose id it holds, from a new state taking the table over, and keeps the old event", function()
    local dir = H.tmpdir()
    local db = dir .. "/log.db"
    assert.is_true(write_events(dir .. "/a", db, 1, 2))
    assert(os.execute("rm -rf " .. dir .. "/a")) -- the state is gone: the next one takes the table over
    -- since round 29 its declaration is refused: its first event's id is in the log already
    -- (sqlite_log_takeover_edges29C2_spec.lua); an id met at a delivery is refused as before
    local ok, err = pcall(write_events, dir .. "/b", db, 3, 1)
    assert.is_false(ok)
    assert.matches('ev: sqlite table "ev" in .*log.db is a log of events holding row ids up to 2, and the next event '
      .. 'of ev is id 1', tostring(err))
    assert.same(log_of(db), H.sql(db, "SELECT 1, 'e1' UNION ALL SELECT 2, 'e2'"))
  end)

  it("refuses an event whose id another writer put in the log meanwhile, and keeps that event", function()
    local dir = H.tmpdir()
    local db = dir .. "/log.db"
    assert.is_true(write_events(dir .. "/st", db, 1, 1))
    H.sql(db, "INSERT INTO ev (runnel_id, v) VALUES (2, 'theirs')")
    local ok, err = write_events(dir .. "/st", db, 2, 1)
    assert.is_false(ok)
    assert.matches('ev: sqlite: writing: UNIQUE constraint failed: ev.runnel_id %(table "ev" in .*log.db, group 2, '
      .. 'row runnel_id = 2%); the table is the log of its events, and this id is in it already: never overwritten',
      tostring(err))
    assert.same(log_of(db), H.sql(db, "SELECT 1, 'e1' UNION ALL SELECT 2, 'theirs'"))
  end)

  it("goes on after its stream is dropped and declared again: the ids go on too", function()
    local dir = H.tmpdir()
    local db = dir .. "/log.db"
    assert.is_true(write_events(dir .. "/st", db, 1, 2))
    local p = runnel.open{ path = dir .. "/st", notes = false }
    p:drop("ev")
    p:close()
    assert.is_true(write_events(dir .. "/st", db, 3, 2))
    assert.same(H.sql(db, "SELECT 1, 'e1' UNION ALL SELECT 2, 'e2' UNION ALL SELECT 3, 'e3' UNION ALL SELECT 4, 'e4'"),
                log_of(db))
  end)
end)
