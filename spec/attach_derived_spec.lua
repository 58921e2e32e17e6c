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
