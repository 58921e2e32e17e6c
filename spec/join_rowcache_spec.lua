-- A join's short cuts must not show. Its right rows read by key are kept
-- (core/rowcache.h): every read must still see what the transaction holds —
-- after a write of that row in the same transaction, after a rolled-back
-- group, in a join fed by another join. An int foreign key is read from the
-- left row's bytes: every msgpack int form must find its row.
local runnel = require "runnel"

-- What the join last emitted for each left id (a scan recomputes results
-- from the state, so only the emitted rows show what a read found).
local function watch(rel, column)
  local last = {}
  rel:sink(function(verb, row, old)
    local r = row or old
    last[r.id] = verb == "DELETE" and "(deleted)" or (r[column] == nil and "(none)" or r[column])
  end)
  return last
end

local function open_state()
  local p = runnel.open{ sync = false } -- carried transactions: many groups share one
  local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
  local players = p:table("players", { {"id","int"}, {"name","string"}, {"team_id","int", null = true},
                                       {"score","int", default = 0}, key = "id" })
  local roster = players:join(teams, { on = "team_id", kind = "left" })
  return p, teams, players, roster, watch(roster, "teams.name")
end

local function group(p, fn)
  p:begin()
  fn()
  p:commit()
end

describe("a join's right rows kept in the write transaction", function()
  it("sees a right row written after it was read, in the same group", function()
    local p, teams, players, roster, seen = open_state()
    group(p, function()
      teams:insert{ id = 7, name = "otters" }
      players:insert{ id = 1, name = "ann", team_id = 7 } -- reads team 7
      teams:update{ id = 7, name = "herons" }
      players:update{ id = 1, score = 5 }                  -- reads it again
    end)
    assert.equal("herons", seen[1])
    p:close()
  end)

  it("sees a right row deleted, and one inserted after a read found none", function()
    local p, teams, players, roster, seen = open_state()
    group(p, function()
      teams:insert{ id = 7, name = "otters" }
      players:insert{ id = 1, name = "ann", team_id = 7 }
      players:insert{ id = 2, name = "bob", team_id = 9 } -- team 9 absent: read as absent
    end)
    p:flush() -- what was read stays kept across the commit
    group(p, function()
      teams:delete{ id = 7 }
      teams:insert{ id = 9, name = "herons" }
      players:update{ id = 1, score = 1 }
      players:update{ id = 2, score = 1 }
    end)
    assert.equal("(none)", seen[1])
    assert.equal("herons", seen[2])
    p:close()
  end)

  it("forgets what a rolled-back group wrote", function()
    local p, teams, players, roster, seen = open_state()
    group(p, function()
      teams:insert{ id = 7, name = "otters" }
      players:insert{ id = 1, name = "ann", team_id = 7 }
    end)
    p:flush() -- in LMDB: the replay after the rollback does not write team 7 again
    group(p, function() players:insert{ id = 2, name = "bob" } end) -- carried: replayed after the rollback
    p:begin()
    teams:update{ id = 7, name = "herons" }
    players:update{ id = 1, score = 2 } -- reads the renamed team
    p:rollback()
    group(p, function() players:update{ id = 1, score = 3 } end)
    assert.equal("otters", seen[1])
    assert.equal("otters", teams:get{ id = 7 }.name)
    p:close()
  end)

  it("serves a join fed by another join the right row its change wrote", function()
    local p, teams, players, roster, seen = open_state()
    -- second reads teams through the first join's results: a team rename
    -- reaches it through roster before teams' own change does
    local second = roster:select{ "id", "team_id", {"was","teams.name"} }:join(teams, { on = "team_id", kind = "left" })
    local log = {}
    second:sink(function(verb, row) log[#log + 1] = verb .. " " .. tostring(row and row.was) .. "/" .. tostring(row and row.name) end)
    group(p, function()
      teams:insert{ id = 7, name = "otters" }
      players:insert{ id = 1, name = "ann", team_id = 7 }
    end)
    group(p, function() teams:update{ id = 7, name = "herons" } end)
    -- (what the uncached join emits: the first UPDATE already reads the new name)
    assert.same({ "INSERT otters/otters", "UPDATE herons/herons", "UPDATE herons/herons" }, log)
    assert.equal("herons", seen[1])
    p:close()
  end)

  it("keeps a self-join's own row current", function()
    local p = runnel.open{ sync = false }
    local staff = p:table("staff", { {"id","int"}, {"name","string"}, {"boss","int", null = true}, key = "id" })
    local chain = staff:join(staff, { on = "boss", kind = "left" })
    local boss_of = watch(chain, "staff.name")
    group(p, function()
      staff:insert{ id = 1, name = "ada" }
      staff:insert{ id = 2, name = "bo", boss = 1 }
      staff:update{ id = 1, name = "ada2" }
      staff:update{ id = 2, name = "bo2" }
    end)
    assert.equal("ada2", boss_of[2])
    p:close()
  end)
end)

describe("an int foreign key read from the left row's bytes", function()
  it("finds the right row of every int width and sign, and none for null", function()
    local p = runnel.open()
    local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"team_id","int", null = true}, key = "id" })
    local roster = players:join(teams, { on = "team_id", kind = "left" })
    local ids = { math.mininteger, -2147483649, -2147483648, -32769, -32768, -129, -128, -33, -32, -1, 0, 1,
                  127, 128, 255, 256, 65535, 65536, 4294967295, 4294967296, math.maxinteger }
    for i, id in ipairs(ids) do
      teams:insert{ id = id, name = "t" .. tostring(id) }
      players:insert{ id = i, team_id = id }
    end
    players:insert{ id = 0, team_id = runnel.null }
    players:insert{ id = -1, team_id = 12345 } -- no such team
    local got = {}
    roster:scan(function(r) got[r.id] = r.name or "(none)" end)
    for i, id in ipairs(ids) do assert.equal("t" .. tostring(id), got[i]) end
    assert.equal("(none)", got[0])
    assert.equal("(none)", got[-1])
    p:close()
  end)
end)
