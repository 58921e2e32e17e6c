-- A top's group (by) values longer than an LMDB key keeps whole (their
-- encoding over 503 bytes: longorder.h) work as short ones do: rows(),
-- count(), the changes told, attach, runnel query from another process,
-- runnel verify and a rebuild agree with a plain-Lua model of the top
-- through random inserts, updates (moving rows between groups and ranks)
-- and deletes, rollbacks and reopens. Group values are short, 600 and
-- 5,000 bytes, share their first 600 or 5,000 bytes and differ only at
-- their end, or sit around the 503 bytes a key keeps whole.
local runnel = require "runnel"
local H = require "helper"

local A = string.rep("a", 600)
local Z = string.rep("a", 5000)

-- bytewise, as keys are (not strcoll); strings are encoded so that a
-- prefix sorts first: equal 64-byte chunks skipped
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

-- the group values: short ones, long ones sharing A or Z and differing only
-- at the end, and "a" repeated around the 501 characters (503 bytes
-- encoded) a short group may take
local GROUPS = { "s", "t\0u", A .. "x", A .. "y", A .. "xa", A .. "\0", Z .. "x", Z .. "y", Z,
                 string.rep("a", 500), string.rep("a", 501), string.rep("a", 502), string.rep("a", 503),
                 string.rep("a", 510) }

-- names: short or long (a long order value in a long group too)
local NAMES = { "n", "m", A .. "n", A .. "m", "o" }

-- the order of groups (g, then h) and, in a group, of rows
local function group_less(x, y)
  if x.g ~= y.g then return less(x.g, y.g) end
  return x.h < y.h
end

local function tops_of(model, n, by_h, before)
  local groups, keys = {}, {}
  for _, r in pairs(model) do
    local k = by_h and (r.g .. "\1\1" .. r.h) or r.g
    if not groups[k] then groups[k] = {}; keys[#keys + 1] = { g = r.g, h = by_h and r.h or 0, k = k } end
    local rows = groups[k]
    rows[#rows + 1] = r
  end
  table.sort(keys, group_less)
  local out = {}
  for _, key in ipairs(keys) do
    local rows = groups[key.k]
    table.sort(rows, before)
    for i = 1, math.min(n, #rows) do out[#out + 1] = rows[i].id .. "@" .. i end
  end
  return out
end

local function by_v(x, y)
  if x.v ~= y.v then return x.v > y.v end
  return x.id < y.id
end

local function by_name_v(x, y)
  if x.name ~= y.name then return less(x.name, y.name) end
  if x.v ~= y.v then return x.v > y.v end
  return x.id < y.id
end

-- what a top's rows() give, as "id@rank"
local function listed(iter, rank)
  local out = {}
  for r in iter do out[#out + 1] = r.id .. "@" .. r[rank or "rank"] end
  return out
end

-- a mirror of a top kept from the changes its sink was told, by the id
-- column (row ids of rolled-back rows are given again)
local function mirror_of(top, rank)
  local function ok(cond, msg) if not cond then error(msg, 2) end end
  local m = { rows = {}, pending = {} }
  top:sink{
    insert = function(row) m.pending[#m.pending + 1] = { "INSERT", row.id, row } end,
    update = function(row, old)
      ok(row.id == old.id, "an UPDATE changed the id column")
      m.pending[#m.pending + 1] = { "UPDATE", row.id, row, old }
    end,
    delete = function(old) m.pending[#m.pending + 1] = { "DELETE", old.id, nil, old } end,
    commit = function()
      for _, c in ipairs(m.pending) do
        if c[1] == "INSERT" then ok(not m.rows[c[2]], "INSERT of a row held: " .. c[2])
        else ok(m.rows[c[2]] and m.rows[c[2]] == c[4][rank] .. "", "old row not the one held: " .. c[2]) end
        m.rows[c[2]] = c[3] and c[3][rank] .. "" or nil
      end
      m.pending = {}
    end,
    rollback = function() m.pending = {} end,
  }
  return m
end

local function as_set(list)
  local out = {}
  for _, s in ipairs(list) do
    local id, rank = s:match("^(%d+)@(%d+)$")
    out[tonumber(id)] = rank
  end
  return out
end

describe("a top grouped by values longer than a key keeps whole", function()
  local p
  after_each(function() if p then p:close() end p = nil; H.cleanup() end)

  it("agrees with a Lua model through changes, rollbacks, reopens, a rebuild, attach, query and verify", function()
    local dir = H.tmpdir()
    local seed = 2718
    local function random(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n + 1 end
    local n1 = 3
    local rels, m1, m2
    local function declare()
      p = runnel.open{ path = dir .. "/st", sync = false }
      local t = p:table("t", { {"id","int"}, {"g","string"}, {"h","int"}, {"name","string"}, {"v","int"}, key = "id" })
      rels = {
        t = t,
        top = t:top{ n = n1, by = "g", order = { {"v","desc"} }, name = "top" },
        both = t:top{ n = 2, by = { "g", "h" }, order = { "name", {"v","desc"} }, rank = "place", name = "both" },
      }
      -- the mirrors go on: a rebuild's changes are told to the sinks
      -- declared again (evolve_log.h)
      local r1, r2 = m1 and m1.rows or {}, m2 and m2.rows or {}
      m1, m2 = mirror_of(rels.top, "rank"), mirror_of(rels.both, "place")
      m1.rows, m2.rows = r1, r2
    end
    declare()
    local model = {}
    local untold = false -- a rebuild's changes, told with the next group that commits
    local function check()
      local want1, want2 = tops_of(model, n1, false, by_v), tops_of(model, 2, true, by_name_v)
      -- rows() in the pipeline go in id order; attach's in group then rank order (below)
      assert.same(as_set(want1), as_set(listed(rels.top:rows())))
      assert.same(as_set(want2), as_set(listed(rels.both:rows(), "place")))
      assert.equal(#want1, rels.top:count())
      assert.equal(#want2, rels.both:count())
      if untold then return end
      assert.same(as_set(want1), m1.rows)
      assert.same(as_set(want2), m2.rows)
    end
    local ids_used = 0
    local function group() return GROUPS[random(#GROUPS)] end
    for round = 1, 150 do
      if round % 50 == 0 then p:close(); declare() end
      if round == 100 then -- another n: rebuilt from the table at declaration
        p:close()
        n1 = 4
        declare()
        untold = true
      end
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
          local r = { id = ids_used, g = group(), h = random(2), name = NAMES[random(#NAMES)], v = random(4) }
          rels.t:insert(r)
          staged[r.id] = r
        elseif op <= 8 then
          local id = live[random(#live)]
          local old = staged[id]
          local r = { id = id, g = random(3) == 1 and group() or old.g, h = random(4) == 1 and 3 - old.h or old.h,
                      v = random(3) == 1 and old.v or random(4), name = random(3) == 1 and NAMES[random(#NAMES)] or old.name }
          rels.t:update(r)
          staged[id] = r
        else
          local id = live[random(#live)]
          rels.t:delete{ id = id }
          staged[id] = nil
        end
      end
      if rollback then p:rollback() else p:commit(); model = staged; untold = false end
      check()
    end
    -- every group value was used, long and short
    local used = {}
    for _, r in pairs(model) do used[r.g] = true end
    local nused = 0
    for _ in pairs(used) do nused = nused + 1 end
    assert.is_true(nused >= 10)
    local want1, want2 = tops_of(model, n1, false, by_v), tops_of(model, 2, true, by_name_v)

    -- attached while the pipeline is open, and after it closed
    local att = runnel.attach(dir .. "/st", "top")
    local got = {}
    for r in att:rows() do got[#got + 1] = r.id .. "@" .. r.rank end
    assert.same(want1, got)
    att:close()
    p:close()
    p = nil
    att = runnel.attach(dir .. "/st", "both")
    got = {}
    for r in att:rows() do got[#got + 1] = r.id .. "@" .. r.place end
    assert.same(want2, got)
    assert.equal(#want2, att:count())
    local some = want2[#want2]:match("^(%d+)@")
    local row = att:get(tonumber(some))
    assert.equal(model[tonumber(some)].g, row.g)
    att:close()

    -- from another process
    local out, err, code = H.sh(("%s query %s/st top --format ndjson"):format(H.runnel_bin, dir))
    assert.same({ "", 0 }, { err, code })
    got = {}
    for id, rank in out:gmatch('"id":(%d+),[^\n]*"rank":(%d+)') do got[#got + 1] = id .. "@" .. rank end
    assert.same(want1, got)

    out, err, code = H.sh(("%s verify %s/st"):format(H.runnel_bin, dir))
    assert.equal(0, code, out .. err)
  end)

  it("moves rows between long groups sharing their first 5,000 bytes as between short ones (TOP-2)", function()
    local function run(x, y)
      p = runnel.open()
      local t = p:table("t", { {"id","int"}, {"g","string"}, {"v","int"}, key = "id" })
      local top = t:top{ n = 2, by = "g", order = { {"v","desc"} } }
      local log = H.record(top)
      local seen = {}
      local function note()
        local s = {}
        for _, e in ipairs(log) do
          s[#s + 1] = e[1] .. " " .. e[2] .. " " .. (e[4] and e[4].rank or "-") .. ">" .. (e[3] and e[3].rank or "-")
        end
        local rows = {}
        for r in top:rows() do rows[#rows + 1] = { r.id, r.id .. "@" .. r.rank .. (r.g == x and "x" or "y") } end
        table.sort(rows, function(a, b) return a[1] < b[1] end) -- rows() lists a top by group (long ones
                                                               -- by hash): compared by id
        for i, e in ipairs(rows) do rows[i] = e[2] end
        seen[#seen + 1] = table.concat(s, ",") .. " | " .. table.concat(rows, ",") .. " | " .. top:count()
        H.clear(log)
      end
      t:insert{ id = 1, g = x, v = 1 }
      t:insert{ id = 2, g = x, v = 2 }
      t:insert{ id = 3, g = x, v = 3 }           -- 1 leaves the top
      t:insert{ id = 4, g = y, v = 5 }
      note()
      t:update{ id = 3, g = y, v = 3 }           -- to the other group, second there: 1 fills in
      note()
      t:update{ id = 1, g = y, v = 9 }           -- first there: 3 leaves that top
      note()
      t:delete{ id = 4 }
      t:delete{ id = 2 }
      note()
      p:close()
      p = nil
      return seen
    end
    local short = run("x", "y")
    assert.same({ "INSERT 1 ->1,UPDATE 1 1>2,INSERT 2 ->1,DELETE 1 2>-,UPDATE 2 1>2,INSERT 3 ->1,INSERT 4 ->1"
                  .. " | 2@2x,3@1x,4@1y | 3",
                  "UPDATE 2 2>1,INSERT 1 ->2,UPDATE 3 1>2 | 1@2x,2@1x,3@2y,4@1y | 4",
                  "DELETE 3 2>-,UPDATE 4 1>2,UPDATE 1 2>1 | 1@1y,2@1x,4@2y | 3",
                  "DELETE 4 2>-,INSERT 3 ->2,DELETE 2 1>- | 1@1y,3@2y | 2" }, short)
    assert.same(short, run(Z .. "x", Z .. "y"))
    assert.same(short, run(A .. "x", Z .. "x"))
    assert.same(short, run(string.rep("a", 501), string.rep("a", 502)))
  end)

  it("keeps big long groups sharing their first 5,000 bytes in order (their buckets searched by label)", function()
    local dir = H.tmpdir()
    p = runnel.open{ path = dir .. "/st", sync = false }
    local t = p:table("t", { {"id","int"}, {"g","string"}, {"v","int"}, key = "id" })
    local top = t:top{ n = 5, by = "g", order = { {"v","desc"} } }
    local seed = 99
    local function random(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n + 1 end
    local groups = { Z .. "x", Z .. "y", Z .. "xy" }
    local model = {}
    p:begin()
    for id = 1, 240 do
      model[id] = { id = id, g = groups[random(3)], v = random(50) }
      t:insert(model[id])
    end
    p:commit()
    for _ = 1, 200 do
      local id = random(240)
      if model[id] and random(5) == 1 then
        t:delete{ id = id }
        model[id] = nil
      else
        model[id] = { id = id, g = random(4) == 1 and groups[random(3)] or (model[id] or {}).g or groups[1], v = random(50) }
        if t:get(id) then t:update(model[id]) else t:insert(model[id]) end
      end
    end
    local want = tops_of(model, 5, false, by_v)
    local got = {}
    for r in top:rows() do got[#got + 1] = r.id .. "@" .. r.rank end
    assert.same(as_set(want), as_set(got))
    assert.equal(15, top:count())
    p:close()
    p = nil
    local att = runnel.attach(dir .. "/st", "t.top")
    got = {}
    for r in att:rows() do got[#got + 1] = r.id .. "@" .. r.rank end
    assert.same(want, got)
    att:close()
    local out, err, code = H.sh(("%s verify %s/st"):format(H.runnel_bin, dir))
    assert.equal(0, code, out .. err)
  end)
end)
