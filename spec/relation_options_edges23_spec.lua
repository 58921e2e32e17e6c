-- Options of aggregates, windows, tops, indexes and their reads given bad
-- values (round 23): each is refused naming the relation, the option and
-- the caller's line, instead of being taken as something else.
local runnel = require "runnel"
local H = require "helper"

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
      local err = H.message_of(function()
        s:aggregate{ by = "player", window = runnel.tumbling(10, "ts"), grace = g, name = "pm", n = runnel.count() }
      end)
      assert.matches(HERE .. "pm: grace must be a finite number of seconds >= 0, got ", err)
    end
    local err = H.message_of(function() s:aggregate{ by = "player", grace = 5, n = runnel.count() } end)
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
      assert.matches(HERE .. c[2], H.message_of(c[1]), 1)
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
                     H.message_of(function() t:top{ n = n, order = { "score" }, name = "best2" } end))
    end
    p:close()
  end)
end)

describe("an index's reads, in the pipeline and attached", function()
  after_each(H.cleanup)

  local function setup()
    local dir = H.tmpdir()
    local p = runnel.open(dir)
    local t = p:table("players", { {"id","int"}, {"score","int"}, {"f","float"}, key = "id" })
    local idx = t:index{ "score", "desc", name = "by_score" }
    local fidx = t:index{ "f", name = "by_f" }
    p:batch(function() for i = 1, 5 do t:insert{ id = i, score = i * 10, f = i / 2 } end end)
    return dir, p, t, idx, fidx
  end

  local function count_of(iter) local n = 0 for _ in iter do n = n + 1 end return n end

  -- Regression: a map given as a bound ({ score = 30 }) has no sequence
  -- part, so it read as no bound at all; limit = "2" was taken as 2; an
  -- unknown option of count{} was ignored; rank(nil) answered 1; a NaN
  -- bound named neither the read nor the option.
  it("refuses unknown options, maps, NaN, non-numbers and a nil rank naming the index and option", function()
    local _, p, _, idx, fidx = setup()
    local cases = {
      { function() idx:range{ form = 10 } end, "by_score: range: unknown option form %(from, to, offset, limit%)" },
      { function() idx:count{ form = 10 } end, "by_score: count: unknown option form %(from, to%)" },
      { function() idx:range{ from = { score = 30 } } end,
        "by_score: range: from must be a value or a list of values, got a table with key score" },
      { function() idx:count{ to = { 30, x = 1 } } end,
        "by_score: count: to must be a value or a list of values, got a table with key x" },
      { function() idx:rank{ { 30 } } end, "by_score: rank: value #1 must be a scalar, got table" },
      { function() idx:rank(nil) end, "by_score: rank: expects a value or a list of values, got nil" },
      { function() idx:rank{ score = 30 } end,
        "by_score: rank: values must be a value or a list of values, got a table with key score" },
      { function() fidx:range{ from = 0/0 } end, "by_f: range: from is NaN" },
      { function() fidx:count{ to = { 0/0 } } end, "by_f: count: to value #1 is NaN" },
      { function() fidx:rank(0/0) end, "by_f: rank: values is NaN" },
      { function() idx:range{ limit = "2" } end, 'by_score: range: limit must be an integer, got string "2"' },
      { function() idx:range{ offset = 1.5 } end, "by_score: range: offset must be an integer, got 1.5" },
      { function() idx:range{ limit = -1 } end, "by_score: range: limit must not be negative, got %-1" },
      { function() idx:range{ from = print } end, "by_score: range: from must be a value or a list of values, got function" },
    }
    for _, c in ipairs(cases) do assert.matches(HERE .. c[2], H.message_of(c[1])) end
    -- what is taken
    assert.equal(2, count_of(idx:range{ limit = 2.0 }))
    assert.equal(3, idx:count{ from = 50, to = { 30 } })
    assert.equal(3, idx:rank{ 30 })
    assert.equal(5, idx:count{})
    p:close()
  end)

  it("refuses the same through an attach, naming it", function()
    local dir, p = setup()
    p:close()
    local att = runnel.attach(dir, "by_score")
    local fatt = runnel.attach(dir, "by_f")
    local cases = {
      { function() att:range{ form = 10 } end, "attach by_score: range: unknown option form %(from, to, offset, limit%)" },
      { function() att:count{ form = 10 } end, "attach by_score: count: unknown option form %(from, to%)" },
      { function() att:range{ from = { score = 30 } } end,
        "attach by_score: range: from must be a value or a list of values, got a table with key score" },
      { function() att:count{ from = { a = 1 } } end,
        "attach by_score: count: from must be a value or a list of values, got a table with key a" },
      { function() att:rank(nil) end, "attach by_score: rank: expects a value or a list of values, got nil" },
      { function() att:rank{ a = 1 } end,
        "attach by_score: rank: values must be a value or a list of values, got a table with key a" },
      { function() fatt:range{ to = 0/0 } end, "attach by_f: range: to is NaN" },
      { function() fatt:count{ from = 0/0 } end, "attach by_f: count: from is NaN" },
      { function() att:range{ limit = "2" } end, 'attach by_score: range: limit must be an integer, got string "2"' },
      { function() att:range{ offset = -1 } end, "attach by_score: range: offset must not be negative, got %-1" },
    }
    for _, c in ipairs(cases) do assert.matches(HERE .. c[2], H.message_of(c[1])) end
    assert.equal(2, count_of(att:range{ limit = 2.0 }))
    assert.equal(3, att:count{ from = 50, to = { 30 } })
    assert.equal(3, att:rank{ 30 })
    att:close()
    fatt:close()
  end)

  -- Regression: att:count{ from =, to = } on an attached table counted all
  -- its rows, the bounds ignored without a word.
  it("refuses bounds to count an attached relation that is not an index", function()
    local dir, p = setup()
    p:close()
    local att = runnel.attach(dir, "players")
    assert.matches(HERE .. "attach players: count: from and to need an index; players is a table",
                   H.message_of(function() att:count{ from = 1, to = 3 } end))
    assert.matches(HERE .. "attach players: count: unknown option form %(from, to%)",
                   H.message_of(function() att:count{ form = 1 } end))
    assert.equal(5, att:count())
    assert.equal(5, att:count{})
    att:close()
  end)
end)

describe("by and order given as maps, or naming a column twice", function()
  after_each(H.cleanup)

  -- Regression: by = { team = true } has no sequence part, so a top or an
  -- aggregate declared with it had one group (by nothing), without a word;
  -- order = { score = "desc" } was refused as "order needs at least one
  -- column"; a column named twice in a top's by or order, or an index's
  -- columns, was taken.
  it("are refused naming the relation and the option", function()
    local p = runnel.open()
    local t = p:table("players", { {"id","int"}, {"team","int"}, {"score","int"}, key = "id" })
    local cases = {
      { function() t:top{ n = 3, by = { team = true }, order = { "score" }, name = "best" } end,
        "best: by must be a column name or a list of them, got a table with key team" },
      { function() t:top{ n = 3, by = { "team", "team" }, order = { "score" }, name = "best" } end,
        'best: by names "team" twice' },
      { function() t:top{ n = 3, by = { 1 }, order = { "score" }, name = "best" } end,
        "best: by entry #1 must be a column name, got 1" },
      { function() t:top{ n = 3, order = { score = "desc" }, name = "best" } end,
        "best: order must be a list of columns, got a table with key score" },
      { function() t:top{ n = 3, order = { "score", { "score", "desc" } }, name = "best" } end,
        'best: order names "score" twice' },
      { function() t:aggregate{ by = { team = true }, n = runnel.count(), name = "per_team" } end,
        "per_team: by must be a column name or a list of them, got a table with key team" },
      { function() t:aggregate{ by = { "team", "team" }, n = runnel.count(), name = "per_team" } end,
        'per_team: by names "team" twice' },
      { function() t:index{ "score", "desc", "score", name = "by_score" } end, 'by_score: order names "score" twice' },
    }
    for _, c in ipairs(cases) do assert.matches(HERE .. c[2], H.message_of(c[1])) end
    -- lists are taken
    local top = t:top{ n = 1, by = { "team" }, order = { "score", "desc", "id" }, name = "best" }
    local agg = t:aggregate{ by = { "team" }, n = runnel.count(), name = "per_team" }
    t:insert{ id = 1, team = 1, score = 5 }
    t:insert{ id = 2, team = 2, score = 6 }
    assert.equal(2, top:count())
    assert.equal(2, agg:count())
    p:close()
  end)
end)
