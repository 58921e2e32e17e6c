-- A join's mapper memo (core/join_fkmemo.c): a left row whose columns the
-- mapper read hold bytes an earlier call already read gets that call's key
-- without a call. The key must stay the one the mapper would give: for
-- mappers whose reads depend on the row, null keys, failing calls, groups
-- rolled back and a reopened pipeline.
local runnel = require "runnel"
local H = require "helper"

local function tables(p)
  local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
  local players = p:table("players", { {"id","int"}, {"name","string"}, {"team_id","int", null = true},
                                       {"score","int", default = 0}, key = "id" })
  return teams, players
end

local COLUMNS = { {"pid","int"}, {"score","int"}, {"tname","string", null = true}, key = "pid" }
local function joiner(l, t) return l.id, l.score, t and t.name end

-- The join's rows, and the same worked out from the tables, as sorted lines.
local function rows(j)
  local out = {}
  for r in j:rows() do out[#out + 1] = ("%d %d %s"):format(r.pid, r.score, tostring(r.tname)) end
  table.sort(out)
  return out
end
local function recomputed(players, teams)
  local out = {}
  for r in players:rows() do
    local t = r.team_id and teams:get(r.team_id)
    out[#out + 1] = ("%d %d %s"):format(r.id, r.score, tostring(t and t.name))
  end
  table.sort(out)
  return out
end

describe("the mapper memo", function()
  after_each(H.cleanup)

  it("calls the mapper once per distinct bytes it read, not once per row", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local calls = 0
    local j = players:join(teams, { kind = "left", columns = COLUMNS, joiner = joiner,
      mapper = function(r) calls = calls + 1; return r.team_id end })
    for t = 1, 5 do teams:insert{ id = t, name = "t" .. t } end
    p:batch(function() for i = 1, 100 do players:insert{ id = i, name = "p" .. i, team_id = i % 5 + 1 } end end)
    assert.equal(5, calls)
    calls = 0
    p:batch(function() for i = 1, 100 do players:update{ id = i, score = i } end end)
    assert.equal(0, calls) -- every row before the change holds a team_id seen already
    p:batch(function() for i = 1, 100 do players:update{ id = i, team_id = (i + 1) % 5 + 1 } end end)
    assert.equal(0, calls)
    players:update{ id = 1, team_id = 42 }
    assert.equal(1, calls)
    assert.same(recomputed(players, teams), rows(j))
    p:close()
  end)

  it("memoizes a null key, and a key the mapper gave without reading the row", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local calls, const_calls = 0, 0
    local j = players:join(teams, { kind = "left", columns = COLUMNS, joiner = joiner,
      mapper = function(r) calls = calls + 1; return r.team_id end })
    local c = players:join(teams, { kind = "left", columns = COLUMNS, joiner = joiner, name = "always7",
      mapper = function() const_calls = const_calls + 1; return 7 end })
    teams:insert{ id = 7, name = "otters" }
    p:batch(function() for i = 1, 20 do players:insert{ id = i, name = "p" .. i, team_id = runnel.null } end end)
    assert.equal(1, calls)
    assert.equal(1, const_calls)
    assert.equal("nil", rows(j)[1]:match("%S+$"))
    players:update{ id = 3, team_id = 7 }
    assert.equal(2, calls)
    assert.same(recomputed(players, teams), rows(j))
    for r in c:rows() do assert.equal("otters", r.tname) end
    p:close()
  end)

  -- Slots from 63 on share one bit of the read mask: a mapper reading one of
  -- them is remembered under the bytes of all of them.
  it("tells rows apart by a column past the 63rd", function()
    local p = runnel.open()
    local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
    local cols = { {"id","int"} }
    for c = 1, 70 do cols[#cols + 1] = { "c" .. c, "int", default = 0 } end
    cols.key = "id"
    local wide = p:table("wide", cols)
    local calls = 0
    local j = wide:join(teams, { kind = "left", columns = COLUMNS,
      joiner = function(l, t) return l.id, l.c1, t and t.name end,
      mapper = function(r) calls = calls + 1; return r.c68 end })
    for t = 1, 3 do teams:insert{ id = t, name = "t" .. t } end
    wide:insert{ id = 1, c68 = 1 }
    wide:insert{ id = 2, c68 = 2 }
    wide:insert{ id = 3, c68 = 1, c64 = 5 } -- c64 shares c68's bit: not the same bytes
    wide:insert{ id = 4, c68 = 1, c1 = 9 }  -- c1 was not read: remembered
    assert.equal(3, calls)
    wide:update{ id = 4, c68 = 3 }
    local got = {}
    for r in j:rows() do got[r.pid] = r.tname end
    assert.same({ "t1", "t2", "t1", "t3" }, got)
    p:close()
  end)

  it("remembers no failed call: the same row maps once the mapper succeeds", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local boom, calls = true, 0
    local j = players:join(teams, { kind = "left", columns = COLUMNS, joiner = joiner,
      mapper = function(r)
        calls = calls + 1
        local t = r.team_id
        if boom then error("boom") end
        return t
      end })
    teams:insert{ id = 7, name = "otters" }
    local ok, err = pcall(players.insert, players, { id = 1, name = "ann", team_id = 7 })
    assert.is_false(ok)
    assert.matches("mapper: .*boom", tostring(err))
    ok = pcall(players.insert, players, { id = 1, name = "ann", team_id = 7 })
    assert.is_false(ok)
    assert.equal(2, calls) -- the failed call was not remembered
    boom = false
    players:insert{ id = 1, name = "ann", team_id = 7 }
    assert.equal(3, calls)
    assert.same({ "1 0 otters" }, rows(j))
    p:close()
  end)

  -- The mapper reads kind, then a or b: what it reads depends on the row, so
  -- the memo holds entries under two masks. Random changes, some groups
  -- rolled back, a reopen halfway: the join always equals its recomputation,
  -- and emits what a join whose mapper reads the whole row (pairs) emits.
  it("gives the mapper's keys across rows, rollbacks and a reopen (randomized)", function()
    local dir = H.tmpdir()
    local calls, changes = 0, 0
    local function key_of(r) calls = calls + 1; return H.item_team(r) end
    local cols = { {"id","int"}, {"note","string"}, {"tname","string", null = true}, key = "id" }
    local function item_joiner(l, t) return l.id, l.note, t and t.name end
    local function open()
      local p = runnel.open{ path = dir .. "/state", notes = false }
      local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
      local items = p:table("items", { {"id","int"}, {"kind","string"}, {"a","int", null = true},
                                       {"b","int", null = true}, {"note","string"}, key = "id" })
      local lean = items:join(teams, { kind = "left", mapper = key_of, joiner = item_joiner, columns = cols, name = "lean" })
      local full = items:join(teams, { kind = "left", joiner = item_joiner, columns = cols, name = "full",
        mapper = function(r) for _ in pairs(r) do end; if r.kind == "a" then return r.a end; return r.b end })
      local logs = { lean = {}, full = {} }
      for name, rel in pairs{ lean = lean, full = full } do
        rel:sink(function(verb, row, old, info)
          local r = row or old
          local t = logs[name]
          t[#t + 1] = ("%s %d %s %s"):format(verb, info.id, r.note, tostring(r.tname))
        end)
      end
      return p, teams, items, lean, full, logs
    end
    local function check(teams, items, lean, full, logs)
      assert.same(logs.full, logs.lean)
      local expected = H.item_join_lines(nil, items, teams)
      assert.same(expected, H.item_join_lines(lean))
      assert.same(expected, H.item_join_lines(full))
    end
    math.randomseed(4321)
    local rng = math.random
    local p, teams, items, lean, full, logs = open()
    for i = 1, 6 do teams:insert{ id = i, name = "t" .. i } end
    for step = 1, 400 do
      if step == 200 then
        check(teams, items, lean, full, logs)
        p:close()
        p, teams, items, lean, full, logs = open()
      end
      p:begin()
      for _ = 1, 5 do
        changes = changes + 1
        H.random_item_change(items, teams, rng, step, 40)
      end
      if rng(1, 5) == 1 then
        p:rollback()
        -- what the sinks saw of a rolled-back group is gone from both logs alike
      else
        p:commit()
      end
    end
    check(teams, items, lean, full, logs)
    assert.is_true(#logs.lean > 500)
    assert.is_true(calls < changes, ("the lean mapper ran %d times for %d changes"):format(calls, changes))
    p:close()
  end)
end)
