-- A Lua joiner that only copies columns of its two rows is done in C
-- (lua/runnel/joiner.lua reads its bytecode; core/join.c checks that the
-- copy gives exactly the declared columns): the same rows and events as
-- calling it, without calling it. Anything else is called as before.
local runnel = require "runnel"
local H = require "helper"
local copies = require("runnel.joiner")()

-- How many times fn is entered while body runs (a call hook: a joiner
-- done in C is never entered).
local function calls_of(fn, body)
  local n = 0
  debug.sethook(function()
    if debug.getinfo(2, "f").func == fn then n = n + 1 end
  end, "c")
  local ok, err = pcall(body)
  debug.sethook()
  assert(ok, err)
  return n
end

describe("recognising a joiner that copies columns", function()
  it("reads a table of columns, or values in column order, guarded right columns", function()
    assert.same({ { out = "a", side = 0, col = "x" }, { out = "b", side = 1, col = "y" } },
                copies(function(l, r) return { a = l.x, b = r and r.y } end, "left"))
    assert.same({ { side = 0, col = "id" }, { side = 0, col = "name" }, { side = 1, col = "name" } },
                copies(function(l, r) return l.id, l.name, r and r.name end, "left"))
    assert.is_nil(copies(function(l) return l.id end, "inner")) -- one value: nil would be no result
    assert.same({ { out = "v", side = 1, col = "y" } }, copies(function(_, r) return { v = r.y } end, "inner"))
    local function locals(l, r)
      local id, y = l.id, r and r.y
      return { id = id, y = y }
    end
    assert.same({ { out = "id", side = 0, col = "id" }, { out = "y", side = 1, col = "y" } }, copies(locals, "left"))
  end)

  it("leaves every other joiner to Lua", function()
    local up = 1
    local function id(v) return v end
    local not_copies = {
      function(l) return { a = l.x + 1 } end,                  -- arithmetic
      function(l) return { a = tostring(l.x) } end,            -- a global call
      function(l) return { a = id(l.x) } end,                  -- an upvalue
      function(l) return { a = l.x, b = up } end,              -- an upvalue's value
      function(l) return { a = l.x, b = 1 } end,               -- a constant
      function(l, r) return { a = r and r.y or "none" } end,   -- a default
      function(l, r) return { a = l.x, b = r.y } end,          -- a right row that may be missing
      function(l) return { a = l.x, a2 = l.x, a = l.z } end,   -- a key given twice
      function(l) return { a = l[1] } end,                     -- not a field name
      function(l) return { a = l:x() } end,                    -- a method call
      function(l) return { n = { l.x } } end,                  -- a nested table
      function(l) if l.x then return { a = l.x } end end,      -- a branch
      function(...) return { a = (...).x } end,                -- varargs
      function(l, r, extra) return { a = l.x, b = extra } end, -- a third parameter
      function(l) return { a = l.x }, 2 end,                   -- two results
      function() return {} end,                                -- nothing copied
      function(l) local f = function() return l.x end; return { a = f() } end, -- a nested function
      print,                                                   -- a C function
    }
    for i, fn in ipairs(not_copies) do
      assert.is_nil(copies(fn, "left"), "joiner #" .. i)
    end
    -- an outer join's rows may lack either side
    assert.is_nil(copies(function(l, r) return { a = l and l.x, b = r and r.y } end, "outer"))
  end)
end)

-- Two pipelines over the same random changes: one whose joiner is done in
-- C, one whose joiner (the same values, through a function call) is
-- called; rows and events after every group must agree.
local function build(p, joiner, kind, mapped)
  local teams = p:table("teams", { {"id","int"}, {"name","string"}, {"w","float", null = true},
                                   {"ok","bool", null = true}, key = "id" })
  local players = p:table("players", { {"id","int"}, {"name","string"}, {"team","int", null = true},
                                       {"score","int", default = 0}, {"tag","bytes", null = true}, key = "id" })
  local opts = { kind = kind, joiner = joiner, columns = {
    {"pid","int"}, {"pname","string"}, {"score","int"}, {"tag","bytes", null = true},
    {"tname","string", null = kind ~= "inner"}, {"w","float", null = true}, {"ok","bool", null = true}, key = "pid" } }
  if mapped then opts.mapper = function(pl) return pl.team end else opts.on = "team" end
  local j = players:join(teams, opts)
  local log = {}
  j:sink(function(verb, row, old, info)
    log[#log + 1] = verb .. " " .. info.id .. " " .. runnel.format_value(row) .. " " .. runnel.format_value(old)
  end)
  return { teams = teams, players = players, j = j, log = log }
end

local function rows_of(rel)
  local out = {}
  for r in rel:rows() do out[#out + 1] = runnel.format_value(r) end
  table.sort(out)
  return out
end

local function random_change(t, rng, step)
  local null = runnel.null
  local op = rng(1, 12)
  if op <= 3 then
    local id = rng(1, 6)
    local row = { id = id, name = "t" .. id .. "." .. step, w = rng(1, 3) == 1 and null or rng(-4, 4) / 4,
                  ok = ({ true, false, null })[rng(1, 3)] }
    if op == 1 and t.teams:get(id) then t.teams:delete{ id = id } else t.teams:upsert(row) end
  else
    local id = rng(1, 30)
    if not t.players:get(id) then
      t.players:insert{ id = id, name = "p" .. id, team = rng(1, 4) == 1 and null or rng(1, 7),
                        tag = rng(1, 2) == 1 and null or ("\0\255" .. step) }
    elseif op == 4 then t.players:delete{ id = id }
    elseif op <= 7 then t.players:update{ id = id, score = rng(0, 3) }
    elseif op <= 9 then t.players:update{ id = id, team = rng(1, 5) == 1 and null or rng(1, 7) }
    elseif op == 10 then t.players:update{ id = id, name = "q" .. step }
    elseif op == 11 then t.players:update{ id = id, tag = null }
    else t.players:insert{ id = id, name = "dup" } end -- an existing key: the group fails
  end
end

local function copied(pl, t)
  return { pid = pl.id, pname = pl.name, score = pl.score, tag = pl.tag, tname = t and t.name, w = t and t.w,
           ok = t and t.ok }
end
local function copied_values(pl, t)
  return pl.id, pl.name, pl.score, pl.tag, t and t.name, t and t.w, t and t.ok
end
local function pass(v) return v end
local function called(pl, t)
  return { pid = pass(pl.id), pname = pl.name, score = pl.score, tag = pl.tag, tname = t and t.name,
           w = t and t.w, ok = t and t.ok }
end

describe("a joiner done in C", function()
  after_each(H.cleanup)

  for _, case in ipairs{ { "left", false }, { "inner", false }, { "left", true }, { "inner", true },
                         { "left", true, copied_values } } do
    local kind, mapped, copied = case[1], case[2], case[3] or copied
    it(("gives the rows and events of calling it (%s join, %s%s)"):format(kind, mapped and "mapper" or "on",
                                                                        case[3] and ", values" or ""), function()
      local dir = H.tmpdir()
      local a = runnel.open{ path = dir .. "/a", sync = false }
      local b = runnel.open{ path = dir .. "/b", sync = false }
      local ta, tb = build(a, copied, kind, mapped), build(b, called, kind, mapped)
      local function rng_of(seed) -- the same numbers for both pipelines
        local x = seed
        return function(lo, hi)
          x = (x * 1103515245 + 12345) % 2147483648
          return lo + (x >> 8) % (hi - lo + 1)
        end
      end
      local function run(t, p, group)
        local rng = rng_of(group * 31 + #kind + (mapped and 7 or 0))
        p:begin()
        local ok = pcall(function()
          for step = 1, 6 do random_change(t, rng, group * 10 + step) end
        end)
        if ok and group % 9 == 0 then ok = false end -- a group thrown away whole
        if ok then p:commit() else p:rollback() end
      end
      local n = calls_of(copied, function()
        for group = 1, 150 do
          run(ta, a, group)
          run(tb, b, group)
          if group % 25 == 0 then
            assert.same(rows_of(tb.j), rows_of(ta.j))
            assert.same(tb.log, ta.log)
          end
        end
      end)
      assert.equal(0, n)
      assert.is_true(#ta.log > 100)
      assert.same(rows_of(tb.j), rows_of(ta.j))
      assert.same(tb.log, ta.log)
      a:close()
      b:close()
    end)
  end

  it("takes a copies list that is not joiner.lua's as no copy (p:_join raised, leaking the declaration)", function()
    local p = runnel.open()
    local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"team","int", null = true}, key = "id" })
    local function j(l, t) return { pid = l.id, tname = t and t.name } end
    local cols = { { name = "pid", type = "int", null = false }, { name = "tname", type = "string", null = true } }
    for i, copies in ipairs{ { 1, 2 }, { {}, "x" }, { { out = 5, side = "a", col = {} }, {} } } do
      local rel = assert(p:_join(players, teams, "j" .. i, "left", { "team" }, nil, nil, j, cols, { "pid" }, nil, nil,
                                 copies))
      teams:upsert{ id = 1, name = "one" }
      players:upsert{ id = i, team = 1 }
      assert.same({ pid = i, tname = "one" }, rel:get(i))
    end
    p:close()
  end)

  it("is called when its copy would not give the declared columns", function()
    local p = runnel.open()
    local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"name","string"}, {"team","int", null = true}, key = "id" })
    local function j(pl, t) return { pid = pl.id, tname = t and t.name } end
    local declared = {
      { {"pid","int"}, {"tname","string"}, key = "pid" },                    -- tname not nullable: an error when no team
      { {"tname","string", null = true}, {"pid","int"}, key = "pid" },       -- another order
      { {"pid","float"}, {"tname","string", null = true}, key = "pid" },     -- another type
      { {"pid","int"}, {"tname","string", null = true, default = "-"}, key = "pid" }, -- a default
      { {"pid","int", null = true}, {"tname","string", null = true} },       -- no key
      { {"pid","int"}, {"tname","string", null = true}, {"more","int", null = true}, key = "pid" }, -- more columns
    }
    local joins = {}
    for i, cols in ipairs(declared) do
      joins[i] = players:join(teams, { on = "team", kind = "left", joiner = j, columns = cols, name = "j" .. i })
    end
    local done = players:join(teams, { on = "team", kind = "left", joiner = j, name = "done",
                                       columns = { {"pid","int"}, {"tname","string", null = true}, key = "pid" } })
    local n = calls_of(j, function()
      teams:insert{ id = 1, name = "one" }
      players:insert{ id = 5, name = "e", team = 1 }
    end)
    assert.equal(#declared, n) -- once for each join that calls it, none for `done`
    assert.same({ pid = 5, tname = "one" }, done:get(5))
    for i = 2, #declared do
      local rows = {}
      for r in joins[i]:rows() do rows[#rows + 1] = r end
      assert.same({ 5, "one" }, { rows[1].pid, rows[1].tname }, "join j" .. i)
    end
    local err = H.error_of(function() players:insert{ id = 6, name = "f" } end)
    assert.matches("j1", err)
    assert.matches("tname", err)
    p:close()
  end)

  it("is rebuilt when a state made by calling the joiner is opened with a copy, and the other way", function()
    local dir = H.tmpdir()
    local function open(joiner)
      local p = runnel.open{ path = dir }
      local t = build(p, joiner, "left", false)
      return p, t
    end
    local p, t = open(called)
    t.teams:insert{ id = 1, name = "one", w = 0.5, ok = true }
    t.players:insert{ id = 1, name = "a", team = 1 }
    t.players:insert{ id = 2, name = "b", team = 2 }
    p:close()
    p, t = open(copied)
    assert.same({ pid = 1, pname = "a", score = 0, tname = "one", w = 0.5, ok = true }, t.j:get(1))
    assert.same({ pid = 2, pname = "b", score = 0 }, t.j:get(2))
    t.teams:insert{ id = 2, name = "two" }
    t.teams:update{ id = 1, name = "uno" }
    assert.same({ "UPDATE 2 {pid=2, pname=b, score=0, tname=two} {pid=2, pname=b, score=0}",
                  "UPDATE 1 {ok=true, pid=1, pname=a, score=0, tname=uno, w=0.5} " ..
                  "{ok=true, pid=1, pname=a, score=0, tname=one, w=0.5}" }, t.log)
    p:close()
    p, t = open(called)
    assert.same({ pid = 1, pname = "a", score = 0, tname = "uno", w = 0.5, ok = true }, t.j:get(1))
    t.players:update{ id = 2, team = 1 }
    assert.same({ pid = 2, pname = "b", score = 0, tname = "uno", w = 0.5, ok = true }, t.j:get(2))
    p:close()
  end)
end)
