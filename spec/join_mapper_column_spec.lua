-- A join's mapper that returns one column of its row as it is
-- (function(l) return l.col end) is read in C, as on = "col" reads it,
-- when that is exactly the mapper's key; any other mapper is called.
-- DESIGN §6 (mapper), runnel/joiner.lua.
local runnel = require "runnel"
local H = require "helper"

-- How many times fn is called from now until stop() (a call hook).
local function count_calls(fn)
  local n = 0
  debug.sethook(function()
    if debug.getinfo(2, "f").func == fn then n = n + 1 end
  end, "c")
  return function()
    debug.sethook()
    return n
  end
end

local log_of = H.line_log

local function rows_of(rel)
  local rows = {}
  for r in rel:rows() do
    local cols = {}
    for _, c in ipairs(rel:schema().columns) do cols[#cols + 1] = tostring(r[c.name]) end
    rows[#rows + 1] = table.concat(cols, ",")
  end
  table.sort(rows)
  return rows
end

describe("a mapper returning one column of its row", function()
  it("is not called: the key is read from the row, as on = that column reads it", function()
    local p = runnel.open()
    local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"team_id","int", null = true}, key = "id" })
    local mapper = function(l) return l.team_id end
    local j = players:join(teams, { mapper = mapper, kind = "left" })
    local log = log_of(j)
    local stop = count_calls(mapper)
    teams:insert{ id = 7, name = "otters" }
    players:insert{ id = 1, team_id = 7 }
    players:insert{ id = 2 }
    players:insert{ id = 3, team_id = 8 }
    players:update{ id = 2, team_id = 7 }
    teams:update{ id = 7, name = "herons" }
    players:delete{ id = 1 }
    assert.equal(0, stop())
    assert.same({ "INSERT 1 1,7,7,otters", "INSERT 2 2,nil,nil,nil", "INSERT 3 3,8,nil,nil",
                  "UPDATE 2 2,7,7,otters <- 2,nil,nil,nil", "UPDATE 1 1,7,7,herons <- 1,7,7,otters",
                  "UPDATE 2 2,7,7,herons <- 2,7,7,otters", "DELETE 1 1,7,7,herons" }, log)
    p:close()
  end)

  it("is called when the right key's type is not the column's, and gives what it gave before", function()
    local p = runnel.open()
    local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"team","float", null = true}, key = "id" })
    local mapper = function(l) return l.team end
    local j = players:join(teams, { mapper = mapper, kind = "left" })
    local stop = count_calls(mapper)
    teams:insert{ id = 3, name = "owls" }
    players:insert{ id = 1, team = 3.0 }
    players:insert{ id = 2 }
    assert.is_true(stop() >= 2)
    assert.same({ "1,3.0,3,owls", "2,nil,nil,nil" }, rows_of(j))
    p:close()
  end)

  it("is called in any other shape", function()
    local p = runnel.open()
    local teams = p:table("teams", { {"id","int"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"team_id","int"}, key = "id" })
    local shapes = {
      function(l) return l.team_id + 0 end,
      function(l) return l.team_id, 1 end,
      function(l, r) return l.team_id or r end,
    }
    for i, mapper in ipairs(shapes) do
      local j = players:join(teams, { mapper = mapper, name = "j" .. i })
      local stop = count_calls(mapper)
      players:insert{ id = i, team_id = 10 + i } -- a value no call saw yet: the memo cannot answer
      assert.is_true(stop() >= 1, "shape " .. i)
      assert.is_not_nil(j)
    end
    p:close()
  end)

  -- The same changes through on = "team", the mapper read in C, and a
  -- mapper Lua must call: the same events and rows, with rollbacks, keys
  -- of both an int and a string, and a reopen of the state.
  for _, keytype in ipairs{ "int", "string" } do
    it("gives exactly what on and a called mapper give (" .. keytype .. " keys, random groups)", function()
      local dir = os.tmpname()
      os.remove(dir)
      local seed = os.time()
      math.randomseed(seed)
      local function team_key(n) return keytype == "int" and n or ("t" .. n) end
      local function declare(p)
        local teams = p:table("teams", { {"id", keytype}, {"name","string"}, key = "id" })
        local players = p:table("players", { {"id","int"}, {"team", keytype, null = true}, {"score","int"},
                                             key = "id" })
        local function same(v) return v end
        local by_column = function(l) return l.team end
        local joins = {
          players:join(teams, { on = "team", kind = "left", name = "by_on" }),
          players:join(teams, { mapper = by_column, kind = "left", name = "by_column" }),
          players:join(teams, { mapper = function(l) return same(l.team) end, kind = "left", name = "by_call" }),
        }
        return teams, players, joins, by_column
      end
      local p = runnel.open{ path = dir }
      local teams, players, joins, by_column = declare(p)
      local logs = {}
      for i, j in ipairs(joins) do logs[i] = log_of(j) end
      local calls = 0
      local live, live_teams = {}, {}
      for g = 1, 60 do
        if g == 30 then -- reopen: the state carries on, the mapper is read in C again
          p:close()
          p = runnel.open{ path = dir }
          teams, players, joins, by_column = declare(p)
          for i, j in ipairs(joins) do logs[i] = log_of(j) end
        end
        local stop = count_calls(by_column)
        p:begin()
        local saved, saved_teams = {}, {}
        for k, v in pairs(live) do saved[k] = v end
        for k, v in pairs(live_teams) do saved_teams[k] = v end
        for _ = 1, 20 do
          local r = math.random(10)
          local id = math.random(40)
          local team = math.random(5) == 1 and nil or team_key(math.random(12))
          if r <= 2 then
            local t = math.random(10)
            if math.random(3) == 1 and live_teams[t] then
              teams:delete{ id = team_key(t) }
              live_teams[t] = nil
            else
              teams:upsert{ id = team_key(t), name = "n" .. math.random(1000) }
              live_teams[t] = true
            end
          elseif r <= 4 and live[id] then
            players:delete{ id = id }
            live[id] = nil
          elseif live[id] then
            players:update{ id = id, team = team or runnel.null, score = math.random(100) }
          else
            players:insert{ id = id, team = team, score = math.random(100) }
            live[id] = true
          end
        end
        if math.random(5) == 1 then
          p:rollback()
          live, live_teams = saved, saved_teams
        else
          p:commit()
        end
        calls = calls + stop()
      end
      assert.equal(0, calls, "seed " .. seed)
      assert.same(logs[1], logs[2], "seed " .. seed)
      assert.same(logs[3], logs[2], "seed " .. seed)
      assert.same(rows_of(joins[1]), rows_of(joins[2]), "seed " .. seed)
      assert.same(rows_of(joins[3]), rows_of(joins[2]), "seed " .. seed)
      assert.is_true(#logs[2] > 50)
      p:close()
      os.execute("rm -rf '" .. dir .. "'")
    end)
  end
end)
