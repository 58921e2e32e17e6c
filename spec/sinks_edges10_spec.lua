-- Sinks, stats and source-schema changes (round 10).
local runnel = require "runnel"
local H = require "helper"

-- p:stats().outbox names each durable sink the way errors and notes do: its
-- relation, then the sink as its user knows it ("t: durable sink d"), never
-- its key in the state ("sink:d", "sqlite:<path>\31<table>"). The keys of
-- 0.19 and before still find a sink's count.
describe("p:stats().outbox", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  it("names a durable Lua sink by its relation and name; its old key still reads it", function()
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:sink(function() error("down") end, { durable = true, name = "d" })
    t:insert{ k = 1 }
    t:insert{ k = 2 }
    assert.same({ ["t: durable sink d"] = 2 }, p:stats().outbox)
    assert.equal(2, p:stats().outbox["sink:d"])
    p:close()
  end)

  it("names an SQLite sink by its table and file, with no control byte", function()
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:sink(runnel.sqlite(dir .. "/out.db", "mirror"))
    t:insert{ k = 1 }
    local outbox = p:stats().outbox
    local name = next(outbox)
    assert.is_nil(next(outbox, name))
    assert.is_nil(name:find("%c"))
    local real = H.sh("realpath '" .. dir .. "/out.db'"):gsub("\n$", "")
    assert.equal('t: durable sink to table "mirror" in ' .. real, name)
    assert.equal(0, outbox[name])
    p:close()
  end)

  it("names an NDJSON sink by its file", function()
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:sink(runnel.ndjson(dir .. "/out.ndjson"))
    t:insert{ k = 1 }
    local real = H.sh("realpath '" .. dir .. "/out.ndjson'"):gsub("\n$", "")
    assert.same({ ["t: durable sink to " .. real] = 0 }, p:stats().outbox)
    p:close()
  end)

  it("counts each NDJSON sink on an open file apart, by relation and in declaration order", function()
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, key = "k" })
    local u = p:table("u", { {"k","int"}, key = "k" })
    local full = assert(io.open("/dev/full", "w"))
    t:sink(runnel.ndjson(full))
    t:sink(runnel.ndjson(full))
    u:sink(runnel.ndjson(full))
    t:insert{ k = 1 }
    t:insert{ k = 2 }
    u:insert{ k = 1 }
    local outbox = p:stats().outbox
    assert.same({ ["t: NDJSON sink on an open file"] = 2, ["t: NDJSON sink on an open file (2)"] = 2,
                  ["u: NDJSON sink on an open file"] = 1 }, outbox)
    assert.equal(5, outbox["(unnamed)"]) -- the old key: every such sink's groups
    pcall(p.close, p)
    full:close()
  end)
end)

-- A source table declared again with a column added (or dropped, renamed,
-- widened) rewrites its stored rows (core/evolve.c); the sinks downstream
-- are told what changed in the rows as the relation now reads them, as a
-- rebuilt relation tells its own (core/evolve_log.c): an UPDATE per row
-- whose values changed, old and new in the new columns, first in the next
-- group, under its seq. A drop or rename changes no value a row has now:
-- nothing to tell (an SQLite mirror follows the new columns at the sink's
-- declaration).
describe("a source table whose declaration changed its rows", function()
  after_each(H.cleanup)

  local A = { {"k","int"}, {"a","string"}, key = "k" }
  local AB = { {"k","int"}, {"a","string"}, {"b","int", default = 5}, key = "k" }

  local function seeded(dir, cols, n)
    local p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", cols)
    for k = 1, n or 2 do t:insert{ k = k, a = "x" .. k } end
    p:close()
  end

  it("tells its sinks an UPDATE per row, with the old row in the new columns, first in the next group", function()
    local dir = H.tmpdir()
    seeded(dir, A)
    local p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", AB)
    local copy, apply = H.id_applier()
    local log = H.record(t)
    t:sink(apply)
    local seqs = {}
    t:sink(function(_, _, _, info) seqs[#seqs + 1] = info.seq .. ":" .. info.n end)
    t:insert{ k = 3, a = "x3" }
    assert.same({ "UPDATE 1", "UPDATE 2", "INSERT 3" }, H.verbs(log))
    assert.same({ k = 1, a = "x1", b = 5 }, log[1][3])
    assert.same({ k = 1, a = "x1" }, log[1][4]) -- b did not exist: null
    assert.same({ "3:1", "3:2", "3:3" }, seqs)
    assert.same(H.rows_by_id(t), copy)
    H.clear(log)
    t:insert{ k = 4, a = "x4" }
    assert.same({ "INSERT 4" }, H.verbs(log)) -- told once
    p:close()
    p = runnel.open{ path = dir, notes = false }
    t = p:table("t", AB)
    log = H.record(t)
    t:insert{ k = 5, a = "x5" }
    assert.same({ "INSERT 5" }, H.verbs(log)) -- nor again after a reopen
    p:close()
  end)

  it("reaches a durable NDJSON sink and a cdc log with pre- and postimages", function()
    local dir = H.tmpdir()
    local out, cdcout = dir .. "/out.ndjson", dir .. "/cdc.ndjson"
    local p = runnel.open{ path = dir .. "/s", notes = false }
    local t = p:table("t", A)
    t:sink(runnel.ndjson(out))
    t:cdc{ preimage = true, postimage = true }:sink(runnel.ndjson(cdcout, { verb = false }))
    t:insert{ k = 1, a = "x1" }
    p:close()
    p = runnel.open{ path = dir .. "/s", notes = false }
    t = p:table("t", AB)
    t:sink(runnel.ndjson(out))
    t:cdc{ preimage = true, postimage = true }:sink(runnel.ndjson(cdcout, { verb = false }))
    t:insert{ k = 2, a = "x2" }
    p:close()
    assert.equal('{"verb":"INSERT","k":1,"a":"x1"}\n{"verb":"UPDATE","k":1,"a":"x1","b":5}\n'
                 .. '{"verb":"INSERT","k":2,"a":"x2","b":5}\n', H.read(out))
    local lines = {}
    for line in H.read(cdcout):gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.equal('{"cdc$seq":2,"cdc$batch_seq_no":0,"cdc$operation":0,"cdc$id":1,"k":1,"a":null,"b":null}', lines[4])
    assert.equal('{"cdc$seq":2,"cdc$batch_seq_no":2,"cdc$operation":1,"cdc$id":1,"k":1,"a":null,"b":5}', lines[6])
    assert.equal('{"cdc$seq":2,"cdc$batch_seq_no":4,"cdc$operation":9,"cdc$id":1,"k":1,"a":"x1","b":5}', lines[8])
  end)

  it("reaches a filter's sinks, and not the stateful relations built over the new rows", function()
    local dir = H.tmpdir()
    seeded(dir, A, 3)
    local p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", AB)
    local f = t:filter(function(r) return r.k ~= 2 end)
    local g = t:aggregate{ by = "b", n = runnel.count() } -- built from the rows as they are now
    local flog, glog = H.record(f), H.record(g)
    t:insert{ k = 4, a = "x4" }
    assert.same({ "UPDATE 1", "UPDATE 3", "INSERT 4" }, H.verbs(flog))
    assert.same({ k = 1, a = "x1", b = 5 }, flog[1][3])
    assert.same({ k = 1, a = "x1" }, flog[1][4])
    assert.same({ "UPDATE 1" }, H.verbs(glog))
    assert.same({ b = 5, n = 4 }, glog[1][3]) -- each row counted once
    p:close()
  end)

  it("keeps them for the first group after a close and reopen", function()
    local dir = H.tmpdir()
    seeded(dir, A)
    local p = runnel.open{ path = dir, notes = false }
    p:table("t", AB) -- declared, rows rewritten, no group
    p:close()
    p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", AB)
    local log = H.record(t)
    t:insert{ k = 3, a = "x3" }
    assert.same({ "UPDATE 1", "UPDATE 2", "INSERT 3" }, H.verbs(log))
    p:close()
  end)

  it("tells every row of a table rewritten in several batches, once each, in id order", function()
    local dir = H.tmpdir()
    local n = 2500 -- the rewrite reads 1024 rows at a time (evolve.c, rewrite_db)
    local p = runnel.open{ path = dir, notes = false, sync = false }
    local t = p:table("t", A)
    p:batch(function() for k = n, 1, -1 do t:insert{ k = k, a = "x" } end end) -- ids in reverse key order
    p:close()
    p = runnel.open{ path = dir, notes = false }
    t = p:table("t", AB)
    local copy, apply = H.id_applier()
    local ids, seqs = {}, {}
    t:sink(function(verb, row, old, info)
      ids[#ids + 1] = info.id
      seqs[info.seq] = true
      assert(verb == "UPDATE" and row.b == 5 and old.b == nil and row.k == old.k)
    end)
    t:sink(apply)
    p:batch(function() end) -- a group with no change of its own tells them
    assert.equal(n, #ids)
    for i = 1, n do assert.equal(i, ids[i]) end
    assert.same({ [2] = true }, seqs)
    for id, row in pairs(H.rows_by_id(t)) do assert.same(row, copy[id]) end
    p:close()
  end)

  it("tells them once with sync = false, the group carried and flushed at close", function()
    local dir = H.tmpdir()
    seeded(dir, A)
    local p = runnel.open{ path = dir, notes = false, sync = false }
    local t = p:table("t", AB)
    local log = H.record(t)
    local got = {}
    t:sink(function(verb, _, _, info) got[#got + 1] = verb .. " " .. info.id end, { durable = true, name = "d" })
    t:insert{ k = 3, a = "x3" }
    t:insert{ k = 4, a = "x4" }
    p:close()
    assert.same({ "UPDATE 1", "UPDATE 2", "INSERT 3", "INSERT 4" }, H.verbs(log))
    assert.same({ "UPDATE 1", "UPDATE 2", "INSERT 3", "INSERT 4" }, got)
    p = runnel.open{ path = dir, notes = false }
    t = p:table("t", AB)
    log = H.record(t)
    t:insert{ k = 5, a = "x5" }
    assert.same({ "INSERT 5" }, H.verbs(log))
    p:close()
  end)

  it("nets them with the group's own changes for a consolidating sink", function()
    local dir = H.tmpdir()
    seeded(dir, A)
    local p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", AB)
    local log = H.record(t, true)
    p:batch(function()
      t:update{ k = 1, b = 7 }
      t:delete{ k = 2 }
    end)
    assert.same({ "UPDATE 1", "DELETE 2" }, H.verbs(log))
    assert.same({ { k = 1, a = "x1", b = 7 }, { k = 1, a = "x1" } }, { log[1][3], log[1][4] })
    assert.same({ k = 2, a = "x2" }, log[2][4]) -- the row before the group, as its sinks had it
    p:close()
  end)

  it("of a keyless table too", function()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir, notes = false }
    p:table("t", { {"a","string"} }):insert{ a = "x" }
    p:close()
    p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", { {"a","string"}, {"b","int", default = 5} })
    local log = H.record(t)
    t:insert{ a = "y" }
    assert.same({ "UPDATE 1", "INSERT 2" }, H.verbs(log))
    assert.same({ a = "x", b = 5 }, log[1][3])
    assert.same({ a = "x" }, log[1][4])
    p:close()
  end)

  it("tells a second declaration before any group as one change from the rows the sinks were told", function()
    local dir = H.tmpdir()
    seeded(dir, A, 1)
    local p = runnel.open{ path = dir, notes = false }
    p:table("t", AB)
    p:close()
    p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", { {"k","int"}, {"a2","string", was = "a"}, {"b","float", default = 5},
                             {"c","string", default = "c"}, key = "k" })
    local log = H.record(t)
    t:insert{ k = 2, a2 = "x2" }
    assert.same({ "UPDATE 1", "INSERT 2" }, H.verbs(log))
    assert.same({ k = 1, a2 = "x1", b = 5.0, c = "c" }, log[1][3])
    assert.same({ k = 1, a2 = "x1" }, log[1][4])
    p:close()
  end)

  it("tells nothing for a drop, a rename or a nullable column without default", function()
    local dir = H.tmpdir()
    seeded(dir, AB)
    local p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", { {"k","int"}, {"a2","string", was = "a"}, {"z","int", null = true}, key = "k" })
    local log = H.record(t)
    t:insert{ k = 3, a2 = "x3" }
    assert.same({ "INSERT 3" }, H.verbs(log))
    p:close()
  end)

  it("leaves nothing to tell when the declaring group rolls back", function()
    local dir = H.tmpdir()
    seeded(dir, A)
    local p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", AB)
    local log = H.record(t)
    assert.has_error(function() p:batch(function() t:insert{ k = 3, a = "x3" }; error("no") end) end)
    assert.same({}, H.verbs(log)) -- the sink was told to forget
    t:insert{ k = 3, a = "x3" }
    assert.same({ "UPDATE 1", "UPDATE 2", "INSERT 3" }, H.verbs(log))
    p:close()
  end)
end)
