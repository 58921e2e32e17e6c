-- Lua's collector in a state that runs a pipeline (lbind.c's
-- rn_lua_gc_default): runnel.open puts it in generational mode unless the
-- program chose its own settings, so a joiner that returns a new table per
-- call does not let its garbage grow to the size of everything else the
-- program holds before a cycle starts.
local runnel = require "runnel"

-- Lua's defaults: incremental, pause 200, step multiplier 100, running.
local function lua_defaults()
  collectgarbage("restart")
  collectgarbage("incremental", 200, 100)
end

describe("runnel.open and Lua's collector", function()
  after_each(lua_defaults)

  it("switches a collector left at Lua's defaults to generational mode", function()
    lua_defaults()
    local p = runnel.open()
    assert.equal("generational", collectgarbage("incremental")) -- the mode it left
    p:close()
  end)

  it("leaves the program's own settings: a tuned collector, generational mode, a stopped one", function()
    lua_defaults()
    collectgarbage("incremental", 150, 100)
    local p = runnel.open()
    assert.equal("incremental", collectgarbage("incremental"))
    p:close()

    lua_defaults()
    collectgarbage("incremental", 200, 300)
    p = runnel.open()
    assert.equal("incremental", collectgarbage("incremental"))
    p:close()

    lua_defaults()
    collectgarbage("stop")
    p = runnel.open()
    assert.is_false(collectgarbage("isrunning"))
    assert.equal("incremental", collectgarbage("incremental"))
    p:close()
  end)

  it("lets the program change it after open: its last call wins", function()
    lua_defaults()
    local p = runnel.open()
    collectgarbage("incremental")
    assert.equal("incremental", collectgarbage("incremental"))
    p:close()
  end)

  -- The most the heap grows above the program's data (~30 MB) while a joiner
  -- returning a table per call makes 60,000 rows; setup(…) runs before open.
  local function joiner_garbage(setup)
    lua_defaults()
    local data = {}
    for i = 1, 200000 do data[i] = { i, "x" .. i } end
    collectgarbage("collect")
    if setup then setup() end
    local base = collectgarbage("count")
    local p = runnel.open{ sync = false }
    local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"name","string"}, {"team_id","int"}, key = "id" })
    players:join(teams, { kind = "left", mapper = function(pl) return pl.team_id end,
      joiner = function(pl, t) return { pid = pl.id, pname = pl.name, tname = t and t.name } end,
      columns = { {"pid","int"}, {"pname","string"}, {"tname","string", null = true}, key = "pid" } })
    teams:insert{ id = 1, name = "otters" }
    local most = 0
    for g = 0, 59 do
      p:begin()
      for i = 1, 1000 do players:insert{ id = g * 1000 + i, name = "p", team_id = 1 } end
      p:commit()
      most = math.max(most, collectgarbage("count") - base)
    end
    p:close()
    assert.equal(200000, #data)
    return most / 1024
  end

  it("keeps the garbage of a joiner returning a table per call to about 5% of the program's data", function()
    -- incremental at Lua's defaults, the heap grew by about the program's data before a cycle; generational
    -- at Lua's default minor multiplier (20%), by about 6 MB
    local most = joiner_garbage()
    assert.is_true(most < 3, ("the heap grew by %.1f MB"):format(most))
  end)

  it("keeps a program's own generational multipliers", function()
    local most = joiner_garbage(function() collectgarbage("generational", 40, 100) end)
    assert.is_true(most > 6, ("the heap grew by %.1f MB"):format(most))
  end)
end)
