-- Keys longer than an LMDB key (511 bytes) work everywhere a key does
-- (DESIGN.md §2: "hash them and keep the full key beside the id, with an
-- equality check"; longkey.h). Each relation kind gets group keys, keys and
-- join values of 600 and 5000 bytes, and pairs of long values that share
-- their first 500 (or 4990) bytes, which must stay distinct: a hashed key
-- keeps its first 480 bytes, so those pairs differ only in what is hashed.
local runnel = require "runnel"
local H = require "helper"

local A600 = string.rep("a", 599) .. "1"
local B600 = string.rep("a", 599) .. "2"     -- A600's first 599 bytes
local C5000 = string.rep("c", 4999) .. "x"
local D5000 = string.rep("c", 4999) .. "y"   -- C5000's first 4999 bytes
local SHORT = "s"

-- rows of rel (or an attach) as sorted "by|n|s" text
local function groups(rel, col)
  local out = {}
  for r in rel:rows() do
    out[#out + 1] = ("%d:%s|n=%s|s=%s|lo=%s|hi=%s"):format(#r[col], r[col]:sub(-3), tostring(r.n), tostring(r.s),
                                                          tostring(r.lo), tostring(r.hi))
  end
  table.sort(out)
  return out
end

-- the same from a plain Lua recomputation over the table's rows
local function expected(items)
  local by = {}
  for _, r in pairs(items) do
    local e = by[r.g] or { n = 0, s = 0 }
    by[r.g] = e
    e.n, e.s = e.n + 1, e.s + r.v
    e.lo = (not e.lo or r.v < e.lo) and r.v or e.lo
    e.hi = (not e.hi or r.v > e.hi) and r.v or e.hi
  end
  local out = {}
  for g, e in pairs(by) do
    out[#out + 1] = ("%d:%s|n=%s|s=%s|lo=%s|hi=%s"):format(#g, g:sub(-3), e.n, e.s, e.lo, e.hi)
  end
  table.sort(out)
  return out
end

describe("an aggregate grouped by a value longer than an LMDB key", function()
  local p
  after_each(function() if p then p:close() end p = nil; H.cleanup() end)

  local function declare(path)
    p = runnel.open{ path = path, sync = false }
    local t = p:table("t", { {"id","int"}, {"g","string"}, {"v","int"}, key = "id" })
    local a = t:aggregate{ name = "a", by = "g", n = runnel.count(), s = runnel.sum("v"), lo = runnel.min("v"),
                           hi = runnel.max("v") }
    return t, a
  end

  it("keeps long groups sharing their first bytes apart, through updates, deletes, rollback, reopen and attach", function()
    local dir = H.tmpdir()
    local t, a = declare(dir .. "/st")
    local log = H.record(a)
    local items = {}
    local function put(id, g, v) items[id] = { g = g, v = v }; t:upsert{ id = id, g = g, v = v } end
    put(1, A600, 1); put(2, B600, 2); put(3, C5000, 3); put(4, D5000, 4); put(5, SHORT, 5); put(6, A600, 10)
    assert.same(expected(items), groups(a, "g"))
    assert.equal(2, a:get(A600).n)
    assert.equal(11, a:get(A600).s)
    assert.equal(2, a:get(B600).s)
    assert.equal(4, a:get(D5000).hi)
    assert.is_nil(a:get(string.rep("a", 599) .. "3"))
    -- a row moves between two long groups that share 599 bytes
    put(2, A600, 7)
    assert.same(expected(items), groups(a, "g"))
    assert.is_nil(a:get(B600))
    local deleted = log[#log - 1]
    assert.equal("DELETE", deleted[1])
    assert.equal(B600, deleted[4].g)
    -- the group comes back with its old id (a tombstone, AGG-2)
    local b_id = deleted[2]
    put(7, B600, 8)
    assert.same({ "INSERT", b_id }, { log[#log][1], log[#log][2] })
    -- rollback leaves no trace
    p:begin()
    put(8, string.rep("a", 599) .. "3", 1)
    t:delete{ id = 3 }
    p:rollback()
    items[8] = nil
    assert.same(expected(items), groups(a, "g"))
    -- deletes
    t:delete{ id = 4 }
    items[4] = nil
    assert.same(expected(items), groups(a, "g"))
    assert.is_nil(a:get(D5000))
    assert.equal(3, a:get(C5000).n and a:get(C5000).s)
    -- attach reads the same rows, and gets each group
    local att = runnel.attach(dir .. "/st", "a")
    assert.same(expected(items), groups(att, "g"))
    assert.equal(18, att:get(A600).s)
    assert.equal(8, att:get(B600).s)
    assert.equal(3, att:get(C5000).s)
    assert.is_nil(att:get(D5000))
    att:close()
    -- reopened, the groups are found again by their long keys
    p:close()
    t, a = declare(dir .. "/st")
    assert.same(expected(items), groups(a, "g"))
    put(9, D5000, 40)
    put(1, B600, 1)
    assert.same(expected(items), groups(a, "g"))
    assert.equal(40, a:get(D5000).s)
  end)

  it("stores keys of every length around the limit as distinct groups", function()
    local dir = H.tmpdir()
    local t, a = declare(dir .. "/st")
    local items = {}
    for len = 470, 530 do
      items[len] = { g = string.rep("z", len), v = len }
      t:insert{ id = len, g = items[len].g, v = len }
    end
    assert.same(expected(items), groups(a, "g"))
    for len = 470, 530, 3 do
      items[len].v = 1
      t:update{ id = len, v = 1 }
    end
    assert.same(expected(items), groups(a, "g"))
    assert.same(expected(items), groups(runnel.attach(dir .. "/st", "a"), "g"))
  end)

  it("takes long values of several by columns, and a rebuild keeps the groups' ids", function()
    local dir = H.tmpdir()
    p = runnel.open{ path = dir .. "/st", sync = false }
    local t = p:table("t", { {"id","int"}, {"g","string"}, {"h","bytes"}, {"v","int"}, key = "id" })
    local a = t:aggregate{ name = "a", by = { "g", "h" }, n = runnel.count() }
    t:insert{ id = 1, g = A600, h = C5000, v = 1 }
    t:insert{ id = 2, g = A600, h = D5000, v = 1 }
    t:insert{ id = 3, g = A600, h = D5000, v = 1 }
    local ids = {}
    for r, id in a:rows() do ids[#r.h .. r.h:sub(-1)] = id end
    assert.equal(2, a:get{ g = A600, h = D5000 }.n)
    assert.equal(1, a:get{ g = A600, h = C5000 }.n)
    p:close()
    -- declared with another aggregate column: rebuilt from the table
    p = runnel.open{ path = dir .. "/st", sync = false }
    t = p:table("t", { {"id","int"}, {"g","string"}, {"h","bytes"}, {"v","int"}, key = "id" })
    a = t:aggregate{ name = "a", by = { "g", "h" }, n = runnel.count(), s = runnel.sum("v") }
    local after = {}
    for r, id in a:rows() do after[#r.h .. r.h:sub(-1)] = id; assert.equal(r.n, r.s) end
    assert.same(ids, after)
    assert.equal(2, a:get{ g = A600, h = D5000 }.s)
  end)

  it("finds a group where a key that fit was stored, after a redeclaration stores such keys hashed", function()
    -- without min or max a 500-byte group key is stored as it is (as before
    -- longkey.h); with one it leaves its values too little room and a new
    -- one is hashed, but the group already stored keeps its place and id
    local dir = H.tmpdir()
    local g500 = string.rep("g", 497)
    p = runnel.open{ path = dir .. "/st", sync = false, notes = false }
    local t = p:table("t", { {"id","int"}, {"g","string"}, {"v","int"}, key = "id" })
    local a = t:aggregate{ name = "a", by = "g", n = runnel.count() }
    t:insert{ id = 1, g = g500, v = 5 }
    local _, id = a:rows()()
    p:close()
    p = runnel.open{ path = dir .. "/st", sync = false, notes = false }
    t = p:table("t", { {"id","int"}, {"g","string"}, {"v","int"}, key = "id" })
    a = t:aggregate{ name = "a", by = "g", n = runnel.count(), lo = runnel.min("v") }
    t:insert{ id = 2, g = g500, v = 3 }
    local rows = {}
    for r, rid in a:rows() do rows[#rows + 1] = { rid, r.n, r.lo } end
    assert.same({ { id, 2, 3 } }, rows)
    t:delete{ id = 2 }
    assert.same({ g = g500, n = 1, lo = 5 }, a:get(g500))
  end)

  it("keeps min and max of long values beside a long group key", function()
    p = runnel.open{ sync = false }
    local t = p:table("t", { {"id","int"}, {"g","string"}, {"s","string"}, key = "id" })
    local a = t:aggregate{ by = "g", lo = runnel.min("s"), hi = runnel.max("s") }
    t:insert{ id = 1, g = A600, s = C5000 }
    t:insert{ id = 2, g = A600, s = D5000 }
    t:insert{ id = 3, g = B600, s = "b" }
    assert.equal(C5000, a:get(A600).lo)
    assert.equal(D5000, a:get(A600).hi)
    t:delete{ id = 2 }
    assert.equal(C5000, a:get(A600).hi)
    assert.equal("b", a:get(B600).hi)
  end)

  it("windows a stream by a long group key, and makes its windows final past their grace", function()
    local dir = H.tmpdir()
    p = runnel.open{ path = dir .. "/st", sync = false }
    local ev = p:stream("ev", { {"g","string"}, {"ts","int"} })
    local w = ev:aggregate{ name = "w", by = "g", window = runnel.tumbling(10, "ts"), grace = 0, n = runnel.count() }
    ev:insert{ g = A600, ts = 1 }
    ev:insert{ g = B600, ts = 2 }
    ev:insert{ g = A600, ts = 3 }
    ev:insert{ g = C5000, ts = 11 }
    assert.equal(2, w:get{ g = A600, window_start = 0 }.n)
    assert.equal(1, w:get{ g = B600, window_start = 0 }.n)
    ev:insert{ g = A600, ts = 25 } -- windows [0, 10) and [10, 20) are final now
    assert.equal(3, p:stats().final.w)
    ev:insert{ g = A600, ts = 4 }  -- late: dropped
    assert.equal(1, w:late())
    assert.equal(2, w:get{ g = A600, window_start = 0 }.n)
    local att = runnel.attach(dir .. "/st", "w")
    assert.equal(1, att:get{ g = C5000, window_start = 10 }.n)
    assert.equal(1, att:get{ g = B600, window_start = 0 }.n)
    local n = 0
    for _ in att:rows() do n = n + 1 end
    assert.equal(4, n)
  end)

  it("puts an event of a long group key in each of its hopping windows", function()
    p = runnel.open{ sync = false }
    local t = p:table("t", { {"id","int"}, {"g","string"}, {"ts","int"}, key = "id" })
    local w = t:aggregate{ name = "w", by = "g", window = runnel.hopping(10, 5, "ts"), n = runnel.count() }
    t:insert{ id = 1, g = A600, ts = 7 }
    t:insert{ id = 2, g = B600, ts = 7 }
    t:insert{ id = 3, g = A600, ts = 12 }
    assert.equal(1, w:get{ g = A600, window_start = 0 }.n)
    assert.equal(2, w:get{ g = A600, window_start = 5 }.n)
    assert.equal(1, w:get{ g = A600, window_start = 10 }.n)
    assert.equal(1, w:get{ g = B600, window_start = 5 }.n)
    t:update{ id = 2, g = A600 }
    assert.is_nil(w:get{ g = B600, window_start = 5 })
    assert.equal(3, w:get{ g = A600, window_start = 5 }.n)
  end)
end)

describe("a table keyed by a value longer than an LMDB key", function()
  local p
  after_each(function() if p then p:close() end p = nil; H.cleanup() end)

  it("keeps keys sharing their first bytes apart, and attach gets each by its key", function()
    local dir = H.tmpdir()
    p = runnel.open{ path = dir .. "/st", sync = false }
    local t = p:table("t", { {"k","string"}, {"v","int"}, key = "k" })
    local log = H.record(t)
    t:insert{ k = A600, v = 1 }
    t:insert{ k = B600, v = 2 }
    t:insert{ k = C5000, v = 3 }
    t:insert{ k = D5000, v = 4 }
    t:update{ k = B600, v = 20 }
    t:delete{ k = C5000 }
    p:begin()
    t:insert{ k = C5000, v = 30 }
    t:delete{ k = A600 }
    p:rollback()
    assert.equal(1, t:get(A600).v)
    assert.equal(20, t:get(B600).v)
    assert.is_nil(t:get(C5000))
    t:insert{ k = C5000, v = 5 }
    assert.equal(log[3][2], t:id_of(C5000)) -- its old id back (ROWID-1)
    p:close()
    p = runnel.open{ path = dir .. "/st", sync = false }
    t = p:table("t", { {"k","string"}, {"v","int"}, key = "k" })
    assert.equal(4, t:get(D5000).v)
    assert.equal(4, t:count())
    local att = runnel.attach(dir .. "/st", "t")
    assert.equal(1, att:get(A600).v)
    assert.equal(20, att:get(B600).v)
    assert.equal(5, att:get(C5000).v)
    assert.equal(4, att:get(D5000).v)
    assert.is_nil(att:get(string.rep("a", 599) .. "3"))
    assert.equal(4, att:count())
    att:close()
  end)
end)

describe("a store of a relation keyed by a value longer than an LMDB key", function()
  local p
  after_each(function() if p then p:close() end p = nil; H.cleanup() end)

  local function stored(att)
    local out = {}
    for r in att:rows() do out[#out + 1] = #r.k .. ":" .. r.k:sub(-1) .. "=" .. r.v end
    table.sort(out)
    return out
  end

  it("keeps, updates and removes rows of long keys sharing their first bytes, as attach reads them", function()
    local dir = H.tmpdir()
    local function declare()
      p = runnel.open{ path = dir .. "/st", sync = false }
      local t = p:table("t", { {"k","string"}, {"v","int"}, key = "k" })
      t:sink(runnel.store("kept"))
      return t
    end
    local t = declare()
    t:insert{ k = A600, v = 1 }
    t:insert{ k = B600, v = 2 }
    t:insert{ k = C5000, v = 3 }
    t:insert{ k = D5000, v = 4 }
    t:insert{ k = SHORT, v = 5 }
    t:update{ k = B600, v = 20 }
    t:delete{ k = A600 }  -- a removed entry hides no other
    p:begin()
    t:delete{ k = D5000 }
    t:insert{ k = A600, v = 9 }
    p:rollback()
    local att = runnel.attach(dir .. "/st", "kept")
    assert.same({ "1:s=5", "5000:x=3", "5000:y=4", "600:2=20" }, stored(att))
    assert.is_nil(att:get(A600))
    assert.equal(20, att:get(B600).v)
    assert.equal(4, att:get(D5000).v)
    att:close()
    p:close()
    t = declare()
    t:insert{ k = A600, v = 7 }
    t:update{ k = D5000, v = 40 }
    t:delete{ k = C5000 }
    att = runnel.attach(dir .. "/st", "kept")
    assert.same({ "1:s=5", "5000:y=40", "600:1=7", "600:2=20" }, stored(att))
    assert.equal(7, att:get(A600).v)
    assert.is_nil(att:get(C5000))
    assert.equal(4, att:count())
    att:close()
  end)

  it("keeps an aggregate grouped by long values, and a lookup reads it by its long key", function()
    local dir = H.tmpdir()
    p = runnel.open{ path = dir .. "/st", sync = false }
    local t = p:table("t", { {"id","int"}, {"g","string"}, key = "id" })
    t:aggregate{ name = "a", by = "g", n = runnel.count() }:sink(runnel.store("counts"))
    t:insert{ id = 1, g = A600 }
    t:insert{ id = 2, g = B600 }
    t:insert{ id = 3, g = B600 }
    t:update{ id = 1, g = C5000 }
    local att = runnel.attach(dir .. "/st", "counts")
    assert.is_nil(att:get(A600))
    assert.equal(2, att:get(B600).n)
    assert.equal(1, att:get(C5000).n)
    local q = runnel.open{ sync = false }
    local lk = q:lookup("lk", { {"g","string"}, {"n","int"}, key = "g", source = att })
    local ev = q:table("ev", { {"id","int"}, {"g","string"}, key = "id" })
    local j = ev:join(lk, { on = "g", kind = "left" })
    ev:insert{ id = 1, g = B600 }
    ev:insert{ id = 2, g = A600 }
    local seen = {}
    for r in j:rows() do seen[r.id] = r.n == nil and "none" or r.n end
    assert.same({ 2, "none" }, seen)
    q:close()
    att:close()
  end)
end)

describe("joins of rows keyed or joined by values longer than an LMDB key", function()
  local p
  after_each(function() if p then p:close() end p = nil; H.cleanup() end)

  local function rows_text(rel)
    local out = {}
    for r, id in rel:rows() do
      local s = {}
      for k, v in pairs(r) do -- the right key's copy ("sites.site") left out
        if not k:find(".", 1, true) then s[#s + 1] = k .. "=" .. (type(v) == "string" and (#v .. v:sub(-1)) or tostring(v)) end
      end
      table.sort(s)
      out[#out + 1] = id .. ":" .. table.concat(s, ",")
    end
    table.sort(out)
    return out
  end

  local function declare(path)
    p = runnel.open{ path = path, sync = false }
    local pages = p:table("pages", { {"url","string"}, {"site","string"}, key = "url" })
    local sites = p:table("sites", { {"site","string"}, {"owner","string"}, key = "site" })
    local meta = p:table("meta", { {"url","string"}, {"title","string"}, key = "url" })
    local by_site = pages:join(sites, { on = "site", kind = "left", name = "by_site" })
    local both = pages:join(meta, { on = "url", kind = "outer", name = "both" })
    return pages, sites, meta, by_site, both
  end

  it("gives a left row of a long key its result, a long join value its right row, and an outer join both", function()
    local dir = H.tmpdir()
    local pages, sites, meta, by_site, both = declare(dir .. "/st")
    sites:insert{ site = C5000, owner = "c" }
    sites:insert{ site = D5000, owner = "d" }
    pages:insert{ url = A600, site = C5000 }
    pages:insert{ url = B600, site = D5000 }
    meta:insert{ url = B600, title = "b" }
    meta:insert{ url = C5000, title = "c" }
    local want_by_site = { "1:owner=1c,site=5000x,url=6001", "2:owner=1d,site=5000y,url=6002" }
    assert.same(want_by_site, rows_text(by_site))
    assert.same({ "1:site=5000x,url=6001", "2:site=5000y,title=1b,url=6002", "3:title=1c,url=5000x" },
                rows_text(both))
    assert.equal("d", by_site:get(B600).owner)
    -- updates on either side, a rollback, a delete
    sites:update{ site = C5000, owner = "cc" }
    pages:update{ url = B600, site = C5000 }
    p:begin()
    pages:delete{ url = A600 }
    meta:delete{ url = C5000 }
    p:rollback()
    meta:delete{ url = B600 }
    want_by_site = { "1:owner=2c,site=5000x,url=6001", "2:owner=2c,site=5000x,url=6002" }
    assert.same(want_by_site, rows_text(by_site))
    local want_both = { "1:site=5000x,url=6001", "2:site=5000x,url=6002",
                        "3:title=1c,url=5000x" }
    assert.same(want_both, rows_text(both))
    -- attach makes the same rows, and reopening keeps the ids
    assert.same(want_by_site, rows_text(runnel.attach(dir .. "/st", "by_site")))
    assert.same(want_both, rows_text(runnel.attach(dir .. "/st", "both")))
    assert.equal("cc", runnel.attach(dir .. "/st", "by_site"):get(A600).owner)
    p:close()
    pages, sites, meta, by_site, both = declare(dir .. "/st")
    meta:insert{ url = A600, title = "a" }
    pages:insert{ url = C5000, site = D5000 }
    assert.same({ "1:site=5000x,title=1a,url=6001", "2:site=5000x,url=6002", "3:site=5000y,title=1c,url=5000x" },
                rows_text(both))
    assert.same({ "1:owner=2c,site=5000x,url=6001", "2:owner=2c,site=5000x,url=6002", "3:owner=1d,site=5000y,url=5000x" },
                rows_text(by_site))
  end)
end)
