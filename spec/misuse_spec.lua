-- Misuse of the Lua API (issue 10): every public method called with wrong
-- types, nil, after close, and from inside each kind of callback. Each call
-- gives a clear error naming the user's line, the pipeline keeps working,
-- and what was committed is intact when the state is reopened.
local runnel = require "runnel"
local H = require "helper"

local HERE = debug.getinfo(1, "S").short_src

local COLS = { {"id","int"}, {"a","int", null = true}, key = "id" }

-- A state holding t with rows 1 and 2 (seq 1), and u with row 1.
local function fresh(opts)
  local dir = H.tmpdir()
  opts = opts or {}
  opts.path = dir
  local p = runnel.open(opts)
  local t = p:table("t", COLS)
  local u = p:table("u", { {"uid","int"}, {"name","string", null = true}, key = "uid" })
  p:batch(function()
    t:insert{ id = 1, a = 1 }
    t:insert{ id = 2, a = 1 }
    u:insert{ uid = 1, name = "one" }
  end)
  return p, t, u, dir
end

-- Reopens dir and checks that the committed rows are there and nothing else.
local function intact(dir, rows, seq)
  local p = runnel.open(dir)
  local t = p:table("t", COLS)
  local seen = {}
  for row in t:rows() do seen[#seen + 1] = row.id end
  assert.same(rows or { 1, 2 }, seen)
  assert.equal(seq or 1, p:seq())
  p:close()
end

-- Every kind of callback, each declared over t (or fed by a change to t):
-- hook(p, t, u, act) declares it so that act() runs inside it.
local CALLBACKS = {
  sink = function(p, t, u, act) t:sink(function() act() end) end,
  ["sink insert"] = function(p, t, u, act) t:sink{ insert = function() act() end } end,
  ["sink commit"] = function(p, t, u, act) t:sink{ commit = function() act() end } end,
  filter = function(p, t, u, act) t:filter(function() act() return true end) end,
  map = function(p, t, u, act) t:map(function(r) act() return r end, COLS) end,
  mapper = function(p, t, u, act) t:join(u, { mapper = function(r) act() return r.a end, kind = "left" }) end,
  joiner = function(p, t, u, act)
    t:join(u, { on = "a", kind = "left", columns = { {"id","int"}, key = "id" },
                joiner = function(l) act() return { id = l.id } end })
  end,
  selector = function(p, t, u, act)
    t:join(u, { on = "a", kind = "left", selector = function(l) act() return l end })
  end,
  ["agg init"] = function(p, t, u, act)
    t:aggregate{ by = "a", x = runnel.agg{ init = function() act() return 0 end, add = function(s) return s end,
                                           remove = function(s) return s end } }
  end,
  ["agg add"] = function(p, t, u, act)
    t:aggregate{ by = "a", x = runnel.agg{ add = function(s) act() return s end, remove = function(s) return s end } }
  end,
  ["agg result"] = function(p, t, u, act)
    t:aggregate{ by = "a", x = runnel.agg{ add = function(s) return s end, remove = function(s) return s end,
                                           result = function(s) act() return s end } }
  end,
  ["lookup source"] = function(p, t, u, act)
    local l = p:lookup("l", { {"uid","int"}, key = "uid", source = function() act() return nil end })
    t:join(l, { on = "a", kind = "left" })
  end,
  clock = function(p, t, u, act, clock)
    clock.fn = act
    local l = p:lookup("l", { {"uid","int"}, key = "uid", source = function() return nil end,
                              cache = { ttl = 10 } })
    t:join(l, { on = "a", kind = "left" })
  end,
}

-- What a callback may not do, and the words of the refusal.
local ACTIONS = {
  ["p:close()"] = { function(p) p:close() end, "close: not from inside a callback" },
  ["p:begin()"] = { function(p) p:begin() end, "begin: not from inside a callback" },
  ["p:commit()"] = { function(p) p:commit() end, "commit: not from inside a callback" },
  ["p:rollback()"] = { function(p) p:rollback() end, "rollback: not from inside a callback" },
  ["t:insert"] = { function(p, t) t:insert{ id = 99 } end, "tables cannot be changed from inside a callback" },
  ["t:delete"] = { function(p, t) t:delete(1) end, "tables cannot be changed from inside a callback" },
  ["p:table"] = { function(p) p:table("late", COLS) end, "relations are declared outside groups and their callbacks" },
  ["t:sink"] = { function(p, t) t:sink(function() end) end, "sinks are added outside groups" },
  ["p:flush()"] = { function(p) p:flush() end, "flush: not from inside a callback" },
  ["p:run"] = { function(p) p:run(runnel.ndjson_source("-")) end, "run: not inside a group or a callback" },
  ["p:lookup"] = { function(p) p:lookup("late", { {"k","int"}, key = "k", source = print }) end,
                   "relations are declared outside groups and their callbacks" },
  ["t:update"] = { function(p, t) t:update{ id = 1, a = 5 } end, "tables cannot be changed from inside a callback" },
}

describe("inside a callback", function()
  after_each(H.cleanup)

  for cb_name, hook in pairs(CALLBACKS) do
    for act_name, action in pairs(ACTIONS) do
      it(("%s refuses %s and keeps the pipeline working"):format(cb_name, act_name), function()
        local armed = false
        local clock = {}
        local p, t, u, dir = fresh{ clock = function() if clock.fn then clock.fn() end return 0 end }
        local function act()
          if armed then action[1](p, t, u) end
        end
        hook(p, t, u, act, clock)
        p:begin()
        t:insert{ id = 3, a = 1 } -- a change of the group before the one that fails
        armed = true
        local ok, err = pcall(function() t:insert{ id = 4, a = 7 } t:upsert{ id = 5, a = 1 } p:commit() end)
        assert.is_false(ok)
        assert.matches(action[2], err, 1, true)
        local line = debug.getinfo(action[1], "S").linedefined
        assert.matches(HERE .. ":" .. line .. ": ", err, 1, true) -- the user's line, inside the callback
        assert.is_false(p:in_group())
        assert.equal(2, t:count())
        assert.equal(1, p:seq())
        armed = false
        t:insert{ id = 6, a = 1 } -- the pipeline keeps working
        assert.equal(2, p:seq())
        p:close()
        intact(dir, { 1, 2, 6 }, 2)
      end)
    end
  end

  it("a scan refuses p:close() and the pipeline keeps working", function()
    local p, t, _, dir = fresh()
    local ok, err = pcall(function() t:scan(function() p:close() end) end)
    assert.is_false(ok)
    assert.matches("close: not from inside a callback", err, 1, true)
    t:insert{ id = 3 }
    assert.equal(3, t:count())
    p:close()
    intact(dir, { 1, 2, 3 }, 2)
  end)

  it("a rows() loop may close the pipeline: the loop ends", function()
    local p, t, _, dir = fresh()
    local n = 0
    for _ in t:rows() do n = n + 1; p:close() end
    assert.equal(1, n)
    intact(dir)
  end)

  it("a callback that catches the refusal lets its group commit", function()
    local p, t, _, dir = fresh()
    local caught
    t:sink(function() local ok, err = pcall(p.close, p) if not ok then caught = err end end)
    t:insert{ id = 3 }
    assert.matches("close: not from inside a callback", caught, 1, true)
    assert.equal(2, p:seq())
    p:close()
    intact(dir, { 1, 2, 3 }, 2)
  end)
end)

describe("wrong arguments", function()
  local p, t, dir
  before_each(function() p, t, _, dir = fresh() end)
  after_each(function() p:close(); intact(dir); H.cleanup() end)

  -- Each call must fail naming this file's line and leave nothing behind.
  local function refused(fn, words)
    local ok, err = pcall(fn)
    assert.is_false(ok, "expected an error")
    assert.equal("string", type(err))
    assert.equal(HERE .. ":" .. debug.getinfo(fn, "S").linedefined .. ":", err:match("^[^:]*:%d+:"), err)
    assert.not_matches("runnel%.lua", err)
    if words then assert.matches(words, err, 1, true) end
    assert.is_false(p:in_group())
  end

  it("to the changes", function()
    refused(function() t:insert() end, "a row is a table")
    refused(function() t:insert(5) end, "a row is a table")
    refused(function() t:insert{ id = "x" } end, 'column "id": expected int, got string')
    refused(function() t:insert{ id = 1.5 } end, 'column "id"')
    refused(function() t:insert{ a = 1 } end, 'column "id"')
    refused(function() t:insert{ id = 9, nope = 1 } end, 'unknown column "nope"')
    refused(function() t:insert{ [1] = 9 } end, "column names are strings")
    refused(function() t:insert{ id = 9, a = {} } end, 'column "a"')
    refused(function() t:insert{ id = 9, a = print } end, 'column "a"')
    refused(function() t:insert{ id = 1 } end)
    refused(function() t:update{ id = 77, a = 1 } end)
    refused(function() t:update(nil) end)
    refused(function() t:upsert(true) end)
    refused(function() t:delete() end)
    refused(function() t:delete{ id = "x" } end)
    refused(function() t.insert(nil, { id = 9 }) end, "insert: expects a runnel.Relation as self (call it as x:insert(…)), got nil")
    refused(function() t.insert(p, { id = 9 }) end, "insert: expects a runnel.Relation as self (call it as x:insert(…)), got userdata")
  end)

  it("to the reads", function()
    refused(function() t:get() end)
    refused(function() t:get("x") end, 'column "id": expected int, got string')
    refused(function() t:get{ nope = 1 } end, 'unknown column "nope"')
    refused(function() t:id_of({}) end)
    refused(function() t:scan() end)
    refused(function() t:scan(5) end)
    refused(function() t.rows(nil) end)
    refused(function() t.count(p) end)
  end)

  it("to the declarations", function()
    refused(function() p:table() end, "name must be a string")
    refused(function() p:table("x") end, "columns must be a table")
    refused(function() p:table("x", { {"id"} }) end, "unknown type")
    refused(function() p:table("x", { {"id","nope"} }) end, "unknown type nope")
    refused(function() p:table("x", { {"id","int"}, key = "zz" }) end, "zz")
    refused(function() p:table("x", { {"id","int"}, {"id","int"} }) end)
    refused(function() p:table("x", { {"a\0b","int"} }) end, "NUL")
    refused(function() p:table("t", COLS) end, "already declared")
    refused(function() p:stream("s", { {"id","int"}, key = "id" }) end, "a stream has no key")
    refused(function() t:filter() end, "filter: expects a function")
    refused(function() t:filter(function() end, 5) end, "the name must be a string")
    refused(function() t:map(function() end) end, "columns must be a table")
    refused(function() t:join() end, "join: the right side must be a relation, got nil")
    refused(function() t:join(t, {}) end, "give either on or mapper")
    refused(function() t:join(t, { on = "a", mapper = print }) end, "give either on or mapper")
    refused(function() t:join(t, { on = "a", kind = "sideways" }) end, "kind must be")
    refused(function() t:join(5, { on = "a" }) end)
    refused(function() t:join(t, { on = "nope" }) end)
    refused(function() t:cdc(5) end, "cdc: expects an options table")
    refused(function() t:cdc{ preimage = "some" } end, "preimage must be")
    refused(function() t:aggregate() end, "aggregate: expects a table")
    refused(function() t:aggregate{ by = "a" } end, "name at least one aggregate")
    refused(function() t:aggregate{ n = 5 } end, "must be an aggregate")
    refused(function() t:aggregate{ n = runnel.sum("nope") } end, "nope")
    refused(function() runnel.sum() end, "sum: expects a column name")
    refused(function() runnel.agg{} end, "agg: expects")
    refused(function() runnel.tumbling(-1, "a") end, "size must be a positive number")
    refused(function() t:select{} end, "select: expects a list of columns")
    refused(function() t:select{ "nope" } end, "nope")
    refused(function() t:sink() end, "sink: expects a function or a table of functions")
    refused(function() t:sink{ nope = print } end, "sink: unknown field nope")
    refused(function() t:sink{ insert = 5 } end, "sink: insert must be a function")
    refused(function() t:sink{ attach = function() error("attach says no", 0) end } end, "attach says no")
    local ok, err = pcall(t.sink, t, { attach = function() error({ code = 7 }) end })
    assert.is_false(ok)
    assert.same({ code = 7 }, err) -- an error value that is not a message passes as it is
    refused(function() p:lookup("l") end, "lookup: expects a column list")
    refused(function() p:lookup("l", { {"k","int"}, key = "k" }) end, "source must be")
    refused(function() p:lookup("l", { {"k","int"}, key = "k", source = print, cache = { ttl = 0 } }) end,
            "l: cache: ttl must be a number of seconds > 0, got 0")
    assert.equal(2, #p:relations())
  end)

  it("to the pipeline", function()
    refused(function() p:batch() end, "batch: expects a function")
    refused(function() p:commit() end, "commit: no group is open")
    refused(function() p:run() end, "run: expects runnel.ndjson_source")
    refused(function() p:run(runnel.ndjson_source("/nonexistent/x.ndjson")) end, "run: cannot open")
    refused(function() p:run(runnel.ndjson_source("-"), { batch = 0 }) end, "batch must be a positive integer")
    refused(function() p.begin(t) end, "begin: expects a runnel.Pipeline as self (call it as x:begin(…)), got userdata")
    refused(function() runnel.open(5) end, "open: expects a path or an options table")
    refused(function() runnel.open{ nope = 1 } end, "open: unknown option nope")
    refused(function() runnel.open{ clock = 5 } end, "open: clock must be a function")
    refused(function() runnel.ndjson(5) end, "ndjson: expects a path or an open file")
    refused(function() runnel.store() end, "store: expects a name")
    refused(function() runnel.sqlite() end, "sqlite: expects (path, table)")
  end)
end)

describe("an attached store", function()
  after_each(H.cleanup)

  it("refuses bad keys, a missing store and use after close, naming the user's line", function()
    local p, t, _, dir = fresh()
    t:sink(runnel.store("st"))
    t:insert{ id = 3, a = 3 }
    local function at_line(fn, words)
      local ok, err = pcall(fn)
      assert.is_false(ok)
      assert.equal(HERE .. ":" .. debug.getinfo(fn, "S").linedefined .. ":", err:match("^[^:]*:%d+:"), err)
      assert.matches(words, err, 1, true)
    end
    at_line(function() runnel.attach(dir, "nope") end, 'no relation or store "nope"')
    at_line(function() runnel.attach(dir, "st\0x") end, "NUL")
    at_line(function() runnel.attach() end, "bad argument #1")
    local a = runnel.attach(dir, "st")
    at_line(function() a:get("x") end, 'column "id": expected int, got string')
    at_line(function() a:get({}) end, 'key column "id" is missing')
    at_line(function() a.get(nil, 1) end, "runnel.Attached expected")
    assert.equal(3, a:get(3).a)
    a:close()
    a:close()
    at_line(function() a:get(3) end, "the attached store is closed")
    at_line(function() a:rows() end, "the attached store is closed")
    p:close()
    intact(dir, { 1, 2, 3 }, 2)
  end)
end)

describe("after close", function()
  after_each(H.cleanup)

  it("every method is an error naming the user's line, and close may be repeated", function()
    local p, t, u, dir = fresh()
    local f = t:filter(function() return true end)
    local j = t:join(u, { on = "a", kind = "left" })
    p:close()
    p:close()
    assert.equal("runnel.Pipeline (closed)", tostring(p))
    assert.equal("runnel.Relation t (closed)", tostring(t))
    local calls = {
      function() p:begin() end, function() p:commit() end, function() p:rollback() end,
      function() p:seq() end, function() p:stats() end, function() p:flush() end, function() p:in_group() end,
      function() p:relations() end, function() p:relation("t") end, function() p:path() end,
      function() p:table("x", COLS) end, function() p:stream("x", { {"id","int"} }) end,
      function() p:batch(function() end) end, function() p:run(runnel.ndjson_source("-")) end,
      function() p:lookup("l", { {"k","int"}, key = "k", source = print }) end,
      function() t:insert{ id = 3 } end, function() t:update{ id = 1, a = 2 } end,
      function() t:upsert{ id = 1 } end, function() t:delete(1) end, function() t:get(1) end,
      function() t:id_of(1) end, function() t:count() end, function() t:rows() end,
      function() t:scan(print) end, function() t:schema() end, function() t:name() end,
      function() t:pipeline() end, function() t:changes() end, function() t:filter(print) end,
      function() t:map(print, COLS) end, function() t:join(u, { on = "a" }) end, function() t:cdc() end,
      function() t:aggregate{ n = runnel.count() } end, function() t:select{ "id" } end,
      function() t:sink(print) end, function() t:sink(runnel.store("s")) end,
      function() f:count() end, function() f:get(1) end, function() j:rows() end, function() j:count() end,
      function() runnel.show(t) end, function() runnel.watch(t) end,
    }
    for i, call in ipairs(calls) do
      local ok, err = pcall(call)
      assert.is_false(ok, "call #" .. i)
      assert.matches("closed", err, 1, true)
      assert.equal(HERE .. ":" .. debug.getinfo(call, "S").linedefined .. ":", err:match("^[^:]*:%d+:"),
                   "call #" .. i .. ": " .. err)
    end
    intact(dir)
  end)
end)
