-- Options of aggregates, windows, tops, indexes and their reads given bad
-- values (round 23): each is refused naming the relation, the option and
-- the caller's line, instead of being taken as something else.
local runnel = require "runnel"
local H = require "helper"

local function refused(f)
  local ok, err = pcall(f)
  assert.is_false(ok)
  return tostring(err)
end

local HERE = "relation_options_edges23_spec.lua:%d+: "

describe("a windowed aggregate's grace", function()
  after_each(H.cleanup)

  -- Regression: grace = math.huge was taken: no window was ever made
  -- final, so the aggregate's state grew for good; the errors for NaN or
  -- a negative grace named "aggregate", not the aggregate.
  it("an infinite, NaN or negative grace is refused naming the aggregate", function()
    local p = runnel.open()
    local s = p:stream("clicks", { {"player","int"}, {"ts","int"} })
    for _, g in ipairs{ math.huge, -math.huge, 0/0, -1, "5" } do
      local err = refused(function()
        s:aggregate{ by = "player", window = runnel.tumbling(10, "ts"), grace = g, name = "pm", n = runnel.count() }
      end)
      assert.matches(HERE .. "pm: grace must be a finite number of seconds >= 0, got ", err)
    end
    local err = refused(function() s:aggregate{ by = "player", grace = 5, n = runnel.count() } end)
    assert.matches(HERE .. "clicks.aggregate: grace needs a window", err)
    local w = s:aggregate{ by = "player", window = runnel.tumbling(10, "ts"), grace = 2.5, name = "pm",
                           n = runnel.count() }
    s:insert{ player = 1, ts = 1 }
    assert.equal(1, w:count())
    p:close()
  end)
end)

describe("errors declaring an aggregate", function()
  after_each(H.cleanup)

  -- Regression: they began "aggregate:", naming neither the aggregate nor
  -- the relation it was declared on.
  it("name the aggregate (its name, or <relation>.aggregate) and the caller's line", function()
    local p = runnel.open()
    local t = p:table("players", { {"id","int"}, {"team","int"}, {"name","string"}, key = "id" })
    local cases = {
      { function() t:aggregate{ by = "team", name = "per_team", n = 3 } end,
        "per_team: n must be an aggregate" },
      { function() t:aggregate{ by = "team", name = "per_team" } end, "per_team: name at least one aggregate" },
      { function() t:aggregate{ by = "team", n = runnel.count() , window = 10 } end,
        "players.aggregate: window must be runnel.tumbling" },
      { function() t:aggregate{ by = 5, name = "per_team", n = runnel.count() } end,
        "per_team: by must be a column name or a list of them" },
      { function() t:aggregate{ by = "team", name = "per_team", key = "id", n = runnel.count() } end,
        "per_team: key must name the by columns" },
      { function() t:aggregate{ by = "team", name = "per_team", { "n", runnel.count() }, m = runnel.count() } end,
        "per_team: give the aggregates as a list" },
      { function() t:aggregate{ by = "team", name = "per_team", { "n", 3 } } end, "per_team: entry #1 must be" },
      { function() t:aggregate{ by = "team", name = 5, n = runnel.count() } end,
        "players.aggregate: name must be a string %(the relation's name%) or an aggregate" },
    }
    for _, c in ipairs(cases) do
      assert.matches(HERE .. c[2], refused(c[1]), 1)
    end
    -- a column called "name" is still an aggregate column
    local a = t:aggregate{ by = "team", name = runnel.max("name"), n = runnel.count() }
    t:insert{ id = 1, team = 1, name = "ann" }
    assert.same({ team = 1, name = "ann", n = 1 }, a:get(1))
    p:close()
  end)
end)

describe("a top's n given as an integral float", function()
  after_each(H.cleanup)

  -- Regression: n = 3.0 (a float that is an integer in value, as JSON or
  -- arithmetic gives) was refused "n must be a positive integer, got 3.0".
  it("is taken as that integer; a fraction, 0, NaN or a string is refused", function()
    local p = runnel.open()
    local t = p:table("players", { {"id","int"}, {"score","int"}, key = "id" })
    local top = t:top{ n = 3.0, order = { {"score", "desc"} }, name = "best" }
    p:batch(function() for i = 1, 5 do t:insert{ id = i, score = i } end end)
    assert.equal(3, top:count())
    for _, n in ipairs{ 2.5, 0.0, 0/0, math.huge, "3" } do
      assert.matches(HERE .. "best2: n must be a positive integer, got ",
                     refused(function() t:top{ n = n, order = { "score" }, name = "best2" } end))
    end
    p:close()
  end)
end)
