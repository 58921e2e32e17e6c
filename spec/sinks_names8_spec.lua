-- A durable sink is named in what the user reads (refusals, errors, notes)
-- as its user knows it — "durable sink d", "durable sink to /path", … (the
-- label given to rn_outbox_sink_add) — never by its key in the state
-- ("sink:d", "ndjson:/path", "sqlite:/path\31table"; core/outbox.c).
-- p:stats().outbox too, since 0.21 (it kept the keys before; they still read).
local runnel = require "runnel"
local H = require "helper"

describe("durable sinks named as their user knows them", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  -- A session whose durable sink "d" on t refuses every group: they wait.
  local function leave_waiting(cols, fill, groups)
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", cols)
    p:table("u", { {"x","string"}, {"y","int"}, key = "x" })
    t:sink(function() error("down") end, { durable = true, name = "d" })
    fill(t)
    assert.same({ ["t: durable sink d"] = groups or 1 }, p:stats().outbox) -- its relation and label (0.21)
    p:close()
  end

  it("in the refusal of a sink its waiting groups were recorded for another relation", function()
    leave_waiting({ {"k","int"}, {"a","string"}, key = "k" }, function(t) t:insert{ k = 1, a = "A" } end)
    local p = runnel.open(dir .. "/s")
    p:table("t", { {"k","int"}, {"a","string"}, key = "k" })
    local u = p:table("u", { {"x","string"}, {"y","int"}, key = "x" })
    local err = H.error_of(u.sink, u, function() end, { durable = true, name = "d" })
    assert.matches("u: durable sink d: group 1 waits for it, recorded for another relation", err, 1, true)
    assert.is_nil(err:find("sink:d", 1, true))
    p:close()
  end)

  it("in the refusal of a sink whose waiting rows hold null in a column now not null", function()
    leave_waiting({ {"k","int"}, {"a","string", null = true}, key = "k" }, function(t)
      t:insert{ k = 1 }          -- group 1: a is null
      t:update{ k = 1, a = "x" } -- group 2: the table holds no null any more
    end, 2)
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, {"a","string"}, key = "k" })
    local err = H.error_of(t.sink, t, function() end, { durable = true, name = "d" })
    assert.matches('t: durable sink d: group 1 waits for it with null in column "a", now not null', err, 1, true)
    assert.is_nil(err:find("sink:d", 1, true))
    p:close()
  end)

  it("in the refusal of a name already declared: a Lua sink, an NDJSON file, an SQLite table", function()
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:sink(function() end, { durable = true, name = "x" })
    local err = H.error_of(t.sink, t, { durable = true, name = "x", insert = function() end })
    assert.matches("t: durable sink x is already declared", err, 1, true)
    assert.is_nil(err:find("sink:x", 1, true))

    local log = dir .. "/out.ndjson"
    t:sink(runnel.ndjson(log))
    local real = H.sh("realpath " .. log):gsub("\n$", "")
    err = H.error_of(t.sink, t, runnel.ndjson(log))
    assert.matches("t: durable sink to " .. real .. " is already declared", err, 1, true)
    assert.is_nil(err:find("ndjson:", 1, true))

    local db = dir .. "/o.db"
    t:sink(runnel.sqlite(db, "log"))
    real = H.sh("realpath " .. db):gsub("\n$", "")
    err = H.error_of(t.sink, t, runnel.sqlite(db, "log"))
    assert.matches('t: durable sink to table "log" in ' .. real .. " is already declared", err, 1, true)
    assert.is_nil(err:find("\31", 1, true))
    assert.is_nil(err:find("sqlite:", 1, true))
    p:close()
  end)
end)
