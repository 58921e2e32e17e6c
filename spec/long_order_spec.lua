-- Order values longer than an LMDB key in a top and an index (longorder.h):
-- rows ordered by a long string are kept in the order of their whole values
-- (not a prefix), with ties by row id, through inserts, updates, deletes,
-- rollbacks, reopens, attach and runnel verify. Many values share their
-- first 600 (or 5000) bytes, and some cross the 503 bytes a key keeps whole.
local runnel = require "runnel"
local H = require "helper"

local null = runnel.null

local A = string.rep("a", 600)
local Z = string.rep("a", 5000)

-- bytewise, as keys are (not strcoll): equal 64-byte chunks skipped
local function less(a, b)
  local i, n = 1, math.min(#a, #b)
  while i + 63 <= n and a:sub(i, i + 63) == b:sub(i, i + 63) do i = i + 64 end
  while i <= n do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then return x < y end
    i = i + 1
  end
  return #a < #b
end

-- the expected order of rows: name (asc or desc), then v desc, then row id
-- (ids are given in insertion order here, so an id's order is its row id's)
local function before(x, y, desc)
  if x.name ~= y.name then
    if desc then return less(y.name, x.name) end
    return less(x.name, y.name)
  end
  if x.v ~= y.v then return x.v > y.v end
  return x.id < y.id
end

local function sorted(model, desc, g)
  local out = {}
  for _, r in pairs(model) do
    if g == nil or r.g == g then out[#out + 1] = r end
  end
  table.sort(out, function(x, y) return before(x, y, desc) end)
  return out
end

local function ids(rows)
  local out = {}
  for i, r in ipairs(rows) do out[i] = r.id end
  return out
end

-- a name: short, long sharing A or Z, or around the 503 bytes kept whole
local function namer(random)
  local letters = { "a", "b", "c", "\0" }
  local function suffix(n)
    local s = {}
    for i = 1, n do s[i] = letters[random(#letters)] end
    return table.concat(s)
  end
  return function()
    local kind = random(10)
    if kind == 1 then return "n" .. suffix(random(3)) end
    if kind <= 6 then return A .. suffix(random(4) - 1) end
    if kind == 7 then return Z .. suffix(random(3) - 1) end
    if kind == 8 then return string.rep("a", 490 + random(30)) .. suffix(random(3)) end
    return A .. suffix(random(3)) .. string.rep("b", random(3) * 300)
  end
end

describe("a top and an index ordered by values longer than an LMDB key", function()
  local p
  after_each(function() if p then p:close() end p = nil; H.cleanup() end)

  it("agree with sorting in Lua through changes, rollbacks, reopens, attach and verify (LONGORDER-1..3)", function()
    local dir = H.tmpdir()
    local seed = 4242
    local function random(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n + 1 end
    local name = namer(random)
    local rels
    local function declare()
      p = runnel.open{ path = dir .. "/st", sync = false }
      local t = p:table("t", { {"id","int"}, {"g","int"}, {"name","string"}, {"v","int"}, key = "id" })
      rels = {
        t = t,
        top = t:top{ n = 3, by = "g", order = { "name", {"v","desc"} }, name = "top" },
        all = t:top{ n = 5, order = { {"name","desc"}, {"v","desc"} }, rank = "place", name = "all" },
        ix = t:index{ "name", "v", "desc", name = "ix" },
        down = t:index{ "name", "desc", "v", "desc", name = "down" },
      }
    end
    declare()
    local model = {}
    local function check()
      local up, down = sorted(model, false), sorted(model, true)
      local got = {}
      for r in rels.ix:range{} do got[#got + 1] = r.id end
      assert.same(ids(up), got)
      got = {}
      for r in rels.down:range{} do got[#got + 1] = r.id end
      assert.same(ids(down), got)
      -- the tops, with their ranks
      local want, have = {}, {}
      for g = 1, 2 do
        for i, r in ipairs(sorted(model, false, g)) do if i <= 3 then want[r.id] = i end end
      end
      for r in rels.top:rows() do have[r.id] = r.rank end
      assert.same(want, have)
      want, have = {}, {}
      for i, r in ipairs(down) do if i <= 5 then want[r.id] = i end end
      for r in rels.all:rows() do have[r.id] = r.place end
      assert.same(want, have)
      -- ranks, counts and ranges with long bounds
      if #up > 0 then
        local lo, hi = up[random(#up)].name, up[random(#up)].name
        if less(hi, lo) then lo, hi = hi, lo end
        local rank, inside, sub = 1, 0, {}
        local off, lim = random(3) - 1, random(5)
        local off0 = off
        for _, r in ipairs(up) do
          if less(r.name, lo) then rank = rank + 1 end
          if not less(r.name, lo) and not less(hi, r.name) then
            inside = inside + 1
            if off > 0 then off = off - 1 elseif #sub < lim then sub[#sub + 1] = r.id end
          end
        end
        assert.equal(rank, rels.ix:rank(lo))
        assert.equal(inside, rels.ix:count{ from = lo, to = hi })
        got = {}
        for r in rels.ix:range{ from = lo, to = hi, offset = off0, limit = lim } do got[#got + 1] = r.id end
        assert.same(sub, got)
        -- one row's own place: its name and value pick it out
        local r = up[random(#up)]
        local n = 1
        for _, x in ipairs(up) do
          if less(x.name, r.name) or (x.name == r.name and x.v > r.v) then n = n + 1 end
        end
        assert.equal(n, rels.ix:rank{ r.name, r.v })
        -- the descending index from a long bound down
        n = 0
        for _, x in ipairs(down) do if not less(r.name, x.name) then n = n + 1 end end
        assert.equal(n, rels.down:count{ from = r.name })
        got = {}
        for x in rels.ix:range{ from = { r.name, r.v }, limit = 1 } do got[#got + 1] = x.id end
        local at = nil
        for _, x in ipairs(up) do if x.name == r.name and x.v == r.v then at = x.id; break end end
        assert.same({ at }, got)
      end
    end
    local ids_used = 0
    for round = 1, 120 do
      if round % 40 == 0 then p:close(); declare() end
      local rollback = random(6) == 1
      local staged = {}
      for k, v in pairs(model) do staged[k] = v end
      p:begin()
      for _ = 1, random(8) do
        local live = {}
        for id in pairs(staged) do live[#live + 1] = id end
        table.sort(live)
        local op = random(10)
        if op <= 5 or #live < 4 then
          ids_used = ids_used + 1
          local r = { id = ids_used, g = random(2), name = name(), v = random(3) }
          rels.t:insert(r)
          staged[r.id] = r
        elseif op <= 8 then
          local id = live[random(#live)]
          local old = staged[id]
          local r = { id = id, g = random(4) == 1 and 3 - old.g or old.g, v = random(3),
                      name = random(3) == 1 and old.name or name() }
          rels.t:update(r)
          staged[id] = r
        else
          local id = live[random(#live)]
          rels.t:delete{ id = id }
          staged[id] = nil
        end
      end
      if rollback then p:rollback() else p:commit(); model = staged end
      check()
    end
    p:close()
    p = nil
    local out, err, code = H.sh(("%s verify %s/st"):format(H.runnel_bin, dir))
      local n = 0 for _ in pairs(model) do n = n + 1 end
    assert.equal(0, code, out .. err)
    -- attach reads the same order, and its range and rank take long bounds
    local up = sorted(model, false)
    local att = runnel.attach(dir .. "/st", "ix")
    local got = {}
    for r in att:range{} do got[#got + 1] = r.id end
    assert.same(ids(up), got)
    local mid = up[#up // 2]
    local rank = 1
    for _, r in ipairs(up) do if less(r.name, mid.name) then rank = rank + 1 end end
    assert.equal(rank, att:rank(mid.name))
    local top = runnel.attach(dir .. "/st", "top")
    local want, have = {}, {}
    for g = 1, 2 do
      for i, r in ipairs(sorted(model, false, g)) do if i <= 3 then want[r.id] = i .. "|" .. #r.name end end
    end
    for r in top:rows() do have[r.id] = r.rank .. "|" .. #r.name end
    assert.same(want, have)
  end)

  it("labels a bucket afresh when rows keep landing between the same two (LONGORDER-1)", function()
    p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"name","string"}, key = "id" })
    local ix = t:index{ "name" }
    local top = t:top{ n = 2, order = { "name" } }
    t:insert{ id = 1, name = A .. "a" }
    t:insert{ id = 2, name = A .. "c" }
    -- each new name sorts just before the last one and after A.."a": the
    -- labels between halve each time, 64 bits run out
    for i = 1, 90 do t:insert{ id = 2 + i, name = A .. "b" .. string.rep("b", 100 - i) } end
    local want = { 1 }
    for i = 90, 1, -1 do want[#want + 1] = 2 + i end
    want[#want + 1] = 2
    local got = {}
    for r in ix:range{} do got[#got + 1] = r.id end
    assert.same(want, got)
    local tops = {}
    for r in top:rows() do tops[r.rank] = r.id end
    assert.same({ 1, 92 }, tops)
    -- an update that keeps its long name keeps its place; a delete leaves it
    t:update{ id = 50, name = A .. "b" .. string.rep("b", 100 - 48) }
    t:delete{ id = 92 }
    assert.equal(91, ix:count())
    assert.equal(2, ix:rank(A .. "b"))
    tops = {}
    for r in top:rows() do tops[r.rank] = r.id end
    assert.same({ 1, 91 }, tops)
  end)

  it("keeps ties of one long value in row id order (insertion order here), and tells rank moves (TOP-2)", function()
    p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"name","string"}, key = "id" })
    local top = t:top{ n = 2, order = { "name" } }
    local ix = t:index{ "name" }
    local log = H.record(top)
    t:insert{ id = 1, name = Z .. "x" }
    t:insert{ id = 2, name = Z .. "x" }
    t:insert{ id = 3, name = Z .. "y" }
    t:insert{ id = 4, name = Z .. "w" }
    assert.same({ 4, 1, 2, 3 }, (function() local o = {} for r in ix:range{} do o[#o + 1] = r.id end return o end)())
    assert.same({ "INSERT 1", "INSERT 2", "DELETE 2", "UPDATE 1", "INSERT 4" }, H.verbs(log))
    H.clear(log)
    t:update{ id = 3, name = Z .. "v" }                   -- first now: two rows move down one
    assert.same({ "DELETE 1", "UPDATE 4", "INSERT 3" }, H.verbs(log))
    assert.equal(1, ix:count{ from = Z .. "x", to = Z .. "x" } - 1)
    assert.equal(3, ix:rank(Z .. "x"))
    assert.equal(4, ix:count{ from = Z })                  -- every name starts with Z
    assert.equal(0, ix:count{ from = Z .. "z" })
  end)

  it("takes group values longer than a key keeps whole too (top_longgroup_spec)", function()
    p = runnel.open()
    local t = p:table("long", { {"id","int"}, {"team","string"}, {"name","string"}, key = "id" })
    local top = t:top{ n = 1, by = "team", order = { "name" } }
    t:insert{ id = 1, team = "a", name = string.rep("x", 900) }
    t:insert{ id = 2, team = string.rep("y", 600), name = "a" }
    assert.equal(2, top:count())
    assert.equal(null, null)
  end)
end)

describe("long rows in a top, and runnel verify over deleted rows", function()
  local p
  after_each(function() if p then p:close() end p = nil; H.cleanup() end)

  it("moves the rank of a row too big for its page without moving its key (regression)", function()
    -- a rank shift rewrote the entry with the key LMDB's own page held,
    -- which LMDB had just moved: the row landed under bytes of its neighbours
    -- (each group its own transaction: the row's overflow page is clean)
    local dir = H.tmpdir()
    p = runnel.open{ path = dir .. "/st" }
    local t = p:table("t", { {"id","int"}, {"score","int"}, {"bio","string"}, key = "id" })
    local top = t:top{ n = 3, order = { {"score","desc"} } }
    t:insert{ id = 1, score = 10, bio = string.rep("x", 3000) }
    t:insert{ id = 2, score = 20, bio = string.rep("y", 3000) }
    t:insert{ id = 3, score = 30, bio = "z" }               -- 1 and 2 move down one
    t:insert{ id = 4, score = 40, bio = string.rep("w", 5000) }
    local function ranks()
      local out = {}
      for r in top:rows() do out[r.id] = r.rank end
      return out
    end
    assert.same({ [4] = 1, [3] = 2, [2] = 3 }, ranks())
    t:update{ id = 2, score = 50 }
    t:update{ id = 3, score = 5 }                         -- out of the top: 1 comes back
    assert.same({ [2] = 1, [4] = 2, [1] = 3 }, ranks())
    p:close()
    p = nil
    local out, err, code = H.sh(("%s verify %s/st"):format(H.runnel_bin, dir))
    assert.equal(0, code, out .. err)
  end)

  it("finds an index over a table with deleted rows whole (runnel verify skips tombstones; regression)", function()
    local dir = H.tmpdir()
    p = runnel.open{ path = dir .. "/st", sync = false }
    local t = p:table("t", { {"id","int"}, {"name","string"}, key = "id" })
    t:index{ "name" }
    t:top{ n = 1, order = { "name" } }
    t:insert{ id = 1, name = "a" }
    t:insert{ id = 2, name = "b" }
    t:delete{ id = 1 }
    p:close()
    p = nil
    local out, err, code = H.sh(("%s verify %s/st"):format(H.runnel_bin, dir))
    assert.equal(0, code, out .. err)
    assert.matches("whole", out)
  end)
end)
