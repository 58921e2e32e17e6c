-- Durable sinks and the outbox around declarations and reopens (round 11):
-- a sink declared under another name while groups wait for it, a relation
-- dropped while its durable sink has groups waiting, a process killed with
-- groups waiting. The outbox keeps each committed group for the sinks
-- declared when it commits, by sink name, until the sink takes it:
-- whatever happens to the relation meanwhile, a group it recorded is
-- delivered once (or the sink refused, OUTBOX-8), never dropped unsaid.
local runnel = require "runnel"
local H = require "helper"

local cols = { {"k","int"}, {"g","int"}, key = "k" }

describe("a durable sink with groups waiting", function()
  local dir, notes
  before_each(function() dir = H.tmpdir(); notes = {} end)
  after_each(H.cleanup)

  local function open()
    local p = runnel.open{ path = dir .. "/s", notes = function(line) notes[#notes + 1] = line end }
    return p
  end

  -- Declares the durable sink `name` on rel: it fails when got is nil, else
  -- keeps "name seq:verb:k" of each change in got. The declaration's error or nil.
  local function sink(rel, name, got)
    local ok, err = pcall(rel.sink, rel, function(verb, row, old, info)
      if not got then error("down") end
      got[#got + 1] = ("%s %d:%s:%d"):format(name, info.seq, verb, (row or old).k)
    end, { durable = true, name = name })
    return not ok and err or nil
  end

  -- Session 1: t with the sink d failing: groups 1 (k 1) and 2 (k 2) wait.
  local function leave_waiting()
    local p = open()
    local t = p:table("t", cols)
    assert.is_nil(sink(t, "d"))
    t:insert{ k = 1, g = 1 }
    t:insert{ k = 2, g = 1 }
    assert.equal(2, p:stats().outbox["t: durable sink d"])
    p:close()
  end

  -- Drops t in a pipeline of its own (before declaring it, as p:drop asks).
  local function drop_t()
    local p = open()
    p:drop("t")
    assert.equal(1, #notes)               -- the groups waiting are said (outbox_orphans12_spec: its words)
    assert.matches('^drop "t": %d groups? %(%d rows?%) since group %d still waits? for its durable sink', notes[1])
    notes = {}
    p:close()
  end

  it("declared under another name leaves them waiting for its old name, which gets them with the missed note", function()
    leave_waiting()
    local got = {}
    local p = open()
    local t = p:table("t", cols)
    assert.is_nil(sink(t, "e", got))      -- new: it starts at group 3, and d's groups are not its
    t:insert{ k = 3, g = 1 }
    assert.same({ "e 3:INSERT:3" }, got)
    p:close()
    p = open()
    t = p:table("t", cols)
    assert.is_nil(sink(t, "d", got))      -- its waiting groups, then what it missed is said
    assert.same({ "e 3:INSERT:3", "d 1:INSERT:1", "d 2:INSERT:2" }, got)
    local said = table.concat(notes, "\n")
    assert.matches("t: durable sink d missed the changes of t in group 3: they were committed while it was not declared",
                   said, 1, true)
    t:insert{ k = 4, g = 1 }
    assert.same({ "e 3:INSERT:3", "d 1:INSERT:1", "d 2:INSERT:2", "d 4:INSERT:4" }, got)
    p:close()
  end)

  -- The groups were committed and recorded for d: a Lua or NDJSON sink is a
  -- log, which gets the dropped relation's groups as its own (as it got
  -- those delivered before the drop), then the new relation's.
  it("on a relation dropped and declared again with its columns: gets them once, then the new relation's", function()
    leave_waiting()
    drop_t()
    local got = {}
    local p = open()
    local t = p:table("t", cols)
    assert.equal(0, t:count())
    assert.is_nil(sink(t, "d", got))
    assert.same({ "d 1:INSERT:1", "d 2:INSERT:2" }, got)
    t:insert{ k = 3, g = 1 }
    assert.same({ "d 1:INSERT:1", "d 2:INSERT:2", "d 3:INSERT:3" }, got)
    assert.same({}, notes)                -- nothing missed: the new t changed in no group before
    p:close()
  end)

  it("on a relation dropped and declared again with other columns: refused, naming the group; as it was, delivered", function()
    leave_waiting()
    drop_t()
    local got = {}
    local p = open()
    local t = p:table("t", { {"k","int"}, {"g","string"}, key = "k" })
    assert.equal("t: durable sink d: group 1 waits for it, recorded for another relation or another declaration of t; "
                 .. "its rows would be read wrong: declare the sink as it was to deliver the waiting groups, or give it "
                 .. "a new name", (sink(t, "d", got):gsub("^.-:%d+: ", "")))
    assert.is_nil(sink(t, "e", got))      -- another name is another sink
    assert.same({}, got)
    p:close()
    drop_t()                              -- nothing of d is lost: t with the columns it had gets them
    p = open()
    t = p:table("t", cols)
    assert.is_nil(sink(t, "d", got))
    assert.same({ "d 1:INSERT:1", "d 2:INSERT:2" }, got)
    p:close()
  end)

  -- A mirror holds the relation's rows: the new relation's, not the
  -- dropped one's waiting groups.
  it("as an SQLite mirror of a relation dropped and declared again: holds the new relation's rows", function()
    local db = dir .. "/out.db"
    local p = open()
    local t = p:table("t", cols)
    t:sink(runnel.sqlite(db, "t"))
    t:insert{ k = 1, g = 1 }
    H.sql(db, "create trigger no_2 before insert on t when new.k = 2 begin select raise(abort, 'not 2'); end")
    t:insert{ k = 2, g = 1 }              -- group 2 waits
    assert.equal(1, p:stats().outbox[next(p:stats().outbox)])
    p:close()
    H.sql(db, "drop trigger no_2")
    drop_t()
    p = open()
    t = p:table("t", cols)
    t:sink(runnel.sqlite(db, "t"))
    assert.equal("", H.sql(db, "select * from t"))
    t:insert{ k = 3, g = 7 }
    assert.equal("3|7\n", H.sql(db, "select * from t"))
    assert.equal(0, p:stats().outbox[next(p:stats().outbox)])
    p:close()
  end)

  -- A child process commits groups its failing sink leaves waiting, then
  -- exits without closing; the next process, declaring t again with only a
  -- default changed, delivers each group once.
  it("left by a process killed without close: delivered once, t declared again with another default", function()
    H.run_script(dir .. "/child.lua", ([[
local runnel = require "runnel"
local p = runnel.open{ path = %q, notes = function() end }
local t = p:table("t", { {"k","int"}, {"g","int", default = 1}, key = "k" })
t:sink(function() error("down") end, { durable = true, name = "d" })
t:insert{ k = 1 }
t:insert{ k = 2, g = 2 }
p:flush()
t:update{ k = 1, g = 3 }
os.exit(0, false)
]]):format(dir .. "/s"))
    local got = {}
    local p = open()
    local t = p:table("t", { {"k","int"}, {"g","int", default = 9}, key = "k" })
    assert.is_nil(sink(t, "d", got))
    assert.same({ "d 1:INSERT:1", "d 2:INSERT:2", "d 3:UPDATE:1" }, got)
    p:close()
    p = open()
    t = p:table("t", { {"k","int"}, {"g","int", default = 9}, key = "k" })
    assert.is_nil(sink(t, "d", got))      -- taken: not again
    assert.equal(3, #got)
    p:close()
  end)
end)
