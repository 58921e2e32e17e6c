-- A named durable sink declared again after groups were committed without
-- it (OUTBOX-5 in core/outbox.c): the outbox records a group only for the
-- durable sinks declared when it commits, so those groups cannot reach it.
-- A mirror (an SQLite table of a table) is rewritten whole; any other sink
-- is told, by a note naming the sink and the groups it missed, and goes on
-- from the next group; groups waiting from before are still delivered.
local runnel = require "runnel"
local H = require "helper"

describe("a durable sink declared again after groups committed without it", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  local cols = { {"k","int"}, key = "k" }

  -- One session: t declared, `sink(t)` declares its sinks (or none), then `ks` inserted one group each.
  local function session(sink, ks)
    local p, notes = H.open_noting(dir .. "/s")
    local t = p:table("t", cols)
    if sink then sink(t) end
    for _, k in ipairs(ks) do t:insert{ k = k } end
    p:close()
    return notes
  end

  local function sinks_notes(notes)
    local out = {}
    for _, l in ipairs(notes) do
      if l:find("durable sink", 1, true) then out[#out + 1] = l end
    end
    return out
  end

  it("is told which groups it missed (a Lua sink), and gets the later ones", function()
    local got = {}
    local function lua_sink(t)
      t:sink(function(_, row, _, info) got[#got + 1] = info.seq .. ":" .. row.k end, { durable = true, name = "d" })
    end
    assert.same({}, sinks_notes(session(lua_sink, { 1 })))
    session(nil, { 2, 3 })               -- groups 2 and 3: no sink d
    local notes = sinks_notes(session(lua_sink, { 4 }))
    assert.same({ "1:1", "4:4" }, got)
    -- before: no word; groups 2 and 3 were skipped silently
    assert.same({ "t: durable sink d missed the changes of t in groups 2 to 3: they were committed while it was not declared, "
                  .. "and the outbox keeps a group only for the durable sinks declared when it commits; "
                  .. "it goes on from group 4" }, notes)
    assert.same({}, sinks_notes(session(lua_sink, { 5 }))) -- in step again: no note
    assert.same({ "1:1", "4:4", "5:5" }, got)
  end)

  it("still gets the groups that waited for it from before, then the note", function()
    local got, down = {}, true
    local function lua_sink(t)
      t:sink(function(_, row, _, info)
        if down then error("down") end
        got[#got + 1] = info.seq .. ":" .. row.k
      end, { durable = true, name = "d" })
    end
    session(lua_sink, { 1 })             -- group 1 waits in the outbox
    down = false
    session(nil, { 2 })
    local notes = sinks_notes(session(lua_sink, {}))
    assert.same({ "1:1" }, got)
    assert.equal(1, #notes)
    assert.matches("t: durable sink d missed the changes of t in group 2: ", notes[1], 1, true)
    assert.matches("it goes on from group 3", notes[1], 1, true)
  end)

  it("is told for an NDJSON file, naming the file", function()
    local log = dir .. "/out.ndjson"
    local function nd(t) t:sink(runnel.ndjson(log, { verb = false })) end
    session(nd, { 1 })
    session(nil, { 2 })
    local notes = sinks_notes(session(nd, { 3 }))
    assert.equal('{"k":1}\n{"k":3}\n', H.read(log))
    assert.equal(1, #notes)
    local real = H.sh("realpath " .. log):gsub("\n$", "")
    assert.matches("t: durable sink to " .. real .. " missed the changes of t in group 2: ", notes[1], 1, true)
  end)

  it("says nothing of an SQLite table: it is written again whole from the relation", function()
    local db = dir .. "/o.db"
    local function sq(t) t:sink(runnel.sqlite(db, "t")) end
    session(sq, { 1 })
    session(nil, { 2 })
    assert.same({}, sinks_notes(session(sq, { 3 })))
    assert.equal("1\n2\n3\n", H.sql(db, "SELECT k FROM t ORDER BY k"))
  end)

  it("says nothing of a new sink, nor of groups its relation saw before it was first declared", function()
    session(nil, { 1, 2 })
    local got = {}
    local notes = sinks_notes(session(function(t)
      t:sink(function(_, row) got[#got + 1] = row.k end, { durable = true, name = "new" })
    end, { 3 }))
    assert.same({}, notes)
    assert.same({ 3 }, got)
  end)

  it("goes to stderr without a notes function", function()
    local script = dir .. "/run.lua"
    H.write(script, ([[
local runnel = require "runnel"
local p = runnel.open(%q)
local t = p:table("t", { {"k","int"}, key = "k" })
if arg[1] == "with" then t:sink(function() end, { durable = true, name = "d" }) end
t:insert{ k = tonumber(arg[2]) }
p:close()
]]):format(dir .. "/s"))
    local run = ("%s run %s "):format(H.runnel_bin, script)
    local _, err = H.sh(run .. "with 1")
    assert.equal("", err)
    H.sh(run .. "without 2")
    _, err = H.sh(run .. "with 3")
    assert.matches("runnel: t: durable sink d missed the changes of t in group 2: ", err, 1, true)
  end)
end)
