-- Fan-outs at the edges of the stack array a right change collects its left
-- rows in (32 entries, then the heap: core/join_apply.c right_step), for
-- every shape of join (on, mapper, joiner, joiner of references, fused
-- selects that rename, reorder, drop the key or keep only right columns, a
-- selector). After every group each shape's rows(), count(), get(), its
-- followed events and runnel.attach equal a recomputation from the source
-- tables; a group that fails in the middle of a fan-out leaves no trace.
local runnel = require "runnel"
local H = require "helper"
local E = require "join_edges_helper"

local null = runnel.null

-- Compares every shape with the recomputation; with n_changed, asserts the
-- group gave each shape exactly one event per result that changed.
local function check(env, label, one_change, attach_now)
  local want = E.expected(env.shapes, env.players, env.teams)
  for _, sh in ipairs(env.shapes) do
    local f = env.follow[sh.name]
    local names = f.names
    local where = label .. ": " .. sh.name
    local events = f.settle(where)
    local lines = E.map_lines(want[sh.name], names)
    assert.same(lines, f.lines(), where .. " (events replayed)")
    assert.same(lines, E.rows_lines(sh.rel, names), where .. " (rows)")
    assert.equal(#lines, sh.rel:count(), where .. " (count)")
    if one_change and sh.exact then
      assert.equal(E.differing(env.last[sh.name], want[sh.name], names), events, where .. " (events per change)")
    end
  end
  -- get() of the keyed joins by their key
  -- get() of the keyed joins by their key, for a few left rows
  for _, pid in ipairs{ 3, 66, 100002 } do
    assert.same(want.left[pid], env.by_name.left.rel:get(pid), label .. ": left:get(" .. pid .. ")")
    assert.same(want.mapped_inner[pid], env.by_name.mapped_inner.rel:get(pid), label .. ": mapped_inner:get(" .. pid .. ")")
  end
  env.checks = (env.checks or 0) + 1
  if env.attach and (attach_now or env.checks % 3 == 0) then -- carried groups are flushed for attach to see them
    env.p:flush()
    for _, name in ipairs{ "left", "sel_rename", "mapped_inner" } do
      local att = runnel.attach(env.dir, name)
      local got = {}
      for r in att:rows() do got[#got + 1] = E.line(r, env.follow[name].names) end
      table.sort(got)
      assert.same(E.map_lines(want[name], env.follow[name].names), got, label .. ": attach " .. name)
      att:close()
    end
  end
  env.last = want
end

-- The big fan-out follows fewer shapes and fewer failures (run time).
local BIG_ONLY = { left = true, mapped_inner = true, sel_rename = true }

local function setup(n)
  local dir = H.tmpdir()
  local p = runnel.open{ path = dir .. "/state", notes = false, sync = false }
  local teams, players = E.tables(p)
  local env = { p = p, dir = dir .. "/state", teams = teams, players = players, follow = {}, by_name = {} }
  env.shapes = E.shapes(p, players, teams, n > 100 and BIG_ONLY or nil)
  for _, sh in ipairs(env.shapes) do
    env.follow[sh.name] = E.follow(sh.rel)
    env.by_name[sh.name] = sh
  end
  env.trap_left = E.trap(env.by_name.left.rel)
  env.trap_sel = E.trap(env.by_name.sel_rename.rel)
  env.last = E.expected(env.shapes, players, teams)
  p:batch(function()
    teams:insert{ id = 7, name = "seven" }
    teams:insert{ id = 8, name = "eight", region = "eu" }
    -- left ids interleave: the fan-out's rows are not one run of ids
    for i = 1, n do
      players:insert{ id = 2 * i, name = "p" .. i, team_id = 7, score = i % 3 }
      if i <= 5 then players:insert{ id = 2 * i + 1, name = "q" .. i, team_id = 8 } end
    end
    players:insert{ id = 100001, name = "nobody" }
    players:insert{ id = 100002, name = "missing", team_id = 99 }
  end)
  env.attach = true
  check(env, "seeded")
  return env
end

-- Everything visible, as text: compared before and after a failed group.
local function snapshot(env)
  local s = { players = E.rows_lines(env.players), teams = E.rows_lines(env.teams), seq = env.p:seq() }
  for _, sh in ipairs(env.shapes) do
    s[sh.name] = E.rows_lines(sh.rel, env.follow[sh.name].names)
    s[sh.name .. "#"] = sh.rel:count()
  end
  return s
end

local function fails(env, trap, at, fn)
  local before = snapshot(env)
  trap.arm(at)
  local ok, err = pcall(fn)
  trap.arm(nil)
  assert.is_false(ok, "the group should fail")
  assert.matches("trap sprung", tostring(err))
  assert.is_false(env.p:in_group())
  assert.same(before, snapshot(env))
  check(env, "after a failed group", false, true)
end

describe("a right change fanning out", function()
  after_each(H.cleanup)

  for _, n in ipairs{ 31, 32, 33, 64, 65, 1000 } do
    it(("to %d left rows matches the recomputation, and a failure mid-way leaves no trace"):format(n), function()
      local env = setup(n)
      local p, teams, players = env.p, env.teams, env.players
      local function step(label, fn) fn(); check(env, label, true) end
      step("rename", function() teams:update{ id = 7, name = "seven*" } end)
      step("region", function() teams:update{ id = 7, region = "us" } end) -- sel_rename keeps none of it
      if n < 100 then step("same", function() teams:update{ id = 7, region = "us" } end)   -- no change at all
      end
      step("delete", function() teams:delete{ id = 7 } end)
      step("reinsert", function() teams:insert{ id = 7, name = "back", region = null } end)
      if n < 100 then step("upsert", function() teams:upsert{ id = 7, name = "up" } end) end
      step("missing key appears", function() teams:insert{ id = 99, name = "ninety-nine" } end)
      -- a failure at the first, the 32nd, the 33rd and the last row of a fan-out
      for _, at in ipairs(n > 100 and { 33, n } or { 1, 32, 33, n }) do
        if at <= n then fails(env, env.trap_left, at, function() teams:update{ id = 7, name = "never" .. at } end) end
        fails(env, env.trap_sel, at, function()
          p:batch(function()
            players:update{ id = 2, team_id = 8 }
            teams:update{ id = 7, name = "nope" .. at }
            teams:update{ id = 8, name = "nor" .. at }
          end)
        end)
      end
      -- a failure after the fan-out, in the same group
      fails(env, env.trap_left, n + 2, function()
        p:batch(function()
          teams:delete{ id = 7 }
          players:update{ id = 4, name = "late" }
          players:update{ id = 6, team_id = null }
        end)
      end)
      -- the same changes again, now succeeding
      step("again", function() teams:update{ id = 7, name = "never1" } end)
      -- many changes to the same rows in one group, then a rollback, then a commit
      local before = snapshot(env)
      p:begin()
      teams:update{ id = 7, name = "x" }
      players:update{ id = 2, team_id = 8 }
      teams:delete{ id = 8 }
      teams:update{ id = 7, name = "y" }
      players:update{ id = 2, team_id = 7 }
      p:rollback()
      assert.same(before, snapshot(env))
      check(env, "rolled back")
      p:batch(function()
        teams:update{ id = 7, name = "x" }
        players:update{ id = 2, team_id = 8 }
        teams:delete{ id = 8 }
        teams:update{ id = 7, name = "y" }
        players:update{ id = 4, team_id = 99 }
        teams:insert{ id = 8, name = "eight again" }
        players:delete{ id = 6 }
        players:insert{ id = 6, name = "p3 again", team_id = 7 }
      end)
      check(env, "many in one group")
      step("delete last", function() teams:delete{ id = 7 } end)
      p:close()
    end)
  end
end)

describe("a self-join fanning out", function()
  -- The left and right rows are of one relation: a fused select walks the
  -- right row's columns as a left row's (join_state.c rn_join_spans_walk).
  it("through a fused select matches the recomputation as a boss's row changes", function()
    local p = runnel.open()
    local people = p:table("people", { {"id","int"}, {"name","string"}, {"boss","int", null = true},
                                       {"pad","string", default = ""}, {"level","int", default = 0}, key = "id" })
    local spec = { {"who","name"}, {"boss_name","people.name"}, {"boss_level","people.level"}, "id" }
    local sel = people:join(people, { on = "boss", kind = "left", name = "org" }):select(spec, "org_sel")
    local f = E.follow(sel)
    local function check(label)
      local want = {}
      for r in people:rows() do
        local b = r.boss and people:get(r.boss)
        want[#want + 1] = { who = r.name, boss_name = b and b.name, boss_level = b and b.level, id = r.id }
      end
      f.settle(label)
      local lines = E.map_lines(want, f.names)
      assert.same(lines, f.lines(), label .. " (events)")
      assert.same(lines, E.rows_lines(sel, f.names), label .. " (rows)")
    end
    p:batch(function()
      people:insert{ id = 1, name = "ceo" }
      for i = 2, 70 do people:insert{ id = i, name = "e" .. i, boss = i <= 40 and 1 or 2, pad = ("x"):rep(i) } end
    end)
    check("seeded")
    people:update{ id = 1, name = "chief" }
    check("renamed")
    people:update{ id = 1, level = 9, pad = "long" }
    check("levelled")
    people:update{ id = 2, boss = 3 }
    check("moved")
    people:update{ id = 1, boss = 1 }
    check("own boss")
    people:delete{ id = 1 }
    check("gone")
    people:insert{ id = 1, name = "back", level = 1 }
    check("back")
    p:close()
  end)
end)

describe("a derived right row whose key moves", function()
  -- The right side keyed by a column its source can update: one change
  -- fans out to the old key's left rows and the new key's, merged in
  -- ascending left id (join_apply.c right_step), the two runs together
  -- past the 32 entries kept on the stack.
  for _, sizes in ipairs{ { 20, 20 }, { 32, 1 }, { 1, 32 }, { 33, 40 }, { 0, 33 } } do
    it(("fans out to both keys' left rows (%d and %d of them)"):format(sizes[1], sizes[2]), function()
      local p = runnel.open()
      local teams = p:table("teams", { {"id","int"}, {"code","string"}, {"name","string"}, key = "id" })
      local players = p:table("players", { {"id","int"}, {"code","string", null = true}, key = "id" })
      local coded = teams:select({ "code", "name", key = "code" }, "coded")
      local j = players:join(coded, { on = "code", kind = "left", name = "pc" })
      local sel = players:join(coded, { on = "code", kind = "inner", name = "pc2" })
        :select({ {"pid","id"}, {"tname","name"} }, "pc2_sel")
      local fj, fs = E.follow(j), E.follow(sel)
      local function check(label, events)
        local by_code = {}
        for t in teams:rows() do by_code[t.code] = t end
        local want, want_sel = {}, {}
        for pl in players:rows() do
          local t = pl.code and by_code[pl.code]
          want[#want + 1] = { id = pl.id, code = pl.code, ["coded.code"] = t and t.code, name = t and t.name }
          if t then want_sel[#want_sel + 1] = { pid = pl.id, tname = t.name } end
        end
        local n = fj.settle(label)
        fs.settle(label)
        if events then assert.equal(events, n, label .. ": events") end
        assert.same(E.map_lines(want, fj.names), fj.lines(), label .. " (events)")
        assert.same(E.map_lines(want, fj.names), E.rows_lines(j, fj.names), label .. " (rows)")
        assert.same(E.map_lines(want_sel, fs.names), fs.lines(), label .. " (select events)")
        assert.same(E.map_lines(want_sel, fs.names), E.rows_lines(sel, fs.names), label .. " (select rows)")
      end
      p:batch(function()
        teams:insert{ id = 1, code = "A", name = "alpha" }
        local id = 0
        for i = 1, math.max(sizes[1], sizes[2]) do -- the two keys' left ids interleave
          if i <= sizes[1] then id = id + 1; players:insert{ id = id, code = "A" } end
          if i <= sizes[2] then id = id + 1; players:insert{ id = id, code = "B" } end
        end
        players:insert{ id = 1000, code = "C" }
      end)
      check("seeded")
      teams:update{ id = 1, code = "B" }
      check("A to B", sizes[1] + sizes[2])
      teams:update{ id = 1, code = "A", name = "again" }
      check("B to A", sizes[1] + sizes[2])
      p:begin()
      teams:update{ id = 1, code = "C" }
      teams:update{ id = 1, code = "B" }
      p:rollback()
      check("rolled back", 0)
      teams:update{ id = 1, code = "C" }
      check("A to C", sizes[1] + 1)
      p:close()
    end)
  end
end)

describe("reading a join in the middle of its fan-out", function()
  it("gives each sink the row a read of the join gives at that point, and leaves the fan-out whole", function()
    local p = runnel.open()
    local teams, players = E.tables(p)
    local j = players:join(teams, { on = "team_id", kind = "left", name = "lj" })
    local sel = j:select({ {"pid","id"}, {"tname","teams.name"} }, "lj_sel")
    local mj = players:join(teams, { mapper = function(r) return r.team_id end, kind = "left", name = "mj",
      joiner = function(l, t) return l.id, t and t.name end,
      columns = { {"pid","int"}, {"tname","string", null = true}, key = "pid" } })
    local seen = 0
    local function reader(rel)
      rel:sink(function(verb, row, old)
        local r = row or old
        local got = rel:get(r.pid)
        if verb == "DELETE" then assert.is_nil(got) else assert.same(row, got) end
        assert.equal(players:count(), mj:count()) -- a whole count, read mid fan-out
        seen = seen + 1
      end)
    end
    reader(sel)
    reader(mj)
    local fs, fm = E.follow(sel), E.follow(mj)
    p:batch(function()
      teams:insert{ id = 7, name = "seven" }
      for i = 1, 70 do players:insert{ id = i, name = "p" .. i, team_id = 7 } end
    end)
    for _, change in ipairs{ function() teams:update{ id = 7, name = "renamed" } end,
                             function() teams:delete{ id = 7 } end,
                             function() teams:insert{ id = 7, name = "back" } end } do
      change()
      fs.settle()
      fm.settle()
      local want = {}
      for pl in players:rows() do
        local t = teams:get(pl.team_id)
        want[#want + 1] = { pid = pl.id, tname = t and t.name }
      end
      assert.same(E.map_lines(want, fs.names), fs.lines())
      assert.same(E.map_lines(want, fm.names), fm.lines())
      assert.same(E.map_lines(want, fs.names), E.rows_lines(sel, fs.names))
    end
    assert.equal(70 * 2 * 4, seen)
    p:close()
  end)
end)

describe("a fused select whose join gains a reader later", function()
  it("goes on emitting what the select of the join's rows would", function()
    local p = runnel.open()
    local teams, players = E.tables(p)
    local j = players:join(teams, { on = "team_id", kind = "left", name = "lj" })
    local spec = { {"tname","teams.name"}, {"pid","id"}, "region" }
    local sel = j:select(spec, "lj_sel")
    local fs = E.follow(sel)
    local function check(label, fj)
      local want, want_j = {}, {}
      for pl in players:rows() do
        local t = pl.team_id and teams:get(pl.team_id)
        want[#want + 1] = { tname = t and t.name, pid = pl.id, region = t and t.region }
        want_j[#want_j + 1] = { id = pl.id, name = pl.name, team_id = pl.team_id, score = pl.score,
                                ["teams.id"] = t and t.id, ["teams.name"] = t and t.name, region = t and t.region }
      end
      fs.settle(label)
      assert.same(E.map_lines(want, fs.names), fs.lines(), label)
      assert.same(E.map_lines(want, fs.names), E.rows_lines(sel, fs.names), label .. " (rows)")
      if fj then
        fj.settle(label)
        assert.same(E.map_lines(want_j, fj.names), fj.lines(), label .. " (join)")
      end
    end
    teams:insert{ id = 1, name = "one" }
    p:batch(function() for i = 1, 40 do players:insert{ id = i, name = "p" .. i, team_id = 1 + i % 2 } end end)
    teams:update{ id = 1, name = "uno" }
    check("fused")
    local fj = E.follow(j) -- a second reader: the join makes its own rows from now on
    for r, id in j:rows() do fj.rows[id] = E.line(r, fj.names) end
    teams:insert{ id = 2, name = "two", region = "eu" }
    check("unfused", fj)
    teams:update{ id = 1, region = "us" }
    players:update{ id = 3, team_id = 1 }
    check("unfused again", fj)
    p:close()
  end)
end)

describe("a keyless left table fanning out", function()
  it("keeps one result per left row, equal rows included, through a fused select", function()
    local p = runnel.open()
    local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
    local kl = p:table("kl", { {"a","int"}, {"team","int", null = true} })
    local j = kl:join(teams, { on = "team", kind = "left", name = "klj" })
    local sel = kl:join(teams, { on = "team", kind = "inner", name = "klj2" }):select({ "name", "a" }, "klj_sel")
    local fj, fs = E.follow(j), E.follow(sel)
    local function check(label)
      local want, want_sel = {}, {}
      for r in kl:rows() do
        local t = r.team and teams:get(r.team)
        want[#want + 1] = { a = r.a, team = r.team, id = t and t.id, name = t and t.name }
        if t then want_sel[#want_sel + 1] = { name = t.name, a = r.a } end
      end
      fj.settle(label)
      fs.settle(label)
      assert.same(E.map_lines(want, fj.names), fj.lines(), label)
      assert.same(E.map_lines(want, fj.names), E.rows_lines(j, fj.names), label .. " rows")
      assert.same(E.map_lines(want_sel, fs.names), fs.lines(), label .. " select")
      assert.equal(#want_sel, sel:count(), label .. " select count")
    end
    teams:insert{ id = 7, name = "seven" }
    p:batch(function()
      for _ = 1, 40 do kl:insert{ a = 1, team = 7 } end
      for i = 1, 10 do kl:insert{ a = i, team = 8 } end
      kl:insert{ a = 0 }
    end)
    check("seeded")
    teams:update{ id = 7, name = "renamed" }
    check("renamed")
    kl:delete{ a = 1, team = 7 }
    kl:update({ a = 1, team = 7 }, { a = 1, team = 8 })
    check("one gone, one moved")
    teams:insert{ id = 8, name = "eight" }
    check("eight")
    p:begin()
    teams:delete{ id = 7 }
    for _ = 1, 5 do kl:delete{ a = 1, team = 7 } end
    p:rollback()
    check("rolled back")
    teams:delete{ id = 7 }
    check("seven gone")
    p:close()
  end)
end)
