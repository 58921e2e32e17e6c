-- Lifetimes and reentrancy of the Lua binding: what a callback may do with
-- the pipeline that called it, with the rows it was lent and with the error
-- it raises; iterators kept across groups; values at the edges of every
-- converter; the order in which lua_close collects what a script kept.
-- misuse_spec covers each forbidden call from each kind of callback; this
-- file covers what happens around them.
local runnel = require "runnel"
local H = require "helper"

local COLS = { {"id","int"}, {"a","int", null = true}, key = "id" }

-- A pipeline with t (id, a) holding rows 1 and 2, and u (uid, name) with 1 and 2.
local function fresh()
  local p = runnel.open()
  local t = p:table("t", COLS)
  local u = p:table("u", { {"uid","int"}, {"name","string", null = true}, key = "uid" })
  p:batch(function()
    t:insert{ id = 1, a = 1 }
    t:insert{ id = 2, a = 2 }
    u:insert{ uid = 1, name = "one" }
    u:insert{ uid = 2, name = "two" }
  end)
  return p, t, u
end

local function ids(rel)
  local seen = {}
  for row in rel:rows() do seen[#seen + 1] = row.id or row.uid end
  return seen
end

-- Runs a Lua chunk in a lua5.4 of its own (the environment of this one:
-- the sanitizer runtime and its options under make asan); its output and
-- whether it exited 0.
local function own_process(chunk)
  local path = H.tmpdir() .. "/chunk.lua"
  H.write(path, chunk)
  local out, err, code = H.sh("lua5.4 " .. path .. " 2>&1")
  return code == 0, out .. err
end

describe("a callback that yields", function()
  after_each(H.cleanup)

  it("fails its group with a clear error; the pipeline keeps working", function()
    local p, t = fresh()
    t:sink(function() coroutine.yield() end)
    local co = coroutine.wrap(function() return pcall(t.insert, t, { id = 3 }) end)
    local ok, err = co()
    assert.is_false(ok)
    assert.matches("t: sink: attempt to yield across a C%-call boundary", err)
    assert.same({ 1, 2 }, ids(t))
    assert.is_false(p:in_group())
    assert.equal(1, p:seq())
    p:close()
  end)

  it("a change made inside a coroutine that ended, then collected, leaves later changes working", function()
    local p, t = fresh()
    local log = {}
    t:sink(function(verb, row) log[#log + 1] = verb .. " " .. (row and row.id or "") end)
    coroutine.wrap(function() t:insert{ id = 3 } end)()
    collectgarbage()
    collectgarbage()
    t:insert{ id = 4 }
    assert.same({ "INSERT 3", "INSERT 4" }, log)
    p:close()
  end)
end)

describe("a callback's error that is no string", function()
  after_each(H.cleanup)

  local VALUES = {
    table = function() return {} end,
    ["nil"] = function() return nil end,
    number = function() return 42 end,
    ["table with __tostring"] = function() return setmetatable({}, { __tostring = function() return "told" end }) end,
    ["table whose __tostring raises"] = function()
      return setmetatable({}, { __tostring = function() error("tostring refused") end })
    end,
    ["table whose __gc raises"] = function()
      return setmetatable({}, { __gc = function() error("gc refused") end })
    end,
  }
  local CALLBACKS = {
    sink = function(t, u, raise) t:sink(function() raise() end) end,
    filter = function(t, u, raise) t:filter(function() raise() end):sink(function() end) end,
    map = function(t, u, raise) t:map(function() raise() end, COLS):sink(function() end) end,
    -- (it reads the row: a mapper that reads nothing is a constant, called once)
    mapper = function(t, u, raise) t:join(u, { mapper = function(r) raise(r.id) end, kind = "left" }) end,
    joiner = function(t, u, raise)
      t:join(u, { on = "a", kind = "left", columns = { {"id","int"}, key = "id" }, joiner = function() raise() end })
    end,
  }

  for cb_name, hook in pairs(CALLBACKS) do
    for v_name, value in pairs(VALUES) do
      it(("from a %s (%s) rolls the group back and names the callback"):format(cb_name, v_name), function()
        local p, t, u = fresh()
        local armed = false
        hook(t, u, function() if armed then error(value()) end return true end)
        armed = true
        local ok, err = pcall(function() p:batch(function() t:insert{ id = 3, a = 1 } end) end)
        armed = false
        assert.is_false(ok)
        assert.equal("string", type(err))
        assert.matches(cb_name == "sink" and "t: sink" or cb_name, err, 1, true)
        assert.same({ 1, 2 }, ids(t))
        collectgarbage()
        t:insert{ id = 5, a = 1 }
        assert.same({ 1, 2, 5 }, ids(t))
        p:close()
      end)
    end
  end
end)

describe("a row lent to a mapper or joiner", function()
  after_each(H.cleanup)

  -- Each read the callback makes between two reads of its row.
  local READS = {
    ["get of its own table"] = function(t, u) return t:get(1) and t:get(2) and t:get(3) end,
    ["get of the other table"] = function(t, u) return u:get(1) and u:get(2) end,
    ["rows of its own table"] = function(t, u) local n = 0 for _ in t:rows() do n = n + 1 end return n end,
    ["rows of the other table"] = function(t, u) local n = 0 for _ in u:rows() do n = n + 1 end return n end,
    ["count and id_of"] = function(t, u) return t:count() + (t:id_of(2) or 0) + (u:id_of(1) or 0) end,
    collectgarbage = function() collectgarbage() collectgarbage() end,
    -- the join's own rows: a scan that calls this very mapper and joiner again
    ["rows, get and count of the join itself"] = function(t, u, j)
      local n = 0
      for _ in j:rows() do n = n + 1 end
      return n + j:count() + (j:get(1) and 1 or 0)
    end,
    -- stats counts LMDB entries: the write-back layer is flushed first
    ["stats and an index's range"] = function(t, u, j, p, idx)
      return p:stats().state.t + #idx:_range(nil, nil, 0, nil)
    end,
    ["scan of the join that keeps the rows it is given"] = function(t, u, j)
      local kept = {}
      j:scan(function(row) kept[#kept + 1] = row end)
      collectgarbage()
      return #kept
    end,
  }

  for name, read in pairs(READS) do
    it(("keeps its values across a %s inside the call"):format(name), function()
      local p, t, u = fresh()
      local seen = {}
      local j
      local idx = t:index{ "a" }
      j = t:join(u, { kind = "left", mapper = function(r)
        local before = { r.id, r.a }
        if j then read(t, u, j, p, idx) end
        seen[#seen + 1] = before[1] .. ":" .. tostring(before[2]) .. "=" .. r.id .. ":" .. tostring(r.a)
        return r.a
      end, joiner = function(l, r)
        local before = { l.id, l.a, r and r.name }
        if j then read(t, u, j, p, idx) end
        seen[#seen + 1] = ("%s:%s:%s=%s:%s:%s"):format(before[1], tostring(before[2]), tostring(before[3]),
                                                       l.id, tostring(l.a), tostring(r and r.name))
        return { id = l.id }
      end, columns = { {"id","int"}, key = "id" } })
      seen = {}
      p:batch(function()
        t:insert{ id = 3, a = 2 }
        u:upsert{ uid = 2, name = "TWO" } -- fans out to 2 and 3, rows read from the store
        t:update{ id = 1, a = 2 }
      end)
      for _, s in ipairs(seen) do
        local a, b = s:match("^(.*)=(.*)$")
        assert.equal(a, b)
      end
      assert.is_true(#seen >= 5)
      p:close()
    end)
  end
end)

describe("iterators kept across groups", function()
  after_each(H.cleanup)

  it("rows() opened outside a group goes on reading its snapshot after a commit", function()
    local p, t = fresh()
    local next_row, state, ctl, closing = t:rows()
    local r = next_row(state, ctl)
    t:insert{ id = 3 }
    local r2 = next_row(state, ctl)
    assert.equal(1, r.id)
    assert.equal(2, r2.id)
    assert.is_nil(next_row(state, ctl))
    local _ = closing
    p:close()
  end)

  it("rows() opened inside a group is refused once the group ended, committed or rolled back", function()
    for _, finish in ipairs{ "commit", "rollback" } do
      local p, t = fresh()
      p:begin()
      t:insert{ id = 3 }
      local next_row, state = t:rows()
      next_row(state)
      p[finish](p)
      local ok, err = pcall(next_row, state)
      assert.is_false(ok)
      assert.matches("t: rows(): the group this iteration ran in has ended", err, 1, true)
      p:begin() -- a new group: the old iteration stays ended
      assert.is_nil(next_row(state))
      p:rollback()
      p:close()
    end
  end)

  it("rows() kept past close ends, and is collected after its pipeline", function()
    local p, t = fresh()
    local next_row, state = t:rows()
    p:close()
    assert.is_nil(next_row(state))
    p, t = nil, nil
    collectgarbage()
    assert.is_nil(next_row(state))
  end)

  it("scan, get and rows of a derived relation from inside its own mapper read the open group", function()
    local p, t, u = fresh()
    local j
    local counts = {}
    j = t:join(u, { on = "a", kind = "left", mapper = nil, joiner = function(l, r)
      counts[#counts + 1] = j and j:count() or -1
      return { id = l.id, name = r and r.name }
    end, columns = { {"id","int"}, {"name","string", null = true}, key = "id" } })
    t:insert{ id = 3, a = 1 }
    assert.equal(3, j:count())
    p:close()
  end)
end)

describe("lua_close collects what a script kept, in any order", function()
  after_each(H.cleanup)

  local CHUNK = [[
package.path = %q
package.cpath = %q
local runnel = require "runnel"
local p = runnel.open()
local t = p:table("t", { {"id","int"}, {"a","int", null = true}, key = "id" })
local u = p:table("u", { {"uid","int"}, key = "uid" })
kept = {}
t:join(u, { kind = "left", mapper = function(r) kept.row = r return r.a end,
            joiner = function(l, r) kept.left = l return { id = l.id } end, columns = { {"id","int"}, key = "id" } })
t:sink(function(verb, row, old, info) kept.sinkrow = row kept.info = info end)
t:filter(function(r) kept.frow = r return true end):sink{ insert = function(r) kept.irow = r end }
local l = p:lookup("l", { {"uid","int"}, key = "uid", source = function(k) kept.key = k return nil end })
t:join(l, { on = "a", kind = "left", name = "tl" })
t:aggregate{ by = "a", n = runnel.count(), x = runnel.agg{ add = function(s, r) kept.arow = r return (s or 0) + 1 end,
                                                           remove = function(s) return s - 1 end } }
for i = 1, 5 do t:insert{ id = i, a = i %% 2 } end
kept.rows = { t:rows() }
kept.rel, kept.p = t, p
%s
]]

  local ENDINGS = {
    ["nothing closed"] = "",
    ["the pipeline dropped first"] = "p = nil; t = nil; kept.p = nil; collectgarbage()",
    ["the relations dropped first"] = "t = nil; u = nil; kept.rel = nil; collectgarbage()",
    ["the rows dropped first"] = "kept.rows = nil; collectgarbage()",
    ["closed, then collected"] = "p:close(); collectgarbage()",
    ["closed inside a coroutine"] = "coroutine.wrap(function() p:close() end)(); collectgarbage()",
    ["a change made in a coroutine last"] = "coroutine.wrap(function() t:insert{ id = 9, a = 1 } end)(); collectgarbage()",
    ["a rows() loop open at exit"] = "local f, s = t:rows(); f(s); kept.loop = { f, s }",
    -- a state with a store, attached (sharing this process's environment),
    -- read by a lookup of another pipeline
    ["a file an NDJSON sink holds, closed by the program"] = [[
      local f = io.open(arg[0]:match("(.*)/") .. "/out.ndjson", "w")
      t:sink(runnel.ndjson(f))
      t:insert{ id = 20, a = 1 }
      f:close()
      kept.f = f]],
    ["a file an NDJSON sink holds, left open"] = [[
      kept.f = io.open(arg[0]:match("(.*)/") .. "/out.ndjson", "w")
      t:sink(runnel.ndjson(kept.f))
      t:insert{ id = 20, a = 1 }]],
    ["attach handles kept past their pipeline"] = [[
      local dir = arg[0]:match("(.*)/") .. "/state"; os.execute("mkdir " .. dir)
      local q = runnel.open(dir)
      local s = q:table("s", { {"k","int"}, {"v","string"}, key = "k" })
      s:sink(runnel.store("st"))
      s:insert{ k = 1, v = "one" }
      kept.att = runnel.attach(dir, "st")
      local names = p:lookup("names", { {"k","int"}, {"v","string"}, key = "k", source = runnel.attach(dir, "st") })
      kept.j = t:join(names, { on = "a", kind = "left", name = "tn" })
      t:insert{ id = 10, a = 1 }
      kept.q = q
      q:close()
      collectgarbage()]],
    ["attach handles with their pipeline open at exit"] = [[
      local dir = arg[0]:match("(.*)/") .. "/state"; os.execute("mkdir " .. dir)
      local q = runnel.open(dir)
      local s = q:table("s", { {"k","int"}, {"v","string"}, key = "k" })
      s:sink(runnel.store("st"))
      s:insert{ k = 1, v = "one" }
      kept.att = runnel.attach(dir, "st")
      kept.rows = kept.att:rows()
      kept.q = q]],
  }

  for name, ending in pairs(ENDINGS) do
    it(name, function()
      local ok, out = own_process(CHUNK:format(package.path, package.cpath, ending) .. "\nos.exit(0, true)\n")
      assert.is_true(ok, out)
    end)
  end
end)

describe("a mapper's key given as a table whose __index makes the values", function()
  after_each(H.cleanup)

  it("keeps each value made until the key is encoded (a collection between two reads)", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, key = "id" })
    local u = p:table("u", { {"k1","string"}, {"k2","string"}, {"v","int"}, key = { "k1", "k2" } })
    local long = ("x"):rep(60) -- not interned: each call makes a new string
    u:insert{ k1 = long .. "1", k2 = long .. "2", v = 7 }
    local j = t:join(u, { kind = "left", mapper = function(r)
      local _ = r.id
      return setmetatable({}, { __index = function(_, name)
        local s = long .. (name == "k1" and "1" or "2")
        collectgarbage()
        local junk = {}
        for i = 1, 200 do junk[i] = long .. i end -- the freed string's memory is taken again
        return s
      end })
    end })
    local found = {}
    j:sink(function(verb, row) found[#found + 1] = row.v end)
    for i = 1, 10 do t:insert{ id = i } end
    assert.same({ 7, 7, 7, 7, 7, 7, 7, 7, 7, 7 }, found)
    p:close()
  end)
end)

describe("the REPL given values whose metamethods raise", function()
  it("prints the error and goes on, for a result, an error object and a new p", function()
    local input = table.concat({
      'x = setmetatable({}, { __tostring = function() error("tostring refused") end })',
      "x", 'print("after a result")',
      'setmetatable({}, { __pairs = function() error("pairs refused") end })', 'print("after pairs")',
      'error(setmetatable({}, { __pairs = function() error("pairs refused") end }))', 'print("after an error")',
      "p = x", 'print("after p")',
    }, "\n") .. "\n"
    local out, err, code = H.sh(H.runnel_bin, input)
    assert.equal(0, code, err)
    assert.matches("error: printing the value: stdin:1: tostring refused\nafter a result\n", out, 1, true)
    assert.matches("error: printing the value: stdin:1: pairs refused\nafter pairs\n", out, 1, true)
    assert.matches("error: (error object is a table value)\nafter an error\n", out, 1, true)
    assert.matches("after p\n", out, 1, true)
  end)
end)

describe("collectgarbage() inside every kind of callback", function()
  after_each(H.cleanup)

  -- The same changes through every kind of callback, collecting (and making
  -- garbage) in each call or not; what the sinks saw.
  local function run(collect)
    local function churn()
      if collect then
        local junk = {}
        for i = 1, 50 do junk[i] = ("g"):rep(50) .. i end
        collectgarbage()
      end
    end
    local p = runnel.open{ clock = function() churn() return 0 end }
    local t = p:table("t", { {"id","int"}, {"a","int", null = true}, {"s","string", null = true}, key = "id" })
    local u = p:table("u", { {"uid","int"}, {"name","string"}, key = "uid" })
    local l = p:lookup("l", { {"lk","int"}, {"lv","string"}, key = "lk", cache = { ttl = 5 },
                              source = function(k) churn() return { lk = k, lv = ("v"):rep(45) .. k } end })
    local seen = {}
    local function watch(rel)
      rel:sink(function(verb, row, old, info)
        churn()
        local r = row or old
        local parts = {}
        for k, v in pairs(r) do parts[#parts + 1] = k .. "=" .. tostring(v) end
        table.sort(parts)
        seen[#seen + 1] = rel:name() .. " " .. verb .. " " .. info.id .. " " .. table.concat(parts, ",")
      end)
    end
    watch(t:filter(function(r) churn() return r.a ~= 3 end, "f"))
    watch(t:map(function(r) churn() return { id = r.id, s = (r.s or "") .. ("m"):rep(45) } end,
                { {"id","int"}, {"s","string"}, key = "id" }, "m"))
    watch(t:join(u, { kind = "left", name = "j",
      mapper = function(r) churn() return r.a end,
      joiner = function(lr, rr) churn() return { id = lr.id, name = rr and rr.name .. ("j"):rep(45) } end,
      columns = { {"id","int"}, {"name","string", null = true}, key = "id" } }))
    watch(t:join(u, { on = "a", kind = "left", name = "sel",
      selector = function(lk, rk) churn() return { lk, rk or 0 } end }))
    watch(t:join(l, { on = "a", kind = "left", name = "tl" }))
    watch(t:aggregate{ by = "a", name = "agg", n = runnel.count(),
      x = runnel.agg{ init = function() churn() return ("i"):rep(45) end,
                      add = function(st, r) churn() return st .. (r.s or "-") end,
                      remove = function(st, r) churn() return st:sub(1, #st - #(r.s or "-")) end,
                      result = function(st) churn() return #st end } })
    for i = 1, 4 do
      p:batch(function()
        u:upsert{ uid = i, name = "u" .. i }
        t:insert{ id = i, a = i % 3 + 1, s = ("s"):rep(i * 20) }
        if i > 1 then t:update{ id = i - 1, a = i, s = "x" } end
        if i > 2 then t:delete{ id = i - 2 } end
      end)
    end
    p:close()
    return seen
  end

  it("changes nothing the sinks see", function()
    local plain = run(false)
    assert.is_true(#plain > 40)
    assert.same(plain, run(true))
  end)
end)

describe("a finalizer that closes the pipeline while runnel reads it", function()
  after_each(H.cleanup)

  -- Each read, in a process of its own (a small heap: a collection cycle
  -- ends within a few allocations), made while objects whose __gc closes p
  -- are collected at the allocations of the rows it builds (and of the
  -- schema get reads): a finalizer may not call runnel, the close is
  -- refused, and the read completes. (Closing there freed the row, schema
  -- or zone runnel was reading: a use after free.)
  local READS = {
    rows = "for _ in t:rows() do n = n + 1 bombs() end",
    scan = "t:scan(function() n = n + 1 bombs() end)",
    get = "for i = 1, 60 do if t:get(i) then n = n + 1 end bombs() end",
    ["rows of a filter (a scan)"] = "for _ in f:rows() do n = n + 1 bombs() end",
    ["an index's range"] = "for _ = 1, 20 do bombs() n = #idx:_range(nil, nil, 0, nil) end",
    -- a finalizer reading the row lent to a mapper while the mapper reads t
    ["a lent row"] = [[p:table("u", { {"uid","int"}, key = "uid" })
      t:join(p:relation("u"), { kind = "left", mapper = function(r)
        for _ = 1, 30 do
          setmetatable({}, { __gc = function()
            local ok, err = pcall(function() return r.l end)
            if not ok then refusal = err end
          end })
        end
        for i = 1, 5 do t:get(i) end
        n = n + 1
        return r.id
      end })]],
    ["schema, stats and relations"] = "for _ = 1, 20 do bombs() t:schema() p:stats() p:relations() end n = 60",
  }
  local CHUNK = [[
package.path = %q
package.cpath = %q
local runnel = require "runnel"
local p = runnel.open()
local t = p:table("t", { {"id","int"}, {"s","string"}, {"l","list", null = true}, key = "id" })
local f = t:filter(function() return true end)
local idx = t:index{ "s" }
p:batch(function()
  for i = 1, 60 do t:insert{ id = i, s = ("s"):rep(60) .. i, l = { i, ("x"):rep(60), { i } } } end
end)
local closed, n, refusal = 0, 0, "none"
local function bombs()
  for _ = 1, 30 do
    setmetatable({}, { __gc = function()
      local ok, err = pcall(p.close, p)
      if ok then closed = closed + 1 else refusal = err end
    end })
  end
end
collectgarbage("incremental", 1, 1000) -- a cycle at once, a step at every allocation
local ok, err = pcall(function() %s end)
assert(ok, err)
print(closed, n, refusal)
p:close()
]]

  for name, read in pairs(READS) do
    it(name, function()
      local ok, out = own_process(CHUNK:format(package.path, package.cpath, read))
      assert.is_true(ok, out)
      assert.matches("^0\t60\t.-runnel: not from a finalizer %(__gc%): it may run in the middle of a runnel call\n", out)
    end)
  end
end)

describe("values at the edges", function()
  after_each(H.cleanup)

  local EDGES = { math.mininteger, math.maxinteger, -0.0, 1 / 0, -1 / 0, 2^53, -2^63 }

  it("pass unchanged through a row, a lent row, a joiner, a sink, get and a lookup", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"i","int", null = true}, {"f","float", null = true},
                             {"x","any", null = true}, {"l","list", null = true}, key = "id" })
    local l = p:lookup("l", { {"k","int"}, {"v","float"}, key = "k", source = function(k) return { k = k, v = -0.0 } end })
    local lent, sunk = {}, {}
    local j = t:join(l, { kind = "left", mapper = function(r)
      lent[r.id] = { r.i, r.f, r.x, r.l and r.l[1] }
      return r.i
    end, joiner = function(a, b) return { id = a.id, i = a.i, f = a.f, v = b and b.v } end,
       columns = { {"id","int"}, {"i","int", null = true}, {"f","float", null = true}, {"v","float", null = true}, key = "id" } })
    j:sink(function(verb, row) sunk[row.id] = { row.i, row.f, row.v } end)
    for n, v in ipairs(EDGES) do
      local int, fv = math.tointeger(v), v * 1.0 -- (v + 0.0 would make -0.0 a 0.0)
      -- math.maxinteger is no float: a float column refuses it as an integer (capi_edges3_spec), takes 2^63
      t:insert{ id = n, i = int, f = v == math.maxinteger and fv or v, x = v, l = { v, v } }
      local got = t:get(n)
      assert.equal(int, got.i)
      assert.equal(math.type(int), math.type(got.i))
      assert.equal(fv, got.f)
      assert.equal(1 / fv, 1 / got.f) -- -0.0 stays -0.0
      assert.equal(math.type(v), math.type(got.x))
      assert.equal(v, got.l[1])
      assert.same({ int, fv, v, v }, lent[n])
      assert.equal(int, sunk[n][1])
      assert.equal(1 / fv, 1 / sunk[n][2])
      if int then assert.equal(-1 / 0, 1 / sunk[n][3]) end -- the lookup's -0.0
    end
    local nan = t:insert{ id = 99, f = 0 / 0, x = 0 / 0 }
    local got = t:get(99)
    assert.is_true(got.f ~= got.f and got.x ~= got.x)
    local _ = nan
    p:close()
  end)

  it("a row table's metatable is not consulted: its own fields are the row", function()
    local p = runnel.open()
    local t = p:table("t", COLS)
    local called = false
    local mt = { __index = function() called = true error("no") end,
                 __pairs = function() called = true error("no") end,
                 __len = function() called = true error("no") end }
    t:insert(setmetatable({ id = 1, a = 2 }, mt))
    t:update(setmetatable({ id = 1, a = 3 }, mt))
    assert.equal(3, t:get(setmetatable({ id = 1 }, mt)).a)
    t:delete(setmetatable({ id = 1 }, mt))
    assert.is_false(called)
    assert.equal(0, t:count())
    p:close()
  end)

  it("a table that holds itself is refused as too deep, and the group rolls back", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"x","any", null = true}, key = "id" })
    local cyc = {}
    cyc[1] = cyc
    p:begin()
    t:insert{ id = 1 }
    local ok, err = pcall(t.insert, t, { id = 2, x = cyc })
    assert.is_false(ok)
    assert.matches("t: column \"x\": value nested more than 64 deep", err, 1, true)
    assert.is_false(p:in_group())
    assert.equal(0, t:count())
    p:close()
  end)
end)

describe("a Lua file runnel writes or reads, closed by the program meanwhile", function()
  after_each(H.cleanup)

  it("an NDJSON sink's: Lua sees it closed, runnel writes on and closes it at its own close", function()
    local path = H.tmpdir() .. "/out.ndjson"
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, key = "id" })
    local f = assert(io.open(path, "w"))
    t:sink(runnel.ndjson(f))
    t:cdc{}:sink(runnel.ndjson(f, { verb = false })) -- a second holder of the same file
    t:insert{ id = 1 }
    assert.is_true(f:close())
    assert.equal("closed file", io.type(f))
    assert.is_false(pcall(f.write, f, "x"))
    t:insert{ id = 2 }
    collectgarbage()
    t:insert{ id = 3 }
    p:close()
    local ids = {}
    for line in H.read(path):gmatch("[^\n]+") do
      if line:find('"verb"', 1, true) then ids[#ids + 1] = tonumber(line:match('"id":(%d+)')) end
    end
    assert.same({ 1, 2, 3 }, ids)
    local g = assert(io.open(path, "w")) -- a file given back its close function when left open
    local q = runnel.open()
    q:table("t", { {"id","int"}, key = "id" }):sink(runnel.ndjson(g))
    q:close()
    assert.is_true(g:close())
    local r = runnel.open() -- a standard file is not held: Lua still refuses to close it
    r:table("t", { {"id","int"}, key = "id" }):sink(runnel.ndjson(io.stderr))
    assert.same({ nil, "cannot close standard file" }, { io.stderr:close() })
    r:close()
  end)

  it("p:run's input and rejects: the run reads and writes to the end", function()
    local dir = H.tmpdir()
    local lines = {}
    for i = 1, 20 do lines[i] = ('{"rel":"t","op":"insert","row":{"id":%d}}'):format(i) end
    lines[21] = "not json"
    H.write(dir .. "/in.ndjson", table.concat(lines, "\n") .. "\n")
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, key = "id" })
    local input, rejects = assert(io.open(dir .. "/in.ndjson")), assert(io.open(dir .. "/rejects", "w"))
    t:sink(function(verb, row) if row.id == 2 then input:close() rejects:close() end end)
    local stats = p:run(runnel.ndjson_source(input), { batch = 1, on_error = "skip", rejects = rejects, progress = false })
    assert.equal(20, stats.applied)
    assert.equal(1, stats.rejected)
    assert.equal(20, t:count())
    assert.equal("closed file", io.type(input))
    assert.matches("not json", H.read(dir .. "/rejects"), 1, true)
    p:close()
  end)
end)
