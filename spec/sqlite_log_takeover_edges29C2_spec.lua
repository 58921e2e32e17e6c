-- A stream's SQLite table is its log: events are added by row id and an
-- id met again is never overwritten (the group waits). A state taking a
-- log over from a state gone (SINK-4), or a copy of a state that went
-- further, starts its ids below the log's: the declaration was accepted,
-- and then its first group, and every one after it, was refused at each
-- delivery for good (round 29). A log starting anew that already holds
-- an id the stream gives next is now refused at declaration, naming the
-- table, its ids and the stream's next id; the log is left as it was. A
-- state's own log out of step, or a filter's (whose ids are its input's),
-- goes on as before.
local runnel = require "runnel"
local H = require "helper"

local COLS = { {"x","int"}, {"y","string"} }
local function log(db, t) return H.sql(db, "SELECT runnel_id, x, y FROM " .. (t or "s") .. " ORDER BY runnel_id") end

describe("a stream's SQLite log starting anew (round 29)", function()
  after_each(H.cleanup)

  it("is refused at declaration when it holds ids the stream gives next; the log is left as it was", function()
    local dir = H.tmpdir()
    local db = dir .. "/o.db"
    local p = runnel.open{ path = dir .. "/a", notes = false }
    local s = p:stream("s", COLS)
    s:sink(runnel.sqlite(db, "s"))
    for i = 1, 3 do s:insert{ x = i, y = "a" } end
    p:close()
    assert(os.execute("rm -rf '" .. dir .. "/a'")) -- the state that wrote it is gone: its table may be taken over
    p = runnel.open{ path = dir .. "/b", notes = false }
    s = p:stream("s", COLS)
    assert.equal(('s: sqlite table "s" in %s is a log of events holding row ids up to 3, and the next event of s is '
                  .. 'id 1: its events would meet ids the log has (another state wrote it, or a copy of this state '
                  .. 'that went further) and wait for good; name another table, or drop or rename this one'):format(db),
                 H.error_of(s.sink, s, runnel.sqlite(db, "s")))
    s:sink(runnel.sqlite(db, "s2"))
    s:insert{ x = 9, y = "b" }
    p:deliver()
    assert.equal("1|1|a\n2|2|a\n3|3|a\n", log(db))
    assert.equal("1|9|b\n", log(db, "s2"))
    p:close()
  end)

  it("takes over a log whose ids are all below the next one, a filter's counted by its input's", function()
    local dir = H.tmpdir()
    local db = dir .. "/o.db"
    local function open(name)
      local p = runnel.open{ path = dir .. "/" .. name, notes = false }
      local s = p:stream("s", COLS)
      return p, s, s:filter(function(r) return r.x % 2 == 1 end)
    end
    local p, s, f = open("a")
    s:sink(runnel.sqlite(db, "s"))
    f:sink(runnel.sqlite(db, "odd"))
    s:insert{ x = 1, y = "a" }
    p:close()
    assert(os.execute("rm -rf '" .. dir .. "/a'"))
    p, s, f = open("b")
    for i = 1, 2 do s:insert{ x = 10 + i, y = "b" } end -- ids 1 and 2, before the sinks
    s:sink(runnel.sqlite(db, "s"))
    f:sink(runnel.sqlite(db, "odd"))
    s:insert{ x = 13, y = "b" }
    assert.equal("1|1|a\n3|13|b\n", log(db))
    assert.equal("1|1|a\n3|13|b\n", log(db, "odd"))
    p:close()
  end)

  it("goes on with a state's own log out of step, and a filter's", function()
    local dir = H.tmpdir()
    local db = dir .. "/o.db"
    local function open(with_sink)
      local p = runnel.open{ path = dir .. "/st", notes = false }
      local s = p:stream("s", COLS)
      local f = s:filter(function(r) return r.x % 2 == 1 end)
      if with_sink then
        s:sink(runnel.sqlite(db, "s"))
        f:sink(runnel.sqlite(db, "odd"))
      end
      return p, s
    end
    local p, s = open(true)
    for i = 1, 3 do s:insert{ x = i, y = "a" } end
    p:close()
    p, s = open(false) -- the sinks left out of a group: out of step
    s:insert{ x = 5, y = "b" }
    p:close()
    p, s = open(true)
    s:insert{ x = 7, y = "c" }
    p:close()
    assert.equal("1|1|a\n2|2|a\n3|3|a\n5|7|c\n", log(db))
    assert.equal("1|1|a\n3|3|a\n5|7|c\n", log(db, "odd"))
  end)
end)
