-- rel:changes() after the map grew inside a group (GROUP-5): the open
-- group's changes, applied again into the new transaction, were counted
-- again (4,912 inserts for 3,000). Each run with a small map (it grows) is
-- held against the same run with a large one (it never grows): every
-- relation's changes, its rows, next ids and "ch:" records (the notes a
-- durable sink declared again gets) must be the same.
local runnel = require "runnel"
local H = require "helper"

local SMALL, LARGE = 1 << 16, 1 << 26
local PAD = string.rep("p", 300)

local function declare(p)
  local t = p:table("t", { {"k","string"}, {"g","int"}, {"pad","string"}, key = "k" })
  local u = p:table("u", { {"g","int"}, {"name","string"}, key = "g" })
  local j = t:join(u, { on = "g", kind = "left", name = "j" })
  local a = t:aggregate{ by = "g", n = runnel.count(), name = "a" }
  return { t = t, u = u, j = j, a = a }
end

local function counts(rels)
  local out = {}
  for name, r in pairs(rels) do
    local c = r:changes()
    out[name] = { c.inserts, c.updates, c.deletes }
  end
  return out
end

-- One session over dir: declarations (a durable sink d on t when sink), then
-- body(p, rels). Returns the changes of every relation, p:stats() and the
-- durable sink notes.
local function session(dir, opts, sink, body)
  local lines = {}
  opts.path = dir
  opts.notes = function(line) lines[#lines + 1] = line end
  local p = runnel.open(opts)
  local rels = declare(p)
  if sink then rels.t:sink(function() end, { durable = true, name = "d" }) end
  if body then body(p, rels) end
  local st, ch = p:stats(), counts(rels)
  p:close()
  local notes = {}
  for _, l in ipairs(lines) do if l:find("durable sink", 1, true) then notes[#notes + 1] = l end end
  return ch, st, notes
end

-- What the state holds as read back: its relations' rows, next ids and last
-- group (runnel inspect, without the map's size), and runnel verify's word.
local function state_of(dir)
  local text = H.sh(H.runnel_bin .. " inspect " .. dir .. " 2>&1")
  local kept = {}
  for line in text:gmatch("[^\n]+") do
    if not line:find("^lmdb:") and not line:find("^space:") and not line:find("^state:") then kept[#kept + 1] = line end
  end
  local verify = H.sh(H.runnel_bin .. " verify " .. dir .. " 2>&1"):gsub("^%S+: ", "")
  return table.concat(kept, "\n"), verify
end

-- A big group over t: 3,000 inserts, 500 updates (each moves its row to
-- another g: the join and the aggregate update too), 100 deletes.
local function big_group(p, r)
  p:begin()
  for i = 1, 3000 do r.t:upsert{ k = "r" .. i, g = i % 7, pad = PAD } end
  for i = 1, 500 do r.t:upsert{ k = "r" .. i, g = (i + 1) % 7, pad = PAD } end
  for i = 2001, 2100 do r.t:delete("r" .. i) end
  p:commit()
end

local function fill_u(p, r)
  p:begin()
  for g = 0, 6 do r.u:insert{ g = g, name = "g" .. g } end
  p:commit()
end

-- The same session with a small map and a large one: the small one grew, the
-- large one did not, and both gave the same changes, state and notes.
local function both(opts, body, sink)
  local out = {}
  for _, size in ipairs{ SMALL, LARGE } do
    local dir = H.tmpdir() .. "/s"
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    o.map_size = size
    local ch, st = session(dir, o, false, body)
    out[size] = { ch = ch, st = st, dir = dir }
  end
  assert.is_true(out[SMALL].st.map_size > SMALL, "the small map grew")
  assert.equal(LARGE, out[LARGE].st.map_size)
  assert.same(out[LARGE].ch, out[SMALL].ch)
  assert.equal(out[LARGE].st.changes, out[SMALL].st.changes)
  assert.equal(out[LARGE].st.groups, out[SMALL].st.groups)
  assert.equal(out[LARGE].st.rollbacks, out[SMALL].st.rollbacks)
  local ls, lv = state_of(out[LARGE].dir)
  local ss, sv = state_of(out[SMALL].dir)
  assert.equal(ls, ss)
  assert.equal(lv, sv)
  assert.matches("whole", sv, 1, true)
  -- opened again: the counters read back from each state give the same next ids
  for _, size in ipairs{ SMALL, LARGE } do
    local p = runnel.open{ path = out[size].dir, notes = false }
    local r = declare(p)
    r.t:insert{ k = "next", g = 1, pad = "x" }
    out[size].next = { r.t:id_of("next"), r.t:count(), r.j:count(), r.a:count(), counts(r) }
    p:close()
  end
  assert.same(out[LARGE].next, out[SMALL].next)
  return out[SMALL]
end

describe("rel:changes() after the map grew in an open group", function()
  teardown(H.cleanup)
  for _, sync in ipairs{ true, false } do
    for _, wb in ipairs{ false, true } do
      it(("counts each change once: a table, a join, an aggregate (sync = %s, write_back = %s)")
          :format(tostring(sync), tostring(wb)), function()
        local got = both({ sync = sync, write_back = wb }, function(p, r)
          fill_u(p, r)
          r.t:insert{ k = "c1", g = 1, pad = "x" } -- carried with sync = false
          big_group(p, r)
        end)
        assert.same({ 3001, 500, 100 }, got.ch.t)
        assert.same({ 3001, 500, 100 }, got.ch.j)
        assert.same({ 7, 0, 0 }, got.ch.u)
        assert.equal(3001 + 500 + 100 + 7, got.st.changes)
      end)
    end
  end
end)

describe("rel:changes() after the map grew at commit (write_back: the map fills flushing)", function()
  teardown(H.cleanup)
  for _, sync in ipairs{ true, false } do
    it(("counts each change once (sync = %s)"):format(tostring(sync)), function()
      local got = both({ sync = sync, write_back = true }, function(p, r)
        fill_u(p, r)
        p:begin()
        for i = 1, 3000 do r.t:upsert{ k = "r" .. i, g = i % 7, pad = PAD } end
        p:commit()
      end)
      assert.same({ 3000, 0, 0 }, got.ch.t)
      assert.same({ 3000, 0, 0 }, got.ch.j)
    end)
  end
end)

describe("a group that fails after the map grew in it", function()
  teardown(H.cleanup)
  for _, sync in ipairs{ true, false } do
    for _, wb in ipairs{ false, true } do
      -- What a group rolled back emitted stays in rel:changes() (group.c, take_back: "rel:changes() still
      -- counts them"), once, as with no regrow; its rows, ids and "ch:" records do not stay.
      it(("leaves every count as the same failure without a regrow (sync = %s, write_back = %s)")
          :format(tostring(sync), tostring(wb)), function()
        local got = both({ sync = sync, write_back = wb }, function(p, r)
          fill_u(p, r)
          r.t:insert{ k = "c1", g = 1, pad = "x" }
          p:begin()
          for i = 1, 3000 do r.t:upsert{ k = "r" .. i, g = i % 7, pad = PAD } end
          assert.is_false(pcall(r.t.insert, r.t, { k = "c1", g = 2, pad = "y" })) -- a duplicate: rolled back
          assert.is_false(p:in_group())
          r.t:insert{ k = "c2", g = 2, pad = "x" }
        end)
        assert.equal(1, got.st.rollbacks)
        assert.equal(3, got.st.groups)
      end)
    end
  end
end)

describe("the ch: record of a group the map grew in", function()
  local dir
  before_each(function() dir = H.tmpdir() .. "/s" end)
  after_each(H.cleanup)

  local function missed(body, opts)
    session(dir, {}, true, function(_, r) r.t:insert{ k = "a", g = 1, pad = "x" } end) -- group 1, seen by d
    local _, st = session(dir, opts, false, body)
    local _, _, notes = session(dir, {}, true)
    return notes, st
  end

  for _, wb in ipairs{ false, true } do
    for _, size in ipairs{ SMALL, LARGE } do
      local what = ("write_back = %s, %s map"):format(tostring(wb), size == SMALL and "a small" or "a large")
      it("t changed in the open group, u in a carried one (" .. what .. ")", function()
        local notes, st = missed(function(p, r)
          r.u:insert{ g = 1, name = "x" }                                           -- group 2: u only, carried
          p:begin()                                                                 -- group 3: t, the map grows
          r.t:insert{ k = "b", g = 1, pad = "y" }
          for i = 2, 3000 do r.u:upsert{ g = i, name = PAD } end
          p:commit()
        end, { sync = false, map_size = size, write_back = wb })
        assert.equal(size == SMALL, st.map_size > size)
        assert.equal(1, #notes)
        assert.matches("missed the changes of t in groups 2 to 3:", notes[1], 1, true)
      end)

      it("t changed in a carried group only, the map grows in the next (" .. what .. ")", function()
        local notes, st = missed(function(p, r)
          r.t:insert{ k = "b", g = 1, pad = "y" }                                   -- group 2: t, carried
          p:begin()                                                                 -- group 3: u only, the map grows
          for i = 1, 3000 do r.u:upsert{ g = i, name = PAD } end
          p:commit()
        end, { sync = false, map_size = size, write_back = wb })
        assert.equal(size == SMALL, st.map_size > size)
        assert.equal(1, #notes)
        assert.matches("missed the changes of t in group 2:", notes[1], 1, true)
      end)

      it("t changed only in a group that failed after the map grew (" .. what .. ")", function()
        local notes, st = missed(function(p, r)
          r.u:insert{ g = 1, name = "x" }                                           -- group 2: u only, carried
          p:begin()                                                                 -- t, the map grows, then it fails
          for i = 1, 3000 do r.t:upsert{ k = "r" .. i, g = 1, pad = PAD } end
          assert.is_false(pcall(r.t.insert, r.t, { k = "a", g = 2, pad = "z" }))
          r.u:insert{ g = 2, name = "y" }                                           -- group 3: u only
        end, { sync = false, map_size = size, write_back = wb })
        assert.equal(size == SMALL, st.map_size > size)
        assert.same({}, notes)
      end)
    end
  end

  it("t changed in a group whose map grew at its commit (write_back, sync = false)", function()
    local notes, st = missed(function(p, r)
      r.u:insert{ g = 1, name = "x" }                                             -- group 2: u only, carried
      p:begin()                                                                   -- group 3: t, the map grows
      for i = 1, 3000 do r.t:upsert{ k = "r" .. i, g = 1, pad = PAD } end
      p:commit()
    end, { sync = false, map_size = SMALL, write_back = true })
    assert.is_true(st.map_size > SMALL)
    assert.equal(1, #notes)
    assert.matches("missed the changes of t in groups 2 to 3:", notes[1], 1, true)
  end)
end)
