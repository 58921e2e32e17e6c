-- Aggregates at their edges against a plain Lua recomputation (what a SQL
-- database gives): AGG-1 (each group's row is the aggregate of its rows,
-- nulls skipped), AGG-2 (verbs), AGG-4 (int sums exact or refused).
local runnel = require "runnel"
local H = require "helper"
local null = runnel.null

-- Values as text that tells ints, floats, NaN and big ints apart exactly.
local function fmt(v)
  if math.type(v) == "integer" then return "int:" .. v end
  if type(v) == "number" then
    if v ~= v then return "nan" end
    return ("float:%.17g"):format(v == 0 and 0.0 or v) -- -0.0 and 0.0 are one value (one key)
  end
  if type(v) == "string" then return ("%q"):format(v) end
  return tostring(v)
end

-- A row's columns as sorted "name=value" text.
local function text(r)
  local out = {}
  for k, v in pairs(r) do out[#out + 1] = k .. "=" .. fmt(v) end
  table.sort(out)
  return table.concat(out, " ")
end

-- rows by id -> sorted list of their texts (the ids left out)
local function texts(by_id)
  local out = {}
  for _, r in pairs(by_id) do out[#out + 1] = text(r) end
  table.sort(out)
  return out
end

local function rows_of(rel)
  local out = {}
  for r, id in rel:rows() do out[id] = r end
  return out
end

describe("min and max of values longer than an LMDB key", function()
  local p
  after_each(function() if p then p:close() end p = nil end)

  it("gives the least and greatest string and bytes value, however long, through deletes", function()
    p = runnel.open{ sync = false }
    local t = p:table("t", { {"id","int"}, {"g","string"}, {"s","string", null = true}, {"b","bytes", null = true},
                             key = "id" })
    local a = t:aggregate{ by = "g", lo = runnel.min("s"), hi = runnel.max("s"), blo = runnel.min("b"),
                           bhi = runnel.max("b") }
    local long = string.rep("x", 600)
    t:insert{ id = 1, g = "a", s = long .. "b", b = long .. "\0b" }
    t:insert{ id = 2, g = "a", s = long .. "a", b = long .. "\0a" }
    t:insert{ id = 3, g = "a", s = long .. "c", b = long }
    t:insert{ id = 4, g = "a", s = "z", b = "z" }
    local r = a:get("a")
    assert.equal(long .. "a", r.lo)
    assert.equal("z", r.hi)
    assert.equal(long, r.blo)
    assert.equal("z", r.bhi)
    t:delete{ id = 4 }
    r = a:get("a")
    assert.equal(long .. "c", r.hi)
    assert.equal(long .. "\0b", r.bhi)
    t:delete{ id = 2 }
    t:update{ id = 3, s = null }
    r = a:get("a")
    assert.equal(long .. "b", r.lo)
    assert.equal(long .. "b", r.hi)
  end)

  it("follows random long values beside long group keys, as a recomputation gives them, also from attach", function()
    local dir = H.tmpdir()
    p = runnel.open{ path = dir .. "/st", sync = false }
    local t = p:table("t", { {"id","int"}, {"g","string"}, {"s","string", null = true}, {"b","bytes", null = true},
                             key = "id" })
    local a = t:aggregate{ name = "a", by = "g", lo = runnel.min("s"), hi = runnel.max("s"), blo = runnel.min("b"),
                           bhi = runnel.max("b"), n = runnel.count("s") }
    local rows = {}
    local function expected()
      local exp = {}
      for _, r in pairs(rows) do
        local e = exp[r.g] or { g = r.g, n = 0 }
        exp[r.g] = e
        if r.s then
          e.n = e.n + 1
          e.lo = (not e.lo or r.s < e.lo) and r.s or e.lo
          e.hi = (not e.hi or r.s > e.hi) and r.s or e.hi
        end
        if r.b then
          e.blo = (not e.blo or r.b < e.blo) and r.b or e.blo
          e.bhi = (not e.bhi or r.b > e.bhi) and r.b or e.bhi
        end
      end
      return texts(exp)
    end
    math.randomseed(3)
    local long = string.rep("x", 700)
    local groups = { "a", string.rep("g", 300), string.rep("h", 480) } -- 480: a short room beside the key
    local function value()
      local r = math.random()
      if r < 0.1 then return null end
      if r < 0.3 then return string.rep("x", math.random(0, 20)) end
      return long:sub(1, math.random(470, 700)) .. string.char(math.random(0, 3)) .. (math.random() < 0.5 and "" or "\0z")
    end
    for step = 1, 400 do
      local id = math.random(1, 25)
      if rows[id] and math.random() < 0.4 then
        t:delete{ id = id }
        rows[id] = nil
      else
        local r = { id = id, g = groups[math.random(#groups)], s = value(), b = value() }
        t:upsert(r)
        rows[id] = { g = r.g, s = r.s ~= null and r.s or nil, b = r.b ~= null and r.b or nil }
      end
      assert.same(expected(), texts(rows_of(a)), "after step " .. step)
    end
    p:flush()
    local at = runnel.attach(dir .. "/st", "a")
    local seen = {}
    for r, id in at:rows() do seen[id] = r end
    at:close()
    assert.same(expected(), texts(seen))
  end)

  it("keeps values beside a group key that leaves them no room as it is (the key is stored hashed, longkey.h)", function()
    p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"g","string"}, {"s","string"}, key = "id" })
    local a = t:aggregate{ name = "a", by = "g", hi = runnel.max("s") }
    t:insert{ id = 1, g = string.rep("g", 500), s = string.rep("s", 40) }
    t:insert{ id = 2, g = string.rep("g", 500), s = string.rep("s", 41) }
    assert.equal(string.rep("s", 41), a:get(string.rep("g", 500)).hi)
    t:delete{ id = 2 }
    assert.equal(string.rep("s", 40), a:get(string.rep("g", 500)).hi)
  end)
end)

-- An exact int sum: { hi, lo } is hi * 2^32 + lo, so a sum past int64 is seen.
local function big_add(b, v)
  local hi = v >> 32
  if v < 0 then hi = hi - (1 << 32) end -- >> is logical
  b.hi, b.lo = b.hi + hi, b.lo + (v & 0xffffffff)
end
local function big_value(b) -- nil past int64
  local hi, lo = b.hi + b.lo // (1 << 32), b.lo % (1 << 32)
  if hi < -(1 << 31) or hi >= (1 << 31) then return nil end
  return (hi << 32) | lo
end

-- Float values whose double sums are exact, and the non-finite ones.
local FLOATS = { -0.0, 0.0, 0.5, -1.25, 3.0, 1024.0, 1 / 0, -1 / 0, 0 / 0 }
local BIG = { math.maxinteger, math.mininteger, math.maxinteger - 1, 1 << 62, -(1 << 62) }

-- The float sum of xs as AGG-4 has it: NaN with a NaN or both infinities.
local function float_sum(xs)
  local s, pinf, ninf, nan = 0.0, false, false, false
  for _, x in ipairs(xs) do
    if x ~= x then nan = true elseif x == 1 / 0 then pinf = true elseif x == -1 / 0 then ninf = true else s = s + x end
  end
  if nan or (pinf and ninf) then return 0 / 0 end
  return pinf and 1 / 0 or ninf and -1 / 0 or s
end

local function min_of(a, b) if a == nil then return b end return b < a and b or a end
local function max_of(a, b) if a == nil then return b end return b > a and b or a end

-- The oracle: each relation's rows recomputed from the source rows.
local function expect_A(rows) -- by g1, g2; nil when an int sum leaves int64
  local groups = {}
  for _, r in pairs(rows) do
    local key = fmt(r.g1) .. "|" .. fmt(r.g2)
    local e = groups[key]
    if not e then
      e = { row = { g1 = r.g1, g2 = r.g2 == 0 and 0.0 or r.g2, n = 0, nv = 0 }, sv = { hi = 0, lo = 0 },
            sw = { hi = 0, lo = 0 }, nw = 0, fs = {} }
      groups[key] = e
    end
    local o = e.row
    o.n = o.n + 1
    if r.v then
      o.nv = o.nv + 1
      big_add(e.sv, r.v)
      o.lo, o.hi = min_of(o.lo, r.v), max_of(o.hi, r.v)
    end
    if r.w then e.nw = e.nw + 1; big_add(e.sw, r.w) end
    if r.f then e.fs[#e.fs + 1] = r.f end
    if r.s then o.smin, o.smax = min_of(o.smin, r.s), max_of(o.smax, r.s) end
  end
  local out = {}
  for _, e in pairs(groups) do
    local o = e.row
    if o.nv > 0 then o.sv = big_value(e.sv); o.av = o.sv / o.nv end
    if e.nw > 0 then
      o.sw = big_value(e.sw)
      if o.sw == nil then return nil end
    end
    if #e.fs > 0 then o.sf = float_sum(e.fs); o.af = o.sf / #e.fs end
    out[#out + 1] = o
  end
  return out
end

local function expect_B(rows, dims) -- over items left join dims, by region
  local groups = {}
  for _, r in pairs(rows) do
    local region = r.dim and dims[r.dim] and dims[r.dim].region
    local key = fmt(region)
    local o = groups[key] or { region = region, n = 0, nr = 0 }
    groups[key] = o
    o.n = o.n + 1
    if region then o.nr = o.nr + 1 end
    if r.v then o.sv = (o.sv or 0) + r.v; o.lo, o.hi = min_of(o.lo, r.v), max_of(o.hi, r.v) end
  end
  return groups
end

local function expect_W(rows) -- by g1, hopping(10, 4) over the int ts
  local groups = {}
  for _, r in pairs(rows) do
    for k = (r.ts - 10) // 4 + 1, r.ts // 4 do
      local key = fmt(r.g1) .. "@" .. k
      local o = groups[key] or { g1 = r.g1, window_start = 4 * k, window_end = 4 * k + 10, n = 0 }
      groups[key] = o
      o.n = o.n + 1
      if r.v then o.sv = (o.sv or 0) + r.v; o.hi = max_of(o.hi, r.v) end
    end
  end
  return groups
end

local function expect_F(rows) -- hopping(2.5, 1.0) over the float ft: not a multiple of the step
  local groups = {}
  for _, r in pairs(rows) do
    for k = math.floor(r.ft) - 2, math.floor(r.ft) do
      if k <= r.ft and r.ft < k + 2.5 then
        local o = groups[k] or { window_start = k * 1.0, window_end = k + 2.5, n = 0 }
        groups[k] = o
        o.n = o.n + 1
        if r.v then o.lo = min_of(o.lo, r.v) end
      end
    end
  end
  return groups
end

local function expect_T(rows, id_of) -- top 3 by g1, order v desc then s asc (nulls last), then row id
  local by = {}
  for _, r in pairs(rows) do
    local key = fmt(r.g1)
    by[key] = by[key] or {}
    table.insert(by[key], r)
  end
  local function before(x, y, c, desc)
    if x[c] == y[c] then return nil end
    if x[c] == nil or y[c] == nil then return y[c] == nil end
    if desc then return x[c] > y[c] end
    return x[c] < y[c]
  end
  local out = {}
  for _, list in pairs(by) do
    table.sort(list, function(x, y)
      local b = before(x, y, "v", true)
      if b == nil then b = before(x, y, "s", false) end
      if b == nil then b = id_of(x.id) < id_of(y.id) end
      return b
    end)
    for i = 1, math.min(3, #list) do
      local o = {}
      for k, v in pairs(list[i]) do o[k] = v end
      o.rank = i
      out[#out + 1] = o
    end
  end
  return out
end

describe("group-by aggregates under random groups", function()
  after_each(function() H.cleanup() end)

  -- One run: seeded groups of inserts, patches, upserts, deletes of items
  -- and of the dims a left join reads, some rolled back, some failing on an
  -- int sum past int64; after every group (and at some changes inside one)
  -- each relation equals its recomputation, and a replica built from its
  -- committed verbs equals its rows. With a path, the state is closed and
  -- reopened every 40 groups and read through attach every 20.
  local function run(seed, ngroups, path)
    math.randomseed(seed)
    local p, items, dims
    local rels, replica, pending = {}, {}, {}
    local function declare()
      p = runnel.open(path and { path = path, sync = false } or { sync = false })
      items = p:table("items", { {"id","int"}, {"g1","int", null = true}, {"g2","float"}, {"dim","int", null = true},
        {"v","int", null = true}, {"w","int", null = true}, {"f","float", null = true}, {"s","string", null = true},
        {"ts","int"}, {"ft","float"}, key = "id" })
      dims = p:table("dims", { {"id","int"}, {"region","string", null = true}, key = "id" })
      rels.A = items:aggregate{ name = "A", by = { "g1", "g2" }, n = runnel.count(), nv = runnel.count("v"),
        sv = runnel.sum("v"), lo = runnel.min("v"), hi = runnel.max("v"), av = runnel.avg("v"), sw = runnel.sum("w"),
        sf = runnel.sum("f"), af = runnel.avg("f"), smin = runnel.min("s"), smax = runnel.max("s") }
      rels.B = items:join(dims, { on = "dim", kind = "left" }):aggregate{ name = "B", by = "region",
        n = runnel.count(), sv = runnel.sum("v"), hi = runnel.max("v"), lo = runnel.min("v"), nr = runnel.count("region") }
      rels.W = items:aggregate{ name = "W", by = "g1", window = runnel.hopping(10, 4, "ts"), n = runnel.count(),
        sv = runnel.sum("v"), hi = runnel.max("v") }
      rels.F = items:aggregate{ name = "F", window = runnel.hopping(2.5, 1.0, "ft"), n = runnel.count(),
        lo = runnel.min("v") }
      rels.T = items:top{ name = "T", n = 3, by = "g1", order = { {"v", "desc"}, {"s", "asc"} } }
      rels.AT = rels.A:top{ name = "AT", n = 2, by = "g2", order = { {"sv", "desc"}, {"lo", "asc"} } }
      for name, rel in pairs(rels) do
        replica[name] = replica[name] or {}
        local function add(e) pending[#pending + 1] = e end
        rel:sink{
          insert = function(row, info) add{ name, "INSERT", info.id, row } end,
          update = function(row, old, info)
            assert(text(row) ~= text(old), name .. ": an UPDATE that changes nothing")
            add{ name, "UPDATE", info.id, row }
          end,
          delete = function(_, info) add{ name, "DELETE", info.id } end,
          rollback = function() pending = {} end,
          commit = function()
            for _, e in ipairs(pending) do
              local rep = replica[e[1]]
              assert(e[2] == "INSERT" and rep[e[3]] == nil or e[2] ~= "INSERT" and rep[e[3]] ~= nil,
                     e[1] .. ": " .. e[2] .. " of id " .. e[3])
              rep[e[3]] = e[4]
            end
            pending = {}
          end }
      end
    end
    declare()
    local rows, drows = {}, {}
    local function copy(t) local c = {} for k, v in pairs(t) do c[k] = v end return c end
    local function copies(t) local c = {} for k, v in pairs(t) do c[k] = copy(v) end return c end
    local function check(when)
      local id_of = function(id) return items:id_of(id) end
      assert.same(texts(expect_A(rows)), texts(rows_of(rels.A)), "A " .. when)
      assert.same(texts(expect_B(rows, drows)), texts(rows_of(rels.B)), "B " .. when)
      assert.same(texts(expect_W(rows)), texts(rows_of(rels.W)), "W " .. when)
      assert.same(texts(expect_F(rows)), texts(rows_of(rels.F)), "F " .. when)
      assert.same(texts(expect_T(rows, id_of)), texts(rows_of(rels.T)), "T " .. when)
    end
    local function value(p_null, v) if math.random() < p_null then return null end return v end
    local function new_row(id)
      return { id = id, g1 = value(0.2, math.random(1, 3)), g2 = ({ -0.0, 0.0, 1.5, -1 / 0 })[math.random(4)],
        dim = value(0.2, math.random(1, 5)), v = value(0.2, math.random(-5, 5)),
        w = value(0.2, math.random() < 0.1 and BIG[math.random(#BIG)] or math.random(-3, 3)),
        f = value(0.2, FLOATS[math.random(#FLOATS)]), s = value(0.2, ({ "a", "b", "", "b\0c", "ba" })[math.random(5)]),
        ts = math.random(-30, 30), ft = math.random(-40, 40) / 4 }
    end
    local function plain(r) local o = {} for k, v in pairs(r) do if v ~= null then o[k] = v end end return o end
    local outcomes = { ok = 0, failed = 0, rolled = 0 }
    for gi = 1, ngroups do
      local saved_rows, saved_drows = copies(rows), copies(drows)
      local failed = false
      p:begin()
      for ci = 1, math.random(1, 12) do
        local call
        local r = math.random()
        if r < 0.15 then
          local id = math.random(1, 5)
          local region = value(0.3, ({ "n", "s", "e\0x", "" })[math.random(4)])
          if drows[id] and math.random() < 0.3 then
            call = function() dims:delete{ id = id } end
            drows[id] = nil
          elseif drows[id] then
            call = function() dims:update{ id = id, region = region } end
            drows[id] = plain{ id = id, region = region }
          else
            call = function() dims:insert{ id = id, region = region } end
            drows[id] = plain{ id = id, region = region }
          end
        else
          local id = math.random(1, 40)
          local row = new_row(id)
          if not rows[id] then
            call = function() items:insert(row) end
            rows[id] = plain(row)
          elseif r < 0.45 then -- a patch of some columns
            for _, c in ipairs{ "g1", "g2", "dim", "v", "w", "f", "s", "ts", "ft" } do
              if math.random() < 0.5 then row[c] = nil end
            end
            call = function() items:update(row) end
            local now = copy(rows[id])
            for k, v in pairs(row) do now[k] = v ~= null and v or nil end
            rows[id] = now
          elseif r < 0.6 then
            call = function() items:upsert(row) end
            rows[id] = plain(row)
          else
            call = function() items:delete{ id = id } end
            rows[id] = nil
          end
        end
        local overflows = expect_A(rows) == nil
        local ok, err = pcall(call)
        if overflows then
          assert.is_false(ok, "an int sum past int64 was taken")
          assert.matches('A: sum "sw" of column "w" overflows 64 bits', tostring(err), 1, true)
          assert.is_false(p:in_group())
          failed = true
          break
        end
        assert(ok, err)
        if ci % 4 == 0 then check(("in group %d"):format(gi)) end
      end
      if failed then
        rows, drows = saved_rows, saved_drows
        outcomes.failed = outcomes.failed + 1
      elseif math.random() < 0.1 then
        p:rollback()
        rows, drows = saved_rows, saved_drows
        outcomes.rolled = outcomes.rolled + 1
      else
        p:commit()
        outcomes.ok = outcomes.ok + 1
      end
      check(("after group %d"):format(gi))
      for name, rel in pairs(rels) do
        local got = {}
        for id, row in pairs(rows_of(rel)) do got[id] = text(row) end
        local rep = {}
        for id, row in pairs(replica[name]) do rep[id] = text(row) end
        assert.same(got, rep, name .. ": its verbs replayed, after group " .. gi)
      end
      if path and gi % 20 == 0 then
        p:flush()
        for name, rel in pairs(rels) do
          local at = runnel.attach(path, name)
          local got = {}
          for row, id in at:rows() do got[id] = text(row) end
          at:close()
          local mine = {}
          for id, row in pairs(rows_of(rel)) do mine[id] = text(row) end
          assert.same(mine, got, name .. " read through attach, after group " .. gi)
        end
      end
      if path and gi % 40 == 0 then
        p:close()
        declare()
        check(("after reopening at group %d"):format(gi))
      end
    end
    p:close()
    return outcomes
  end

  it("equal a recomputation from the source rows after every group, and so do their verbs", function()
    local o = run(11, 80)
    assert.is_true(o.failed > 0 and o.rolled > 0 and o.ok > 50, ("%d %d %d"):format(o.ok, o.failed, o.rolled))
  end)

  it("equal it across reopening and read through attach", function()
    local o = run(12, 60, H.tmpdir() .. "/st")
    assert.is_true(o.failed > 0 and o.rolled > 0, ("%d %d %d"):format(o.ok, o.failed, o.rolled))
  end)
end)
