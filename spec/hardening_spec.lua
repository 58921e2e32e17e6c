-- Hardening of the Lua binding (issue 10, defects 1, 3, 4, 8, 13, 14, 15,
-- 16): inputs and call sequences that crashed, stored a wrong value or
-- pointed at the wrong line.
local runnel = require "runnel"
local H = require "helper"

-- This file's name as error positions give it ("spec/hardening_spec.lua").
local HERE = debug.getinfo(1, "S").short_src

describe("a join declared over a table that already has rows (defect 1)", function()
  local p, t, u
  before_each(function()
    p = runnel.open()
    t = p:table("t", { {"id","int"}, {"n","int", null = true}, key = "id" })
    u = p:table("u", { {"uid","int"}, {"name","string", null = true}, key = "uid" })
    u:insert{ uid = 1, name = "one" }
    t:insert{ id = 1, n = 1 }
    t:insert{ id = 2 }
  end)
  after_each(function() p:close() end)

  it("runs a Lua mapper over the existing rows", function()
    local j = t:join(u, { mapper = function(r) return r.n end, kind = "left" })
    assert.same({ id = 1, n = 1, uid = 1, name = "one" }, j:get(1))
    assert.same({ id = 2 }, j:get(2))
  end)

  it("runs a Lua joiner over the existing rows", function()
    local j = t:join(u, { on = "n", kind = "left", columns = { {"id","int"}, {"what","string"}, key = "id" },
                          joiner = function(l, r) return { id = l.id, what = r and r.name or "none" } end })
    assert.same({ id = 1, what = "one" }, j:get(1))
    assert.same({ id = 2, what = "none" }, j:get(2))
  end)

  it("names the join when the mapper raises while the join is built", function()
    local err = H.error_of(t.join, t, u, { mapper = function() error("no key", 0) end, name = "j" })
    assert.equal("j: mapper: no key", err)
    assert.is_nil(p:relation("j"))
    t:insert{ id = 3 } -- the pipeline keeps working
    assert.equal(3, t:count())
  end)
end)

describe("relations of different pipelines (defect 3)", function()
  local p1, p2
  before_each(function() p1, p2 = runnel.open(), runnel.open() end)
  after_each(function() p1:close(); p2:close() end)

  it("cannot be joined: the declaration is refused naming both", function()
    local t = p1:table("t", { {"id","int"}, {"u","int", null = true}, key = "id" })
    local s = p1:stream("s", { {"u","int"} })
    local u = p2:table("u", { {"uid","int"}, key = "uid" })
    local l = p2:lookup("l", { {"uid","int"}, key = "uid", source = function() return nil end })
    assert.equal("t.join: t and u belong to different pipelines", H.error_of(t.join, t, u, { on = "u" }))
    assert.equal("s.join: s and u belong to different pipelines", H.error_of(s.join, s, u, { on = "u" }))
    assert.equal("s.join: s and l belong to different pipelines", H.error_of(s.join, s, l, { on = "u" }))
    assert.equal("t.join: t and u belong to different pipelines",
                 H.error_of(t.join, t, u, { mapper = function(r) return r.u end }))
    assert.equal(2, #p1:relations())
    p2:close() -- the other pipeline's end cannot reach p1
    t:insert{ id = 1, u = 1 }
    s:insert{ u = 1 }
    assert.equal(1, t:count())
  end)

  it("cannot be used by another pipeline's declarations or sinks", function()
    local u = p2:table("u", { {"uid","int"}, key = "uid" })
    local function refused(fn, ...)
      local ok, err = pcall(fn, ...)
      assert.is_false(ok)
      assert.matches("u belongs to a different pipeline", err, 1, true)
    end
    refused(p1._filter, p1, u, "f", function() return true end)
    refused(p1._map, p1, u, "m", function(r) return r end, { { name = "uid", type = "int" } })
    refused(p1._cdc, p1, u, "c", 0, false, "log")
    refused(p1._select, p1, u, "s", { "uid" }, { "uid" })
    refused(p1._sink, p1, u, function() end)
    refused(p1._store_sink, p1, u, "st")
    refused(p1._aggregate, p1, u, "a", {}, nil, { { name = "n", kind = "count" } })
    assert.equal(0, #p1:relations())
    u:insert{ uid = 1 }
    assert.equal(1, u:count())
  end)
end)

describe("what a user function returned (defect 4)", function()
  local p, t, v
  local function raising() return setmetatable({}, { __index = function() error("index boom", 0) end }) end
  before_each(function()
    p = runnel.open()
    t = p:table("t", { {"id","int"}, {"a","int", null = true}, key = "id" })
    v = p:table("v", { {"a","int"}, {"b","int"}, {"x","string", null = true}, key = { "a", "b" } })
    t:insert{ id = 1, a = 1 }
  end)
  after_each(function() p:close() end)

  it("is read under protection: a raising __index rolls the group back as `mapper: …`", function()
    local j = t:join(v, { mapper = function(r) if r.id == 3 then return raising() end return { r.a, 2 } end,
                          kind = "left" })
    p:begin()
    t:insert{ id = 2, a = 5 }
    local ok, err = pcall(t.insert, t, { id = 3, a = 6 })
    assert.is_false(ok)
    assert.matches("t.join: mapper: index boom", err, 1, true)
    assert.is_false(p:in_group())
    assert.is_nil(t:get(2))
    assert.is_nil(t:get(3))
    assert.equal(1, j:count())
    t:insert{ id = 4, a = 1 } -- and the pipeline keeps working
    assert.equal(2, j:count())
    assert.equal(2, p:seq())
  end)

  it("rolls the group back when a map, joiner, selector or lookup source returns something unusable", function()
    local function check(decl_fn, what)
      local q = runnel.open()
      local s = q:table("s", { {"id","int"}, {"a","int", null = true}, key = "id" })
      local seen = decl_fn(q, s)
      local ok, err = pcall(s.insert, s, { id = 1, a = 1 })
      assert.is_false(ok, what)
      assert.matches(what, err, 1, true)
      assert.is_false(q:in_group())
      assert.equal(0, s:count())
      assert.equal(0, q:seq())
      q:close()
      return seen
    end
    local proxy = setmetatable({}, { __pairs = function() error("pairs boom") end,
                                     __len = function() error("len boom") end,
                                     __index = function() error("index boom") end })
    check(function(q, s) s:map(function() return proxy end, { {"id","int"}, key = "id" }) end, "map returned a bad row")
    check(function(q, s)
      local w = q:table("w", { {"a","int"}, key = "a" })
      s:join(w, { on = "a", kind = "left", columns = { {"id","int"}, key = "id" }, joiner = function() return proxy end })
    end, "joiner returned a bad row")
    check(function(q, s)
      local w = q:table("w", { {"a","int"}, key = "a" })
      s:join(w, { on = "a", kind = "left", selector = function() return proxy end })
    end, "returned no key: an empty table")
    check(function(q, s)
      local l = q:lookup("l", { {"a","int"}, {"z","int", null = true}, key = "a",
                                source = function() return { z = proxy } end })
      s:join(l, { on = "a", kind = "left" })
    end, "source returned a bad row")
  end)
end)

describe("a Lua table given to a list column (defect 8)", function()
  local p, t
  before_each(function()
    p = runnel.open()
    t = p:table("t", { {"id","int"}, {"l","list", null = true},
                       {"s", { {"inner","list", null = true}, {"m","map", null = true} }, null = true }, key = "id" })
  end)
  after_each(function() p:close() end)

  it("is refused when it has keys that are not a sequence", function()
    for i, bad in ipairs{ { a = 1 }, { 1, 2, x = 3 }, { [1] = 1, [3] = 3 }, { [2] = 1 }, { [1.5] = 1 } } do
      assert.equal('t: column "l": expected list, got a table with non-sequence keys',
                   H.error_of(t.insert, t, { id = i, l = bad }))
    end
    assert.equal(0, t:count())
    assert.equal(0, p:seq())
  end)

  it("is refused inside a struct too, naming the field", function()
    assert.equal('t: column "inner": expected list, got a table with non-sequence keys',
                 H.error_of(t.insert, t, { id = 1, s = { inner = { 1, x = 2 } } }))
  end)

  it("keeps a sequence, an empty table and nulls in place", function()
    t:insert{ id = 1, l = {} }
    t:insert{ id = 2, l = { 1, runnel.null, "x" } }
    t:insert{ id = 3, s = { inner = { 4, 5 }, m = { a = 1 } } }
    assert.same({}, t:get(1).l)
    assert.same({ 1, runnel.null, "x" }, t:get(2).l)
    assert.same({ inner = { 4, 5 }, m = { a = 1 } }, t:get(3).s)
  end)
end)

describe("a lookup's kind (defect 13)", function()
  it("is named by tostring and schema", function()
    local p = runnel.open()
    local l = p:lookup("l", { {"k","int"}, key = "k", source = function() return nil end })
    assert.equal("runnel.Relation l (lookup)", tostring(l))
    assert.equal("lookup", l:schema().kind)
    p:close()
  end)
end)

describe("a clock that fails (defect 14)", function()
  local function pipeline(clock)
    local p = runnel.open{ clock = clock }
    local o = p:stream("o", { {"k","int"} })
    local l = p:lookup("prices", { {"k","int"}, {"v","int", null = true}, key = "k",
                                   source = function(k) return { v = k * 10 } end, cache = { ttl = 10 } })
    local j = o:join(l, { on = "k", kind = "left" })
    return p, o, H.record(j)
  end

  it("fails the change that asked the time, with the clock's error", function()
    local broken = false
    local p, o, log = pipeline(function() if broken then error("clock broke", 0) end return 5 end)
    o:insert{ k = 1 }
    broken = true
    p:begin()
    local err = H.error_of(o.insert, o, { k = 2 })
    assert.equal("prices: clock: clock broke", err)
    assert.is_false(p:in_group())
    assert.equal(1, #log)
    assert.equal(1, p:seq())
    broken = false
    o:insert{ k = 2 }
    assert.equal(2, #log)
    p:close()
  end)

  it("fails it when the clock returns no number", function()
    local p, o = pipeline(function() return "soon" end)
    assert.equal("prices: clock: returned string, expected a number of seconds", H.error_of(o.insert, o, { k = 1 }))
    assert.equal(0, p:seq())
    p:close()
  end)
end)

describe("errors a user causes (defect 15)", function()
  local p, t
  before_each(function()
    p = runnel.open()
    t = p:table("t", { {"id","int"}, key = "id" })
  end)
  after_each(function() p:close() end)

  -- fn is a one-line function calling runnel: its error names that line.
  local function at_caller(fn)
    local ok, err = pcall(fn)
    assert.is_false(ok)
    assert.equal(HERE .. ":" .. debug.getinfo(fn, "S").linedefined .. ":", err:match("^[^:]*:%d+:"))
    assert.not_matches("runnel%.lua", err)
    return err
  end

  it("point at the caller's line, never at runnel.lua", function()
    at_caller(function() t:get{ nope = 1 } end)
    at_caller(function() t:get("x") end)
    at_caller(function() t:id_of("x") end)
    at_caller(function() t:get({}) end)
    at_caller(function() t:insert{ id = "x" } end)
    at_caller(function() t:join(t, { on = "nope" }) end)
    at_caller(function() p:table("t", { {"id","int"} }) end)
    at_caller(function() p:commit() end)
    at_caller(function() p:run(runnel.ndjson_source("/nonexistent/in.ndjson")) end)
    at_caller(function() p:batch("x") end)
    local f = p:stream("s", { {"x","int"} }):filter(function() return true end)
    at_caller(function() f:get(1) end)
    at_caller(function() t.rows(nil) end)
    at_caller(function() runnel.sum() end)
    p:begin()
    at_caller(function() runnel.watch(t) end) -- a DSL function calling another (rel:sink)
    p:rollback()
  end)

  it("point at the caller's line after close", function()
    local f = t:filter(function() return true end)
    p:close()
    for _, call in ipairs{
      function() t:get(1) end, function() t:count() end, function() f:count() end,
      function() f:get(1) end, function() t:rows() end, function() t:insert{ id = 1 } end,
      function() t:filter(function() end) end, function() t:schema() end,
      function() p:relation("t") end, function() p:begin() end, function() p:seq() end,
      function() p:batch(function() end) end, function() p:stats() end,
      function() runnel.show(t) end,
    } do
      assert.matches("closed", at_caller(call))
    end
  end)
end)

describe("names with a NUL byte (defect 16)", function()
  it("are refused for every name, as for columns", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, key = "id" })
    local cols = { {"id","int"}, key = "id" }
    local function refused(what, fn)
      local err = H.error_of(fn)
      assert.matches(what .. ': the name "[^"]*\\0[^"]*" holds a NUL byte', err)
    end
    refused("table", function() p:table("t\0evil", cols) end)
    refused("stream", function() p:stream("s\0", { {"id","int"} }) end)
    refused("filter", function() t:filter(function() return true end, "f\0x") end)
    refused("map", function() t:map(function(r) return r end, cols, "m\0x") end)
    refused("join", function() t:join(t, { on = "id", name = "j\0x" }) end)
    refused("select", function() t:select({ "id" }, "s\0x") end)
    refused("aggregate", function() t:aggregate{ n = runnel.count(), name = "a\0x" } end)
    refused("cdc", function() t:cdc{ name = "c\0x" } end)
    refused("lookup", function() p:lookup("l\0x", { {"k","int"}, key = "k", source = function() end }) end)
    refused("store", function() t:sink(runnel.store("st\0x")) end)
    refused("sqlite", function() t:sink(runnel.sqlite("/tmp/x.db", "tab\0le")) end)
    assert.equal(1, #p:relations())
    assert.is_nil(p:relation("t\0evil"))
    p:close()
  end)
end)

describe("the number of columns", function()
  local function columns(n)
    local cols = { key = "c1" }
    for i = 1, n do cols[i] = { "c" .. i, "int" } end
    return cols
  end

  it("is at most 1000 a relation, refused with the limit beyond", function()
    local p = runnel.open()
    local t = p:table("wide", columns(1000))
    local row = {}
    for i = 1, 1000 do row["c" .. i] = i end
    t:insert(row)
    assert.equal(1000, t:get(1).c1000)
    local ok, err = pcall(p.table, p, "wider", columns(1001))
    assert.is_false(ok)
    assert.matches("wider: too many columns: the limit is 1000", err, 1, true)
    p:close()
  end)
end)

describe("an attach reading a state this process has open", function()
  after_each(H.cleanup)

  local function state_with_store(dir)
    local p = runnel.open(dir)
    local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
    t:sink(runnel.store("st"))
    t:insert{ k = 1, v = "one" }
    return p
  end

  it("refuses to read once that pipeline closed, and reads again when attached again", function()
    local dir = H.tmpdir()
    local p = state_with_store(dir)
    local a = runnel.attach(dir, "st")
    assert.equal("one", a:get(1).v)
    p:close()
    local ok, err = pcall(a.get, a, 1)
    assert.is_false(ok)
    assert.matches("attach st: the pipeline whose state it read was closed", err, 1, true)
    assert.is_false(pcall(a.rows, a))
    a:close()
    local b = runnel.attach(dir, "st")
    assert.equal("one", b:get(1).v)
    b:close()
  end)

  it("as a lookup source fails the group of the pipeline asking it, not the process", function()
    local dir = H.tmpdir()
    local p = state_with_store(dir)
    local q = runnel.open()
    local ev = q:stream("ev", { {"k","int"} })
    local names = q:lookup("names", { {"k","int"}, {"v","string"}, key = "k",
                                      source = runnel.attach(dir, "st") })
    local out = H.record(ev:join(names, { on = "k", kind = "left" }))
    ev:insert{ k = 1 }
    assert.equal("one", out[1][3].v)
    p:close()
    local ok, err = pcall(ev.insert, ev, { k = 1 })
    assert.is_false(ok)
    assert.matches("was closed", err)
    assert.equal(1, #out)
    assert.is_false(q:in_group())
    q:close()
  end)
end)

describe("get on a derived relation", function()
  it("refuses a key that cannot be converted, as a table's get does, and finds 7.0 as 7", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"n","string"}, key = "id" })
    local f = t:filter(function() return true end)
    t:insert{ id = 7, n = "seven" }
    assert.equal("seven", f:get(7.0).n)
    assert.is_nil(f:get(8))
    local ok, err = pcall(f.get, f, "x")
    assert.is_false(ok)
    assert.matches('t.filter: column "id": expected int, got string', err, 1, true)
    assert.is_false(pcall(f.get, f, 7.5))
    assert.is_false(pcall(f.get, f, {}))
    p:close()
  end)
end)
