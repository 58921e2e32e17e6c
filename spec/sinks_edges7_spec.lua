-- The note a durable sink gets when declared again after groups committed
-- without it (OUTBOX-5 in core/outbox.c): it names the sink as its user
-- knows it and the relation it reads, and says only what it missed of that
-- relation ("ch:" records, core/store.h; rn_state_changed, relation.c).
local runnel = require "runnel"
local H = require "helper"

describe("the note of the groups a durable sink missed", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  local cols = { {"k","int"}, {"g","int"}, key = "k" }

  -- One session: t and u declared, `decl(p, t)` declares sinks (or nothing),
  -- then `ks` inserted into t and `us` into u, one group each.
  local function session(decl, ks, us)
    local p, notes = H.open_noting(dir .. "/s")
    local t = p:table("t", cols)
    local u = p:table("u", cols)
    if decl then decl(p, t) end
    for _, k in ipairs(ks or {}) do t:insert{ k = k, g = 1 } end
    for _, k in ipairs(us or {}) do u:insert{ k = k, g = 1 } end
    p:close()
    local out = {}
    for _, l in ipairs(notes) do
      if l:find(" missed ", 1, true) then out[#out + 1] = l end
    end
    return out
  end

  local got
  local function lua_sink(_, t)
    t:sink(function(v, row, _, info) got[#got + 1] = info.seq .. ":" .. v .. ":" .. row.k end,
           { durable = true, name = "d" })
  end
  before_each(function() got = {} end)

  it("says nothing when the groups it missed changed only other relations", function()
    session(lua_sink, { 1 })
    session(nil, {}, { 1, 2 })            -- groups 2 and 3 change u, not t
    -- before: "t: durable sink sink:d missed groups 2 to 3: …" though t never changed
    assert.same({}, session(lua_sink, { 2 }))
    assert.same({ "1:INSERT:1", "4:INSERT:2" }, got)
  end)

  it("names the sink by the name it was given and the relation it reads, up to the last group that changed it", function()
    session(lua_sink, { 1 })
    session(nil, { 2 }, { 1, 2 })         -- group 2 changes t; 3 and 4 only u
    assert.same({ "t: durable sink d missed the changes of t in group 2: they were committed while it was not "
                  .. "declared, and the outbox keeps a group only for the durable sinks declared when it commits; "
                  .. "it goes on from group 5" }, session(lua_sink, {}))
  end)

  it("says nothing of a stateful relation rebuilt over the groups it missed: the rebuild tells it", function()
    local function agg_sink(_, t)
      t:aggregate{ by = "g", n = runnel.count() }:sink(function(v, row, _, info)
        got[#got + 1] = info.seq .. ":" .. v .. ":" .. row.n
      end, { durable = true, name = "a" })
    end
    session(agg_sink, { 1 })
    session(nil, { 2, 3 })                -- the aggregate is not declared: not computed
    assert.same({}, session(agg_sink, { 4 }))
    assert.same({ "1:INSERT:1", "4:UPDATE:3", "4:UPDATE:4" }, got)
  end)

  it("counts the changes of a filter's input: the filter would have passed them on", function()
    local function filtered(_, t)
      t:filter(function(row) return row.k > 0 end, "pos"):sink(function(v, row, _, info)
        got[#got + 1] = info.seq .. ":" .. v .. ":" .. row.k
      end, { durable = true, name = "f" })
    end
    session(filtered, { 1 })
    session(nil, { 2 }, { 1 })            -- group 2 changes t, which the filter reads
    local notes = session(filtered, {})
    assert.equal(1, #notes)
    assert.matches("pos: durable sink f missed the changes of pos in group 2: ", notes[1], 1, true)
  end)

  it("names an SQLite table and its file, not the sink's key in the state", function()
    local db = dir .. "/o.db"
    local function sq(p)
      local e = p:stream("e", { {"k","int"} })
      e:sink(runnel.sqlite(db, "log"))
      return e
    end
    local p = H.open_noting(dir .. "/s")
    sq(p):insert{ k = 1 }
    p:close()
    p = H.open_noting(dir .. "/s")
    p:stream("e", { {"k","int"} }):insert{ k = 2 } -- group 2 without the sink
    p:close()
    local notes
    p, notes = H.open_noting(dir .. "/s")
    sq(p)
    p:close()
    local real = H.sh("realpath " .. db):gsub("\n$", "")
    -- before: "e: durable sink sqlite:<path>\31log missed groups 2 to 2: …"
    assert.equal(1, #notes)
    assert.matches('e: durable sink to table "log" in ' .. real .. " missed the changes of e in group 2: ", notes[1], 1, true)
    assert.is_nil(notes[1]:find("\31", 1, true))
  end)
end)
