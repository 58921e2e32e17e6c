-- A relation whose function or declaration changed between runs has the
-- stateful relations that read it, directly or through others, rebuilt
-- from their inputs; state that does not read it is kept as it is (not
-- recomputed). A stateful relation that depends on the change but reads a
-- stream cannot be replayed: it is kept, and the notes say so.
local runnel = require "runnel"
local H = require "helper"

local open = H.open_noting

local T = { {"k","int"}, {"v","int"}, {"g","int"}, key = "k" }

-- A runnel.agg sum whose add counts its calls in calls (a table: its
-- contents are not part of the function's fingerprint).
local function counted_sum(calls, col)
  return runnel.agg{ init = function() return 0 end,
                     add = function(s, r) calls.n = calls.n + 1; return s + r[col] end,
                     remove = function(s, r) return s - r[col] end }
end

describe("a changed function upstream of an aggregate over a stream", function()
  after_each(H.cleanup)

  local function streamed(dir, fn)
    local p, lines = open(dir)
    local s = p:stream("s", { {"g","int"}, {"v","int"} })
    local m = s:map(fn, { {"g","int"}, {"w","int"} }, "m")
    local a = m:aggregate{ by = "g", n = runnel.count(), total = runnel.sum("w"), name = "a" }
    return p, s, a, lines
  end

  it("keeps the aggregate and says it was kept, not rebuilt, and why", function()
    local dir = H.tmpdir()
    local p, s, a = streamed(dir, function(r) return { g = r.g, w = r.v } end)
    p:batch(function() for i = 1, 3 do s:insert{ g = 1, v = i } end end)
    p:close()
    local lines
    p, s, a, lines = streamed(dir, function(r) return { g = r.g, w = 10 * r.v } end)
    assert.same({ g = 1, n = 3, total = 6 }, a:get{ g = 1 }) -- the old events are gone: kept as it was
    assert.same({ "m: its function changed",
                  'a: kept, not rebuilt: "m" changed, but a rebuild would replay the stream "s", whose events are '
                  .. 'not kept; it holds what it counted before (p:drop("a") or runnel drop ' .. dir
                  .. ' a starts it empty)' }, lines)
    s:insert{ g = 1, v = 4 } -- new events go through the new function
    assert.same({ g = 1, n = 4, total = 46 }, a:get{ g = 1 })
    p:close()
  end)

  it("says nothing is rebuilt when nothing reads the changed function's rows", function()
    local dir = H.tmpdir()
    local p = open(dir)
    p:table("t", T):filter(function(r) return r.k > 1 end, "f")
    p:close()
    local lines
    p, lines = open(dir)
    p:table("t", T):filter(function(r) return r.k > 2 end, "f")
    assert.same({ "f: its function changed" }, lines)
    p:close()
  end)
end)

describe("a rebuild after a change", function()
  after_each(H.cleanup)

  -- t -> filter f -> aggregate a -> top best;  u -> aggregate b (after f, not over it);
  -- u join a (a on the right) -> ua
  local function declared(dir, keep, calls)
    local p, lines = open(dir)
    local t = p:table("t", T)
    local u = p:table("u", { {"id","int"}, {"g","int"}, {"x","int"}, key = "id" })
    local a = t:filter(keep, "f"):aggregate{ by = "g", n = runnel.count(), total = runnel.sum("v"), name = "a" }
    local best = a:top{ n = 1, order = { {"total","desc"} }, name = "best" }
    local b = u:aggregate{ by = "g", x = counted_sum(calls, "x"), name = "b" }
    local ua = u:join(a, { on = "g", name = "ua" })
    return p, { t = t, u = u, a = a, best = best, b = b, ua = ua }, lines
  end

  it("rebuilds the relations that read the changed one, and only them", function()
    local dir = H.tmpdir()
    local calls = { n = 0 }
    local p, r = declared(dir, function(row) return row.k > 0 end, calls)
    p:batch(function()
      for k = 1, 6 do r.t:insert{ k = k, v = k, g = k % 2 } end -- g 0: 2+4+6 = 12, g 1: 1+3+5 = 9
      for id = 1, 4 do r.u:insert{ id = id, g = id % 2, x = id } end
    end)
    assert.equal(4, calls.n)
    assert.same({ g = 0, n = 3, total = 12, rank = 1 }, (r.best:rows()()))
    p:close()

    calls.n = 0
    local lines
    p, r, lines = declared(dir, function(row) return row.k % 2 == 1 or row.k == 2 end, calls) -- g 0: 2, g 1: 9
    assert.equal(0, calls.n) -- b reads u only: kept, not recomputed
    assert.same({ "f: its function changed", 'a: rebuilt from its inputs ("f" changed)',
                  'best: rebuilt from its inputs ("f" changed)', 'ua: rebuilt from its inputs ("f" changed)' }, lines)
    assert.same({ g = 0, n = 1, total = 2 }, r.a:get{ g = 0 })
    assert.same({ g = 1, n = 3, total = 9 }, r.a:get{ g = 1 })
    assert.same({ g = 1, n = 3, total = 9, rank = 1 }, (r.best:rows()()))
    assert.equal(2, r.ua:get{ id = 2 }.total)
    assert.equal(9, r.ua:get{ id = 3 }.total)
    assert.same({ g = 0, x = 6 }, r.b:get{ g = 0 })
    r.u:insert{ id = 5, g = 1, x = 5 }
    assert.equal(1, calls.n)
    assert.same({ g = 1, x = 9 }, r.b:get{ g = 1 })
    p:close()
  end)
end)

describe("a mirror of a relation rebuilt or recomputed after a change", function()
  after_each(H.cleanup)

  -- t -> filter f -> aggregate a (mirrored into SQLite and a store); f itself stored too
  local function mirrored(dir, limit)
    local p, lines = open(dir)
    local t = p:table("t", T)
    local f = t:filter(function(r) return r.k > limit end, "f")
    local a = f:aggregate{ by = "g", total = runnel.sum("v"), name = "a" }
    a:sink(runnel.sqlite(dir .. "/mirror.db", "a"))
    a:sink(runnel.store("a_store"))
    f:sink(runnel.store("f_store"))
    return p, t, a, lines
  end

  local function store_rows(dir, name, col)
    local out = {}
    for row in runnel.attach(dir, name):rows() do out[#out + 1] = row.g .. "=" .. row[col] end
    table.sort(out)
    return table.concat(out, " ")
  end

  it("is written again from the relation's new rows", function()
    local dir = H.tmpdir()
    local p, t = mirrored(dir, 0)
    p:batch(function() for k = 1, 4 do t:insert{ k = k, v = k, g = k % 2 } end end)
    p:close()
    assert.equal("0|6\n1|4\n", H.sql(dir .. "/mirror.db", "SELECT g, total FROM a ORDER BY g"))
    local a
    p, t, a = mirrored(dir, 2) -- rows 3 and 4 pass now
    assert.same({ g = 0, total = 4 }, a:get{ g = 0 })
    assert.equal("0=4 1=3", store_rows(dir, "a_store", "total"))
    assert.equal("0=4 1=3", store_rows(dir, "f_store", "v"))
    p:close()
    assert.equal("0|4\n1|3\n", H.sql(dir .. "/mirror.db", "SELECT g, total FROM a ORDER BY g"))
    p, t, a = mirrored(dir, 2) -- and a third run, with no change, rewrites nothing: later groups go on
    t:insert{ k = 5, v = 5, g = 1 }
    p:close()
    assert.equal("0|4\n1|8\n", H.sql(dir .. "/mirror.db", "SELECT g, total FROM a ORDER BY g"))
    assert.equal("0=4 1=8", store_rows(dir, "a_store", "total"))
  end)
end)

describe("a relation dropped and declared again", function()
  after_each(H.cleanup)

  local function declared(dir)
    local p, lines = open(dir)
    local t = p:table("t", T)
    local a = t:aggregate{ by = "g", n = runnel.count(), name = "a" }
    return p, t, a, lines
  end

  it("has what was built over it rebuilt: the aggregate over a dropped table counts nothing", function()
    local dir = H.tmpdir()
    local p, t, a = declared(dir)
    p:batch(function() for k = 1, 3 do t:insert{ k = k, v = k, g = 1 } end end)
    assert.same({ g = 1, n = 3 }, a:get{ g = 1 })
    p:close()
    local lines
    p = open(dir)
    p:drop("t") -- its rows go; a, not declared yet, still holds its groups
    p:close()
    p, t, a, lines = declared(dir)
    assert.is_nil(a:get{ g = 1 })
    assert.same({ 'a: rebuilt from its inputs ("t" changed)' }, lines)
    t:insert{ k = 1, v = 1, g = 1 }
    assert.same({ g = 1, n = 1 }, a:get{ g = 1 })
    p:close()
  end)

  it("has it rebuilt after runnel drop too", function()
    local dir = H.tmpdir()
    local p, t, a = declared(dir)
    p:batch(function() for k = 1, 3 do t:insert{ k = k, v = k, g = 1 } end end)
    p:close()
    local _, err, code = H.sh(H.runnel_bin .. " drop " .. dir .. " t")
    assert.equal(0, code, err)
    p, t, a = declared(dir)
    assert.equal(0, a:count())
    p:close()
  end)
end)

describe("a crash after a table's rewrite, before what reads it is declared", function()
  after_each(H.cleanup)

  local V1 = { {"k","int"}, {"g","int"}, key = "k" }
  local V2 = { {"k","int"}, {"g","int"}, {"x","int", default = 5}, key = "k" }

  local function declared(p, cols)
    local t = p:table("t", cols)
    local m = t:map(function(r) return { k = r.k, g = r.g, w = r.x or 1 } end,
                    { {"k","int"}, {"g","int"}, {"w","int"}, key = "k" }, "m")
    return t, m:aggregate{ by = "g", s = runnel.sum("w"), name = "a" }
  end

  it("has it rebuilt at the next open: the mark names the table", function()
    local dir = H.tmpdir()
    local p = open(dir)
    local t, a = declared(p, V1)
    p:batch(function() for k = 1, 3 do t:insert{ k = k, g = 1 } end end)
    assert.same({ g = 1, s = 3 }, a:get{ g = 1 })
    p:close()
    local script = dir .. "/v2.lua"
    H.write(script, ([[
      local runnel = require "runnel"
      local p = runnel.open{ path = %q, notes = false }
      p:table("t", { {"k","int"}, {"g","int"}, {"x","int", default = 5}, key = "k" })
      os.exit(9) -- before m and a are declared
    ]]):format(dir))
    local _, _, code = H.sh(H.runnel_bin .. " run " .. script)
    assert.equal(9, code)
    local lines
    p, lines = open(dir)
    t, a = declared(p, V2)
    assert.same({ g = 1, s = 15 }, a:get{ g = 1 })
    -- m is keyed: it keeps its keys (MAPKEY), so it is rebuilt too
    assert.same({ 'm: rebuilt from its inputs ("t" changed)', 'a: rebuilt from its inputs ("t" changed)' }, lines)
    p:close()
  end)
end)

describe("an aggregate over a map of a stream declared again otherwise", function()
  after_each(H.cleanup)

  it("is refused naming the map and the stream it reads", function()
    local dir = H.tmpdir()
    local function declare(p, extra)
      local s = p:stream("s", { {"g","int"}, {"v","int"} })
      local m = s:map(function(r) return r end, { {"g","int"}, {"v","int"} }, "m")
      local spec = { by = "g", n = runnel.count(), name = "a" }
      if extra then spec.total = runnel.sum("v") end
      return m:aggregate(spec)
    end
    local p = open(dir)
    declare(p, false)
    p:close()
    p = open(dir)
    local err = H.error_of(declare, p, true)
    assert.equal(('relation "a": its declaration changed, and an aggregate over "m", which reads the stream "s", '
                  .. 'cannot be rebuilt (the stream\'s events are not kept): drop it to start it empty (p:drop("a") '
                  .. 'or runnel drop %s a), or keep its old declaration'):format(dir), err)
    p:close()
  end)
end)
