-- A join's result as a projection done in C: a joiner given as a table of
-- column references, and a select that follows a join (done by the join
-- while the select is its only reader). DESIGN §6, §12.
local runnel = require "runnel"
local H = require "helper"

local tables = H.join_tables

local log_of = H.line_log

describe("a joiner of column references", function()
  it("takes its columns from the columns it names, in their order, keyed like the join", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local j = players:join(teams, { on = "team_id", kind = "left",
      joiner = { region = "region", tname = "teams.name", pid = "id", pname = "name" } })
    local cols = {}
    for _, c in ipairs(j:schema().columns) do cols[#cols + 1] = c.name .. ":" .. c.type .. (c.null and "?" or "") end
    assert.same({ "pid:int", "pname:string", "tname:string?", "region:string?" }, cols)
    assert.same({ "pid" }, j:schema().key)
    local log = log_of(j)
    teams:insert{ id = 7, name = "otters", region = "eu" }
    players:insert{ id = 1, name = "ann", team_id = 7 }
    players:insert{ id = 2, name = "bob" }
    players:update{ id = 1, score = 5 } -- not a column of the result: nothing
    teams:update{ id = 7, name = "herons" }
    players:update{ id = 2, team_id = 7 }
    players:delete{ id = 1 }
    assert.same({ "INSERT 1 1,ann,otters,eu", "INSERT 2 2,bob,nil,nil", "UPDATE 1 1,ann,herons,eu <- 1,ann,otters,eu",
                  "UPDATE 2 2,bob,herons,eu <- 2,bob,nil,nil", "DELETE 1 1,ann,herons,eu" }, log)
    assert.same({ pid = 2, pname = "bob", tname = "herons", region = "eu" }, j:get(2))
    p:close()
  end)

  it("works for an outer join's right-only rows", function()
    local p = runnel.open()
    local a = p:table("a", { {"id","int"}, {"x","string"}, key = "id" })
    local b = p:table("b", { {"id","int"}, {"y","string"}, key = "id" })
    local j = a:join(b, { on = "id", kind = "outer", joiner = { k = "id", y = "y", x = "x" } })
    b:insert{ id = 1, y = "why" }
    a:insert{ id = 2, x = "ex" }
    local rows = {}
    for r in j:rows() do rows[#rows + 1] = ("%s %s %s"):format(r.k, tostring(r.x), tostring(r.y)) end
    table.sort(rows)
    assert.same({ "1 nil why", "2 ex nil" }, rows)
    p:close()
  end)

  it("names a reference the join does not have, and refuses columns beside it", function()
    local p = runnel.open()
    local teams, players = tables(p)
    assert.equal('players.join: joiner: column "t" references "team", which the join does not have',
                 H.error_of(players.join, players, teams, { on = "team_id", joiner = { t = "team" } }))
    assert.equal("join: a joiner of column references takes its columns from them: drop columns",
                 H.error_of(players.join, players, teams, { on = "team_id", joiner = { t = "name" }, columns = {} }))
    assert.equal("join: a joiner table maps result names to column names, got 1 = name",
                 H.error_of(players.join, players, teams, { on = "team_id", joiner = { "name" } }))
    p:close()
  end)
end)

describe("a select that follows a join", function()
  -- The same random changes reach two copies of join + select: in one the
  -- select is the join's only reader (fused), in the other a sink also
  -- reads the join (not fused). The selects must see the same changes and
  -- the joins count the same.
  it("emits what the select of the join's rows would (randomized, fused against not fused)", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local spec = { {"pid","id"}, {"pname","name"}, "score", {"tname","teams.name"}, "region" }
    local j1 = players:join(teams, { on = "team_id", kind = "left", name = "j1" })
    local s1 = j1:select(spec, "s1")
    local j2 = players:join(teams, { on = "team_id", kind = "left", name = "j2" })
    local s2 = j2:select(spec, "s2")
    j2:sink(function() end) -- a second reader: j2 makes its own rows
    local l1, l2 = log_of(s1), log_of(s2)
    math.randomseed(99)
    local rng = math.random
    for t = 1, 5 do teams:insert{ id = t, name = "t" .. t } end
    for step = 1, 400 do
      p:begin()
      for _ = 1, 5 do
        local id, op = rng(1, 25), rng(1, 12)
        local ok = pcall(function()
          if op <= 2 then players:upsert{ id = id, name = "p" .. id, team_id = rng(0, 6) == 0 and runnel.null or rng(1, 6) }
          elseif op <= 4 then players:update{ id = id, score = rng(0, 3) }
          elseif op == 5 then players:update{ id = id, team_id = rng(1, 6) }
          elseif op == 6 then players:delete{ id = id }
          elseif op <= 9 then teams:upsert{ id = rng(1, 6), name = "t" .. step, region = rng(1, 2) == 1 and "eu" or runnel.null }
          elseif op == 10 then teams:delete{ id = rng(1, 6) }
          else players:update{ id = id, name = "q" .. step } end
        end)
        if not ok then break end -- the group was rolled back
      end
      if p:in_group() then p:commit() end
    end
    assert.is_true(#l1 > 500)
    assert.same(l2, l1)
    assert.same(j2:changes(), j1:changes())
    assert.same(s2:changes(), s1:changes())
    local function rows(rel)
      local out = {}
      for r in rel:rows() do out[#out + 1] = ("%d %s %d %s"):format(r.pid, r.pname, r.score, tostring(r.tname)) end
      table.sort(out)
      return out
    end
    assert.same(rows(s2), rows(s1))
    p:close()
  end)

  it("counts the changes of the join and of the select when nothing reads the select", function()
    local p = runnel.open()
    local teams, players = tables(p)
    local j = players:join(teams, { on = "team_id", kind = "left" })
    local s = j:select{ {"pid","id"}, {"tname","teams.name"} }
    teams:insert{ id = 1, name = "a" }
    players:insert{ id = 1, name = "ann", team_id = 1 }
    players:update{ id = 1, score = 3 } -- the join's row changes; the select's does not
    teams:update{ id = 1, name = "b" }
    players:delete{ id = 1 }
    assert.same({ inserts = 1, updates = 2, deletes = 1 }, j:changes())
    assert.same({ inserts = 1, updates = 1, deletes = 1 }, s:changes())
    p:close()
  end)
end)

describe("a projecting join that nothing reads", function()
  -- A joiner of column references (or a Lua joiner done in C) whose join
  -- nothing reads makes no rows, only counts its changes: the counts, and
  -- the rows once something reads them, must be those of the same join
  -- with a reader. A reader added halfway ends the counting-only path.
  local function random_groups(p, teams, players, seed, steps)
    math.randomseed(seed)
    local rng = math.random
    for step = 1, steps do
      p:begin()
      for _ = 1, 5 do
        local id, op = rng(1, 25), rng(1, 12)
        local ok = pcall(function()
          if op <= 2 then players:upsert{ id = id, name = "p" .. id, team_id = rng(0, 6) == 0 and runnel.null or rng(1, 6) }
          elseif op <= 4 then players:update{ id = id, score = rng(0, 3) }
          elseif op == 5 then players:update{ id = id, team_id = rng(1, 6) }
          elseif op == 6 then players:delete{ id = id }
          elseif op <= 8 then teams:upsert{ id = rng(1, 6), name = "t" .. step, region = rng(1, 2) == 1 and "eu" or runnel.null }
          elseif op == 9 then teams:upsert{ id = rng(1, 6), name = "t" .. rng(1, 2) } -- often the bytes it had
          elseif op == 10 then teams:delete{ id = rng(1, 6) }
          else players:update{ id = id, name = "q" .. rng(1, 2) } end -- not projected: no change of the join
        end)
        if not ok then break end -- the group was rolled back
      end
      if p:in_group() then p:commit() end
    end
  end
  local function rows(rel)
    local out = {}
    for r in rel:rows() do out[#out + 1] = ("%d %d %s %s"):format(r.pid, r.score, tostring(r.tname), tostring(r.region)) end
    table.sort(out)
    return out
  end

  for _, how in ipairs{ "references", "copying function" } do
    it(("counts what the same join with a reader emits (%s, randomized)"):format(how), function()
      local p = runnel.open()
      local teams, players = tables(p)
      local function join(name)
        if how == "references" then
          return players:join(teams, { on = "team_id", kind = "left", name = name,
                                       joiner = { pid = "id", score = "score", tname = "teams.name", region = "region" } })
        end
        return players:join(teams, { mapper = function(pl) return pl.team_id end, kind = "left", name = name,
          joiner = function(pl, t) return { pid = pl.id, score = pl.score, tname = t and t.name, region = t and t.region } end,
          columns = { {"pid","int"}, {"score","int"}, {"tname","string", null = true}, {"region","string", null = true},
                      key = "pid" } })
      end
      local alone, read = join("alone"), join("read")
      local log = log_of(read)
      random_groups(p, teams, players, 7, 300)
      local c = read:changes()
      assert.is_true(c.updates > 100 and c.inserts > 20 and c.deletes > 10, runnel.format_value(c))
      assert.same(c, alone:changes())
      assert.same(rows(read), rows(alone))
      local late = log_of(alone) -- a reader from now on: alone makes its rows again
      random_groups(p, teams, players, 8, 200)
      assert.same(read:changes(), alone:changes())
      assert.same(rows(read), rows(alone))
      assert.is_true(#late > 100)
      local tail = {}
      for i = #log - #late + 1, #log do tail[#tail + 1] = log[i] end
      assert.same(tail, late)
      p:close()
    end)
  end
end)
