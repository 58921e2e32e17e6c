-- Join keys at the edges: composite on-keys of strings holding NUL bytes,
-- empty, short, long (> 40 bytes: not interned by Lua; > 400: a hashed fk
-- part; > 511: a right copy keyed by its part) and of ints given as floats
-- (1.0 finds 1), negative and extreme ints; mappers returning composite
-- keys as tables, with metamethods; Lua row tables with long column names
-- built at run time, unknown keys, junk and metatables. Every join equals
-- a recomputation in plain Lua after every group.
local runnel = require "runnel"
local H = require "helper"
local E = require "join_edges_helper"

local null = runnel.null

local STRINGS = {
  "", "\0", "a\0b", "a\0c", "a", "A",
  ("x"):rep(41), ("x"):rep(40) .. "y",                          -- just past Lua's interning
  ("p"):rep(400) .. "a" .. ("q"):rep(20), ("p"):rep(400) .. "b" .. ("q"):rep(20), -- one 400-byte prefix
  ("p"):rep(399), ("z"):rep(600), ("z"):rep(599) .. "\0",
}
local INTS = { 0, 1, -1, 2, math.maxinteger, math.mininteger, -4096 }

-- A fresh string with the bytes of s (a different object when s is long).
local function fresh(s)
  if #s == 0 then return s end
  return s:sub(1, 1) .. s:sub(2)
end

describe("composite on-keys", function()
  it("match the recomputation for NUL bytes, long strings, floats for ints and extreme ints", function()
    local p = runnel.open{ sync = false }
    local codes = p:table("codes", { {"s","string"}, {"n","int"}, {"label","string"}, key = {"s","n"} })
    local refs = p:table("refs", { {"id","int"}, {"s","string", null = true}, {"n","float", null = true}, key = "id" })
    local everything = codes:filter(function() return true end, "all_codes") -- a derived right side: a copy
    local function key_of(r)
      if r.s == nil or r.n == nil then return nil end
      return { r.s, r.n }
    end
    local function meta_key(r) -- the key's columns read by its metamethod, after the mapper returned
      return setmetatable({}, { __index = function(_, k) return r[k] end })
    end
    local rel = {
      on = refs:join(codes, { on = { "s", "n" }, kind = "left", name = "on" }),
      derived = refs:join(everything, { on = { "s", "n" }, kind = "left", name = "derived" }),
      mapped = refs:join(codes, { mapper = key_of, kind = "left", name = "mapped" }),
      meta = refs:join(codes, { mapper = function(r) if r.s == nil or r.n == nil then return nil end return meta_key(r) end,
                                kind = "inner", name = "meta",
                                joiner = function(l, c) return l.id, c.label, c.n end,
                                columns = { {"id","int"}, {"label","string"}, {"cn","int"}, key = "id" } }),
    }
    local follow = {}
    for name, r in pairs(rel) do follow[name] = E.follow(r) end
    local function expected(name)
      local labels = {}
      for c in codes:rows() do labels[c.s .. "\1" .. c.n] = c end
      local out = {}
      for r in refs:rows() do
        local n = r.n and math.tointeger(r.n)
        local c = r.s and n and labels[r.s .. "\1" .. n]
        if name == "meta" then
          if c then out[#out + 1] = { id = r.id, label = c.label, cn = c.n } end
        else
          local right = name == "derived" and "all_codes" or "codes" -- the clash rename
          out[#out + 1] = { id = r.id, s = r.s, n = r.n, [right .. ".s"] = c and c.s, [right .. ".n"] = c and c.n,
                            label = c and c.label }
        end
      end
      return out
    end
    local function check(label)
      for name, r in pairs(rel) do
        local names = follow[name].names
        follow[name].settle(label .. " " .. name)
        local want = E.map_lines(expected(name), names)
        assert.same(want, follow[name].lines(), label .. ": " .. name .. " (events)")
        assert.same(want, E.rows_lines(r, names), label .. ": " .. name .. " (rows)")
      end
    end
    local state = 7
    local function rnd(n) state = (state * 1103515245 + 12345) % 2147483648; return (state >> 16) % n + 1 end
    local function pick_n(as_float)
      local n = INTS[rnd(#INTS)]
      if as_float and n > -2 ^ 53 and n < 2 ^ 53 then return n + 0.0 end -- 1.0 must find 1
      return n
    end
    for group = 1, 120 do
      p:begin()
      local ok = true
      for _ = 1, rnd(6) do
        local op = rnd(8)
        ok = pcall(function()
          if op <= 3 then
            local s, n = fresh(STRINGS[rnd(#STRINGS)]), pick_n(false)
            if rnd(4) == 1 then codes:delete{ s = s, n = n }
            else codes:upsert{ s = s, n = n, label = "L" .. group .. "." .. rnd(9) } end
          elseif op <= 6 then
            local s = rnd(8) == 1 and null or fresh(STRINGS[rnd(#STRINGS)])
            refs:upsert{ id = rnd(30), s = s, n = rnd(8) == 1 and null or pick_n(rnd(2) == 1) }
          elseif op == 7 then
            refs:delete{ id = rnd(30) }
          else
            refs:update{ id = rnd(30), n = 0.5 } -- not an int: refused, the group rolled back
          end
        end)
        if not ok then break end
      end
      if ok then
        if rnd(7) == 1 then p:rollback() else p:commit() end
      end
      assert.is_false(p:in_group())
      check("group " .. group)
    end
    assert.is_true(#follow.on.lines() > 10)
    assert.is_true(#follow.meta.lines() > 3)
    p:close()
  end)

  it("refuses a float that is not an int with the join's and the column's names, rolling back", function()
    local p = runnel.open()
    local codes = p:table("codes", { {"s","string"}, {"n","int"}, key = {"s","n"} })
    local refs = p:table("refs", { {"id","int"}, {"s","string"}, {"n","float"}, key = "id" })
    refs:join(codes, { on = { "s", "n" }, name = "rc" })
    refs:insert{ id = 1, s = "a", n = -3.0 }
    assert.equal('rc: column "n" of refs (on) cannot be a key of codes: column "n": expected int, got number -3.5',
                 H.error_of(refs.update, refs, { id = 1, n = -3.5 }))
    assert.equal(-3.0, refs:get(1).n)
    p:close()
  end)
end)

describe("Lua row tables", function()
  local PREFIX = ("a_column_name_longer_than_forty_bytes_"):rep(2)
  local function long(i) return PREFIX .. tostring(i) end -- a new string object every call

  it("find long column names built at run time, in any key order, through joins and joiners", function()
    local p = runnel.open()
    local right = p:table("right", { {long(1),"int"}, {long(2),"string"}, key = long(1) })
    local left = p:table("left", { {"id","int"}, {long(3),"int", null = true}, {"short","string", default = "d"},
                                   key = "id" })
    local j = left:join(right, { on = long(3), kind = "left" })
    local jj = left:join(right, { on = long(3), kind = "left", name = "jj",
      joiner = function(l, r)
        local out = { [long(4)] = l.id }
        out[long(5)] = r and r[long(2)]
        return out
      end,
      columns = { {long(4),"int"}, {long(5),"string", null = true}, key = long(4) } })
    local fj = E.follow(jj)
    for i = 1, 5 do right:insert{ [long(1)] = i, [long(2)] = "r" .. i } end
    for i = 1, 20 do
      local row = {}
      if i % 2 == 0 then row.id = i; row[long(3)] = i % 6 else row[long(3)] = i % 6; row.id = i end
      if i % 3 == 0 then row.short = "s" .. i end
      left:insert(row)
    end
    left:update{ [long(3)] = 2, id = 4 }
    right:update{ [long(1)] = 2, [long(2)] = "two" }
    for i = 1, 20 do
      local l = left:get(i)
      local want = i == 4 and 2 or i % 6
      assert.equal(want, l[long(3)])
      assert.equal(i % 3 == 0 and "s" .. i or "d", l.short)
      local r = j:get(i)
      assert.equal(want >= 1 and want <= 5 and (want == 2 and "two" or "r" .. want) or nil, r[long(2)])
      assert.same({ [long(4)] = i, [long(5)] = r[long(2)] }, jj:get(i))
    end
    fj.settle()
    assert.equal(20, #fj.lines())
    p:close()
  end)

  it("name the relation and the column for unknown keys, junk keys and bad values, and roll back", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {long(1),"int", default = 0}, key = "id" })
    t:insert{ id = 1 }
    assert.matches('^t: unknown column "nope"', H.error_of(t.insert, t, { id = 2, nope = 1 }))
    assert.matches('^t: unknown column "' .. long(2) .. '"', H.error_of(t.insert, t, { id = 2, [long(2)] = 1 }))
    assert.equal("t: column names are strings, got number", H.error_of(t.insert, t, { id = 2, [1] = "x" }))
    assert.equal("t: column names are strings, got boolean", H.error_of(t.insert, t, { id = 2, [true] = "x" }))
    assert.matches('^t: column "' .. long(1) .. '": expected int, got string',
                   H.error_of(t.insert, t, { id = 2, [long(1)] = "x" }))
    assert.equal(1, t:count())
    assert.is_nil(t:get(2))
    -- a good row after the bad ones, its keys in another order
    t:insert{ [long(1)] = 5, id = 2 }
    assert.same({ id = 2, [long(1)] = 5 }, t:get(2))
    p:close()
  end)

  it("read a row table's own fields, whatever its metatable says", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"v","string", default = "plain"}, key = "id" })
    local mt = { __index = function() error("__index must not run") end,
                 __pairs = function() error("__pairs must not run") end }
    t:insert(setmetatable({ id = 1, v = "own" }, mt))
    t:insert(setmetatable({ id = 2 }, mt))
    assert.same({ id = 1, v = "own" }, t:get(1))
    assert.same({ id = 2, v = "plain" }, t:get(2))
    p:close()
  end)

  it("refuses a joiner's unknown result column by the join's name", function()
    local p = runnel.open()
    local teams, players = E.tables(p)
    players:join(teams, { on = "team_id", kind = "left", name = "jn",
      joiner = function(l) return { pid = l.id, [long(7)] = 1 } end, columns = { {"pid","int"}, key = "pid" } })
    local err = H.error_of(players.insert, players, { id = 1, name = "a" })
    assert.matches("jn", err, 1, true)
    assert.matches('unknown column "' .. long(7) .. '"', err, 1, true)
    assert.equal(0, players:count())
    p:close()
  end)
end)

describe("mappers and their memo", function()
  -- A mapper whose reads depend on the values it reads, one whose key is
  -- read through a metamethod after it returned, and one that fails on
  -- some rows: the join equals the recomputation after every group, and
  -- the failing rows join once the mapper takes them.
  it("give the mapper's keys whatever it reads, when, and after failures", function()
    local p = runnel.open{ sync = false }
    local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
    local items = p:table("items", { {"id","int"}, {"a","int"}, {"b","int", null = true}, {"c","int", null = true},
                                     {"note","string", default = ""}, key = "id" })
    local refuse = {} -- a values the failing mapper refuses, for now
    local function by_value(r) if r.a > 5 then return r.c end return r.b end
    local mappers = {
      by_value = by_value,
      late = function(r) -- a one-column key as a table whose field is read by its metamethod
        return setmetatable({}, { __index = function(_, k) if k == "id" then return by_value(r) end end })
      end,
      failing = function(r)
        if refuse[r.a] then error("refused a=" .. r.a) end
        return by_value(r)
      end,
    }
    local joins, follow = {}, {}
    for name, fn in pairs(mappers) do
      joins[name] = items:join(teams, { mapper = fn, kind = "left", name = name,
        joiner = function(l, t) return l.id, l.note, t and t.name end,
        columns = { {"id","int"}, {"note","string"}, {"tname","string", null = true}, key = "id" } })
      follow[name] = E.follow(joins[name])
    end
    local function expected()
      local out = {}
      for r in items:rows() do
        local k = by_value(r)
        local t = k and teams:get(k)
        out[#out + 1] = { id = r.id, note = r.note, tname = t and t.name }
      end
      return out
    end
    local function check(label)
      local want = E.map_lines(expected(), follow.by_value.names)
      for name, j in pairs(joins) do
        follow[name].settle(label)
        assert.same(want, follow[name].lines(), label .. ": " .. name .. " (events)")
        assert.same(want, E.rows_lines(j, follow[name].names), label .. ": " .. name .. " (rows)")
      end
    end
    for t = 1, 6 do teams:insert{ id = t, name = "t" .. t } end
    local state = 3
    local function rnd(n) state = (state * 1103515245 + 12345) % 2147483648; return (state >> 16) % n + 1 end
    local function val() local v = rnd(8); return v == 8 and null or v end
    local failures = 0
    for group = 1, 300 do
      refuse = {}
      if rnd(2) == 1 then for _ = 1, 3 do refuse[rnd(10)] = true end end
      p:begin()
      local ok, err = true, nil
      for _ = 1, rnd(5) do
        local id, op = rnd(25), rnd(9)
        ok, err = pcall(function()
          if op <= 3 then items:upsert{ id = id, a = rnd(10), b = val(), c = val(), note = "n" .. group }
          elseif op == 4 then items:update{ id = id, a = rnd(10) }
          elseif op == 5 then items:update{ id = id, b = val() }
          elseif op == 6 then items:update{ id = id, c = val() }
          elseif op == 7 then items:update{ id = id, note = "m" .. group }
          elseif op == 8 then items:delete{ id = id }
          else teams:upsert{ id = rnd(6), name = "t" .. group } end
        end)
        if not ok then break end
      end
      if not ok and tostring(err):find("refused", 1, true) then
        failures = failures + 1
        assert.matches("failing: mapper: .*refused a=%d+", tostring(err))
      end
      if p:in_group() then p:commit() end
      check("group " .. group)
    end
    assert.is_true(failures > 5, "only " .. failures .. " groups failed in the mapper")
    p:close()
  end)
end)

describe("long right keys fanning out", function()
  -- Keys past 400 bytes sit in the index under their first 400 bytes and a
  -- hash: a fan-out checks each left row's key against the row itself
  -- (through the mapper, or its memo, for a mapped join).
  it("reach exactly the left rows of their key, through on and a mapper", function()
    local p = runnel.open()
    local codes = p:table("codes", { {"code","string"}, {"label","string"}, key = "code" })
    local refs = p:table("refs", { {"id","int"}, {"code","string", null = true}, {"x","int", default = 0}, key = "id" })
    local calls = 0
    local on = refs:join(codes, { on = "code", kind = "left", name = "on" })
    local mapped = refs:join(codes, { kind = "left", name = "mapped",
      mapper = function(r) calls = calls + 1; return r.code end,
      joiner = function(l, c) return l.id, c and c.label end,
      columns = { {"id","int"}, {"label","string", null = true}, key = "id" } })
    local fo, fm = E.follow(on), E.follow(mapped)
    local prefix = ("k"):rep(400)
    local keys = { prefix .. "a", prefix .. "b", prefix, prefix .. "a\0", ("k"):rep(700) }
    local function check(label)
      local labels = {}
      for c in codes:rows() do labels[c.code] = c.label end
      local want_on, want_m = {}, {}
      for r in refs:rows() do
        local l = r.code and labels[r.code]
        want_on[#want_on + 1] = { id = r.id, code = r.code, x = r.x, ["codes.code"] = l and r.code, label = l }
        want_m[#want_m + 1] = { id = r.id, label = l }
      end
      fo.settle(label)
      fm.settle(label)
      assert.same(E.map_lines(want_on, fo.names), fo.lines(), label .. ": on")
      assert.same(E.map_lines(want_m, fm.names), fm.lines(), label .. ": mapped")
      assert.same(E.map_lines(want_on, fo.names), E.rows_lines(on, fo.names), label .. ": on rows")
    end
    p:batch(function()
      for i = 1, 200 do refs:insert{ id = i, code = fresh(keys[i % #keys + 1]) } end
      refs:insert{ id = 201, code = null }
    end)
    check("seeded")
    for round = 1, 3 do
      for k, key in ipairs(keys) do
        codes:upsert{ code = fresh(key), label = "L" .. round .. "." .. k }
        check(("round %d key %d"):format(round, k))
      end
      refs:update{ id = round, code = fresh(keys[round + 1]) }
      refs:update{ id = 10 + round, x = round } -- the key's bytes stay
      codes:delete{ code = fresh(keys[round]) }
      check("round " .. round .. " moved")
    end
    assert.is_true(calls > 0)
    p:close()
  end)
end)

describe("outer joins on composite keys", function()
  it("match the recomputation, right-only rows included, through a joiner of references and a select", function()
    local p = runnel.open()
    local a = p:table("a", { {"s","string"}, {"n","int"}, {"x","string", null = true}, key = { "s", "n" } })
    local b = p:table("b", { {"s","string"}, {"n","int"}, {"y","int", null = true}, key = { "s", "n" } })
    local whole = a:join(b, { on = { "s", "n" }, kind = "outer", name = "whole" })
    local refs = a:join(b, { on = { "s", "n" }, kind = "outer", name = "refs",
                             joiner = { ks = "s", kn = "n", y = "y", x = "x" } })
    local sel = a:join(b, { on = { "s", "n" }, kind = "outer", name = "pre_sel" })
      :select({ "n", "y", "s" }, "outer_sel")
    local f = { whole = E.follow(whole), refs = E.follow(refs), sel = E.follow(sel) }
    local function check(label)
      local rows = {}
      for r in a:rows() do rows[r.s .. "\1" .. r.n] = { s = r.s, n = r.n, x = r.x } end
      for r in b:rows() do
        local k = r.s .. "\1" .. r.n
        rows[k] = rows[k] or { s = r.s, n = r.n }
        rows[k].y, rows[k].b = r.y, true
      end
      local want = { whole = {}, refs = {}, sel = {} }
      for _, r in pairs(rows) do
        want.whole[#want.whole + 1] = { s = r.s, n = r.n, x = r.x, ["b.s"] = r.b and r.s, ["b.n"] = r.b and r.n, y = r.y }
        want.refs[#want.refs + 1] = { ks = r.s, kn = r.n, y = r.y, x = r.x }
        want.sel[#want.sel + 1] = { n = r.n, y = r.y, s = r.s }
      end
      local rels = { whole = whole, refs = refs, sel = sel }
      for name, fl in pairs(f) do
        fl.settle(label .. " " .. name)
        local lines = E.map_lines(want[name], fl.names)
        assert.same(lines, fl.lines(), label .. ": " .. name)
        assert.same(lines, E.rows_lines(rels[name], fl.names), label .. ": " .. name .. " rows")
      end
    end
    local state = 5
    local function rnd(n) state = (state * 1103515245 + 12345) % 2147483648; return (state >> 16) % n + 1 end
    local S = { "", "\0", "a", ("w"):rep(45), ("w"):rep(44) .. "\0" }
    for group = 1, 150 do
      p:begin()
      for _ = 1, rnd(5) do
        local s, n = fresh(S[rnd(#S)]), rnd(3) - 2
        local op = rnd(6)
        if op == 1 then a:upsert{ s = s, n = n, x = rnd(3) == 1 and null or "x" .. group }
        elseif op == 2 then b:upsert{ s = s, n = n, y = rnd(3) == 1 and null or group }
        elseif op == 3 then if a:get{ s = s, n = n } then a:delete{ s = s, n = n } end
        elseif op == 4 then if b:get{ s = s, n = n } then b:delete{ s = s, n = n } end
        elseif op == 5 then if a:get{ s = s, n = n } then a:update{ s = s, n = n, x = "u" .. group } end
        elseif b:get{ s = s, n = n } then b:update{ s = s, n = n, y = -group } end
      end
      if rnd(6) == 1 then p:rollback() else p:commit() end
      check("group " .. group)
    end
    assert.is_true(#f.whole.lines() > 5)
    p:close()
  end)
end)

describe("a joiner's table rows", function()
  local LONG = ("result_column_name_past_forty_bytes_"):rep(2)
  -- Built while the join is declared over existing rows (no relinfo yet),
  -- then per change: short names by their very strings, long ones by bytes.
  it("are read alike while the join is built from existing rows and after", function()
    local p = runnel.open()
    local teams, players = E.tables(p)
    teams:insert{ id = 1, name = "one" }
    for i = 1, 40 do players:insert{ id = i, name = "p" .. i, team_id = i % 3 } end
    local function joiner(l, t)
      local row = { pid = l.id }
      row[LONG .. "x"] = t and t.name -- a new string object each call
      if l.id % 2 == 0 then row.score = l.score end
      return row
    end
    local cols = { {"pid","int"}, {LONG .. "x","string", null = true}, {"score","int", default = -1}, key = "pid" }
    local j = players:join(teams, { on = "team_id", kind = "left", joiner = joiner, columns = cols })
    local f = E.follow(j)
    local function check(label)
      local want = {}
      for pl in players:rows() do
        local t = pl.team_id and teams:get(pl.team_id)
        want[#want + 1] = { pid = pl.id, [LONG .. "x"] = t and t.name, score = pl.id % 2 == 0 and pl.score or -1 }
      end
      f.settle(label)
      assert.same(E.map_lines(want, f.names), E.rows_lines(j, f.names), label .. " rows")
      if label ~= "built" then assert.same(E.map_lines(want, f.names), f.lines(), label .. " events") end
    end
    check("built")
    for r, id in j:rows() do f.rows[id] = E.line(r, f.names) end -- the build emitted nothing
    teams:insert{ id = 2, name = "two" }
    teams:update{ id = 1, name = "uno" }
    players:update{ id = 4, score = 9 }
    players:update{ id = 5, score = 9 }
    check("changed")
    p:close()
  end)
end)
