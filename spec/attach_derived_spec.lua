-- Reading joins, tops and selects from outside the pipeline that declares
-- them (issue 14): runnel.attach and runnel query make their rows from the
-- state in one read transaction. The rows read equal the rows the live
-- relation emitted (its events replayed), after every group — committed,
-- rolled back, failed — and across reopening.
local runnel = require "runnel"
local H = require "helper"

local bin = H.runnel_bin

local function quiet(dir) return runnel.open{ path = dir, notes = false } end

local function copy(row)
  local t = {}
  for k, v in pairs(row) do t[k] = v end
  return t
end

-- The rows rel emitted, replayed: id -> row, a group's changes applied at
-- its commit (a rolled-back group's thrown away).
local function replay(rel, rows)
  local pending = {}
  rel:sink{
    insert = function(row, info) pending[#pending + 1] = { info.id, copy(row) } end,
    update = function(row, _, info) pending[#pending + 1] = { info.id, copy(row) } end,
    delete = function(_, info) pending[#pending + 1] = { info.id, false } end,
    commit = function()
      for _, c in ipairs(pending) do rows[c[1]] = c[2] or nil end
      pending = {}
    end,
    rollback = function() pending = {} end,
  }
end

-- Every kind of join there is, a fused select, a top and selects of them.
-- replayed: the relations whose events are replayed into want[name];
-- scanned: those compared with rows() in the writing process (a sink on a
-- fused join would end its fusion; a select's rows() computes them).
local replayed = { "inner", "left", "outer", "mapped", "joined", "refs", "copied", "klj", "looked", "selected",
                   "fused", "best" }
local scanned = { "fj", "best_ids", "tsel" }

local function declare(p, want)
  local teams = p:table("teams", { {"id","int"}, {"name","string"}, {"region","string", null = true}, key = "id" })
  local players = p:table("players", { {"id","int"}, {"name","string"}, {"team","int", null = true},
                                       {"score","int"}, key = "id" })
  local bases = p:table("bases", { {"id","int"}, {"hp","int"}, key = "id" })
  local kl = p:table("kl", { {"a","int"}, {"team","int", null = true} })
  local regions = p:lookup("regions", { {"id","int"}, {"label","string"}, key = "id",
    source = function(k) if k % 3 == 0 then return nil end return { id = k, label = "L" .. k } end })
  local r = {}
  r.inner = players:join(teams, { on = "team", name = "inner" })
  r.left = players:join(teams, { on = "team", kind = "left", name = "left" })
  r.outer = players:join(bases, { on = "id", kind = "outer", name = "outer" })
  r.mapped = players:join(teams, { mapper = function(row) return row.team end, kind = "left", name = "mapped" })
  r.joined = players:join(teams, { on = "team", kind = "left", name = "joined",
    joiner = function(l, t)
      if t and t.name == "x" then return nil end
      return { pid = l.id, tname = t and t.name, s = l.score }
    end,
    columns = { {"pid","int"}, {"tname","string", null = true}, {"s","int"}, key = "pid" } })
  r.refs = players:join(teams, { on = "team", joiner = { who = "name", t = "teams.name", tid = "team", id = "id" },
                                 name = "refs" })
  r.tsel = teams:select({ "id", {"tname", "name"} }, "tsel")
  r.copied = players:join(r.tsel, { on = "team", kind = "left", name = "copied" })
  r.klj = kl:join(teams, { on = "team", name = "klj" })
  r.looked = players:join(regions, { on = "team", kind = "left", name = "looked" })
  r.selected = players:join(teams, { on = "team", kind = "left", name = "selected",
                                     selector = function(lk, rk) return lk * 100 + (rk or 0) end })
  r.fj = players:join(teams, { on = "team", kind = "left", name = "fj" })
  r.fused = r.fj:select({ "id", {"team_name", "teams.name"}, "score" }, "fused")
  r.best = players:top{ n = 2, by = "team", order = { {"score", "desc"} }, name = "best" }
  r.best_ids = r.best:select({ "id", "rank" }, "best_ids")
  for _, name in ipairs(replayed) do replay(r[name], want[name]) end
  return { teams = teams, players = players, bases = bases, kl = kl }, r
end

-- One random change; it may fail (a duplicate insert, an absent key), which
-- rolls its group back.
local function change(t, rnd)
  local pick = rnd(10)
  local team = rnd(8) == 1 and runnel.null or rnd(6)
  local names = { "a", "b", "x", "c" }
  if pick <= 4 then
    local id = rnd(12)
    local op = rnd(4)
    if op == 1 then t.players:insert{ id = id, name = names[rnd(4)], team = team, score = rnd(5) }
    elseif op == 2 then t.players:update{ id = id, score = rnd(5), team = team }
    elseif op == 3 then t.players:delete{ id = id }
    else t.players:upsert{ id = id, name = names[rnd(4)], team = team, score = rnd(5) } end
  elseif pick <= 7 then
    local id = rnd(6)
    local op = rnd(3)
    if op == 1 then t.teams:upsert{ id = id, name = names[rnd(4)], region = rnd(2) == 1 and "eu" or nil }
    elseif op == 2 then t.teams:update{ id = id, name = names[rnd(4)] }
    else t.teams:delete{ id = id } end
  elseif pick <= 9 then
    local id = rnd(12)
    if rnd(2) == 1 then t.bases:upsert{ id = id, hp = rnd(100) } else t.bases:delete{ id = id } end
  else
    local row = { a = rnd(3), team = rnd(6) }
    if rnd(2) == 1 then t.kl:insert(row) else t.kl:delete(row) end
  end
end

local function sorted_ids(map)
  local ids = {}
  for id in pairs(map) do ids[#ids + 1] = id end
  table.sort(ids)
  return ids
end

local function key_of(row, cols)
  local k = {}
  for _, c in ipairs(cols) do if c.key then k[#k + 1] = row[c.name] end end
  return k
end

local function before(a, b)
  for i = 1, #a do
    if a[i] ~= b[i] then return a[i] < b[i] end
  end
  return false
end

-- The rows attach reads equal want (id -> row); keyed ones come in key
-- order and get finds each by its key; count agrees.
local function check(dir, name, want, label)
  local att = runnel.attach(dir, name)
  local cols = att:columns()
  local got, order = {}, {}
  for row, id in att:rows() do
    got[id] = row
    order[#order + 1] = row
  end
  assert.same(want, got, label .. ": " .. name)
  assert.equal(#order, att:count(), label .. ": " .. name .. " count")
  local keyed = false
  for _, c in ipairs(cols) do keyed = keyed or c.key end
  if keyed then
    for i = 2, #order do -- a top's rows come in group then rank order instead
      if name ~= "best" then
        assert.is_true(before(key_of(order[i - 1], cols), key_of(order[i], cols)), label .. ": " .. name .. " order")
      end
    end
    for _, row in ipairs(order) do
      local k = {}
      for _, c in ipairs(cols) do if c.key then k[c.name] = row[c.name] end end
      assert.same(row, att:get(k), label .. ": " .. name .. " get")
    end
  end
  att:close()
end

local nonempty = {} -- names of the relations read with rows, over a run

local function check_all(dir, want, rels, label)
  for _, name in ipairs(replayed) do
    check(dir, name, want[name], label)
    if next(want[name]) then nonempty[name] = true end
  end
  for _, name in ipairs(scanned) do
    local rows = {}
    for row, id in rels[name]:rows() do rows[id] = row end
    check(dir, name, rows, label)
  end
end

describe("runnel.attach of joins, tops and selects", function()
  after_each(H.cleanup)

  for _, seed in ipairs{ 11, 29 } do
    it("reads the rows each emitted, after every group, rollbacks and reopening (seed " .. seed .. ")", function()
      local dir = H.tmpdir()
      local state = seed
      local function rnd(n) -- a small LCG: the same workload on every Lua
        state = (state * 1103515245 + 12345) % 2147483648
        return (state >> 16) % n + 1
      end
      local want = {}
      nonempty = {}
      for _, name in ipairs(replayed) do want[name] = {} end
      local p = quiet(dir)
      local t, rels = declare(p, want)
      for group = 1, 70 do
        p:begin()
        local ok = true
        for _ = 1, rnd(6) do
          ok = pcall(change, t, rnd)
          if not ok then break end -- the group is rolled back already
        end
        if ok then
          if rnd(6) == 1 then p:rollback() else p:commit() end
        end
        check_all(dir, want, rels, ("seed %d group %d"):format(seed, group))
        if group % 25 == 0 then
          p:close()
          p = quiet(dir)
          t, rels = declare(p, want)
          check_all(dir, want, rels, ("seed %d reopened at %d"):format(seed, group))
        end
      end
      for _, name in ipairs(replayed) do assert.is_true(nonempty[name], name .. " never had rows") end
      p:close()
      -- and from another process: the same rows
      for _, name in ipairs{ "left", "outer", "fused", "best" } do
        local out, err, code = H.sh(("%s query %s %s --format ndjson"):format(bin, dir, name))
        assert.same({ "", 0 }, { err, code })
        local lines = 0
        for _ in out:gmatch("\n") do lines = lines + 1 end
        local count = 0
        for _ in pairs(want[name]) do count = count + 1 end
        assert.equal(count, lines, name)
      end
    end)
  end
end)

-- Rows as text, to compare lists of rows as sets.
local function text(row)
  local keys = {}
  for k in pairs(row) do keys[#keys + 1] = k end
  table.sort(keys)
  for i, k in ipairs(keys) do keys[i] = k .. "=" .. tostring(row[k]) end
  return table.concat(keys, ",")
end

local function by_text(a, b) return text(a) < text(b) end

describe("runnel.attach and runnel query of a select", function()
  after_each(H.cleanup)

  it("reads it through its input, whatever that is, in the select's key order", function()
    local dir = H.tmpdir()
    local p = quiet(dir)
    local t = p:table("t", { {"k","int"}, {"g","string"}, {"v","int"}, key = "k" })
    local bag = p:table("bag", { {"g","string"}, {"v","int"} })
    local live = {
      t:select({ {"key","k"}, "v" }, "renamed"),
      t:select({ "v", "k", key = "v" }, "by_v"),
      bag:select({ "v" }, "bag_v"),
      bag:distinct("bag_d"):select({ "g" }, "bag_dg"),
      t:aggregate{ by = "g", n = runnel.count(), s = runnel.sum("v"), name = "per_g" }:select({ "s", "g" }, "per_g_s"),
      t:index{ "v", "desc", name = "by_v_desc" }:select({ "k", "v" }, "ix_kv"),
      t:join(t, { on = "k", name = "self" }):select({ "k", {"v2", "t.v"} }, "self_kv"),
      t:top{ n = 2, by = "g", order = { "v" }, name = "low" }:select({ "g", "rank", "k" }, "low_s"),
    }
    live[#live + 1] = live[1]:select({ "key" }, "keys")
    for k = 1, 6 do t:insert{ k = k, g = k % 2 == 0 and "even" or "odd", v = (k * 7) % 10 } end
    bag:insert{ g = "a", v = 1 } bag:insert{ g = "a", v = 1 } bag:insert{ g = "b", v = 2 }
    local want, names = {}, {}
    for i, rel in ipairs(live) do
      local rows = {}
      for row in rel:rows() do rows[#rows + 1] = row end
      names[i] = rel:name()
      want[names[i]] = rows
    end
    p:close()
    for _, name in ipairs(names) do
      local att = runnel.attach(dir, name)
      local got = {}
      for row in att:rows() do got[#got + 1] = row end
      if name == "by_v" then
        assert.same({ 1, 2, 4, 5 }, { got[1].v, got[2].v, got[3].v, got[4].v }) -- its own key's order
      end
      local rows = want[name] -- rows() in the writer come in id order: compared as sets
      table.sort(got, by_text)
      table.sort(rows, by_text)
      assert.same(rows, got, name)
      assert.equal("select", select(2, att:columns()))
      att:close()
    end
    local out = H.sh(("%s query %s renamed 2 5 --format csv"):format(bin, dir))
    assert.equal("key,v\n2,4\n5,5\n", out)
  end)

  it("refuses a select of what it cannot read, naming both", function()
    local dir = H.tmpdir()
    local p = quiet(dir)
    local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
    t:filter(function(r) return r.v > 0 end, "pos"):select({ "k" }, "pos_k")
    p:close()
    local _, err, code = H.sh(("%s query %s pos_k"):format(bin, dir))
    assert.same({ ('runnel: attach %s: "pos_k" is a select of "pos": "pos" is a filter: a Lua function in the '
                   .. 'script that declares it chooses its rows, and the state does not hold them (read its input, '
                   .. 'or keep its rows with rel:sink(runnel.store("pos")) and read that store)\n'):format(dir), 1 },
                { err, code })
  end)
end)

describe("what runnel.attach and runnel query cannot read", function()
  after_each(H.cleanup)

  it("names the relation, says why and what to do", function()
    local dir = H.tmpdir()
    local p = quiet(dir)
    local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
    local ev = p:stream("ev", { {"k","int"} })
    t:map(function(r) return { k = r.k } end, { {"k","int"}, key = "k" }, "ks")
    ev:join(t, { on = "k", name = "evj" })
    t:cdc{ name = "t_log" }
    p:lookup("lk", { {"k","int"}, key = "k", source = function() return nil end })
    p:close()
    local said = {}
    for _, name in ipairs{ "ks", "ev", "evj", "t_log", "lk" } do
      local _, err, code = H.sh(("%s query %s %s"):format(bin, dir, name))
      assert.equal(1, code)
      said[name] = err:gsub("^runnel: attach [^:]*: ", "")
    end
    assert.same({
      ks = '"ks" is a map: a Lua function in the script that declares it computes its rows, and the state does not '
        .. 'hold them (keep them with rel:sink(runnel.store("ks")) and read that store; a select{} is read from its '
        .. 'input once its pipeline ran with runnel ' .. runnel._VERSION:match("runnel (.*)") .. ')\n',
      ev = '"ev" is a stream: its events go to its sinks as they come, and the state keeps none (keep them with '
        .. 'rel:sink(runnel.store("ev")) and read that store)\n',
      evj = 'join "evj": it joins stream "ev": its results are events, which go to its sinks as they come, and it '
        .. 'keeps no rows (keep them with rel:sink(runnel.store("evj")) and read that store)\n',
      t_log = '"t_log" is a cdc: its events go to its sinks as they come, and the state keeps none (keep them with '
        .. 'rel:sink(runnel.store("t_log")) and read that store)\n',
      lk = '"lk" is a lookup: its rows are fetched from its source when a join asks for them, and the state keeps '
        .. 'none (read the source)\n',
    }, said)
  end)

  it("refuses a join its pipeline stopped declaring once the state moved on, and reads it again once declared", function()
    local dir = H.tmpdir()
    local function v1(with_join)
      local p = quiet(dir)
      local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
      local players = p:table("players", { {"id","int"}, {"team","int"}, key = "id" })
      if with_join then players:join(teams, { on = "team", name = "roster" }) end
      return p, teams, players
    end
    local p, teams, players = v1(true)
    teams:insert{ id = 7, name = "red" }
    players:insert{ id = 1, team = 7 }
    p:close()
    p, teams = v1(false)
    teams:update{ id = 7, name = "blue" }
    p:close()
    local _, err, code = H.sh(("%s query %s roster"):format(bin, dir))
    assert.same({ ('runnel: join "roster" holds its results as of group 2 and the state is at group 3 (its pipeline '
                   .. 'no longer declares it), while table "teams" it reads beside them is current: declare the join '
                   .. 'again to bring it up to date, or drop it\n'), 1 }, { err, code })
    p = v1(true)
    p:close()
    local att = runnel.attach(dir, "roster")
    assert.same({ { id = 1, team = 7, ["teams.id"] = 7, name = "blue" } }, att:rows())
    att:close()
  end)
end)

describe("runnel query of a join and a top", function()
  after_each(H.cleanup)

  it("prints their rows in key order (a top's: group then rank), by key and with a limit", function()
    local dir = H.tmpdir()
    local p = quiet(dir)
    local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"name","string"}, {"team","int", null = true},
                                         {"score","int"}, key = "id" })
    players:join(teams, { on = "team", kind = "left", name = "roster" })
    players:top{ n = 2, by = "team", order = { {"score", "desc"} }, name = "best" }
    teams:insert{ id = 7, name = "red" }
    players:insert{ id = 3, name = "cy", team = 7, score = 9 }
    players:insert{ id = 1, name = "ann", team = 7, score = 5 }
    players:insert{ id = 2, name = "bob", score = 3 }
    players:insert{ id = 4, name = "di", team = 7, score = 1 }
    p:close()
    local out, err, code = H.sh(("%s query %s roster --limit 3"):format(bin, dir))
    assert.same({ " id | name | team | score | teams.id | teams.name\n"
               .. "----+------+------+-------+----------+------------\n"
               .. "  1 | ann  |    7 |     5 |        7 | red\n"
               .. "  2 | bob  |      |     3 |          |\n"
               .. "  3 | cy   |    7 |     9 |        7 | red\n"
               .. "(3 rows shown, more exist)\n", "", 0 }, { out, err, code })
    out = H.sh(("%s query %s best --format ndjson"):format(bin, dir))
    assert.equal('{"id":2,"name":"bob","team":null,"score":3,"rank":1}\n' -- the null group first, as kept
              .. '{"id":3,"name":"cy","team":7,"score":9,"rank":1}\n'
              .. '{"id":1,"name":"ann","team":7,"score":5,"rank":2}\n', out)
    out = H.sh(("%s query %s best 2 4 1 --format csv"):format(bin, dir)) -- by its input's key; 4 is not in it
    assert.equal("id,name,team,score,rank\n2,bob,,3,1\n1,ann,7,5,2\n", out)
  end)
end)

describe("runnel.attach of a join across a deploy", function()
  after_each(H.cleanup)

  it("reads the join rebuilt for its inputs' new schemas", function()
    local dir = H.tmpdir()
    local p = quiet(dir)
    local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"lvl","int"}, {"team","int"}, key = "id" })
    players:join(teams, { on = "team", name = "roster" }):select({ "id", "lvl", "name" }, "roster_s")
    teams:insert{ id = 7, name = "red" }
    players:insert{ id = 1, lvl = 3, team = 7 }
    p:close()
    p = quiet(dir)
    teams = p:table("teams", { {"id","int"}, {"name","string"}, {"region","string", default = "eu"}, key = "id" })
    players = p:table("players", { {"id","int"}, {"level","int", was = "lvl"}, {"team","int"}, key = "id" })
    local stale = runnel.attach(dir, "roster")
    local _, err = pcall(stale.rows, stale)
    stale:close()
    assert.matches('join "roster": table "teams" has another schema than when the join was last declared: declare '
                   .. 'the join again (it is rebuilt), then read it', err, 1, true)
    players:join(teams, { on = "team", name = "roster" }):select({ "id", "level", "region" }, "roster_s")
    local rebuilt = runnel.attach(dir, "roster")
    assert.equal("eu", rebuilt:get(1).region) -- read at once, no group needed
    rebuilt:close()
    players:insert{ id = 2, level = 1, team = 7 }
    p:close()
    local att = runnel.attach(dir, "roster")
    assert.same({ { id = 1, level = 3, team = 7, ["teams.id"] = 7, name = "red", region = "eu" },
                  { id = 2, level = 1, team = 7, ["teams.id"] = 7, name = "red", region = "eu" } }, att:rows())
    att:close()
    att = runnel.attach(dir, "roster_s")
    assert.same({ { id = 1, level = 3, region = "eu" }, { id = 2, level = 1, region = "eu" } }, att:rows())
    att:close()
  end)
end)
