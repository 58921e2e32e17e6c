-- Options and messages of round 24: integer options take an integral
-- float as that integer (as top's n and an index read's limit do since
-- 0.36); an index given a map, an attached table asked for an order and a
-- selector's bad key are refused naming the relation (and the selector's
-- file:line) and what was wrong.
local runnel = require "runnel"
local H = require "helper"

local HERE = "options_edges24_spec.lua:%d+: "

describe("integer options given an integral float", function()
  after_each(H.cleanup)

  -- Regression: 500.0 (as JSON decoding or arithmetic gives it) was
  -- refused 'run: batch must be a positive integer' though it is one in
  -- value; a fraction, NaN, an infinity or a string still are, with the
  -- same message.
  it("p:run's batch and max_rejects", function()
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, key = "k" })
    local src = H.tmpdir() .. "/in.ndjson"
    H.write(src, '{"rel":"t","op":"insert","row":{"k":1}}\n{"rel":"t","op":"insert","row":{"k":2}}\nbad\n'
                 .. '{"rel":"t","op":"insert","row":{"k":3}}\n')
    local st = p:run(runnel.ndjson_source(src), { batch = 2.0, on_error = "skip", max_rejects = 1.0 })
    assert.equal(3, t:count())
    assert.equal(1, st.rejected)
    for _, bad in ipairs{ 2.5, 0/0, math.huge, "2", 0.0 } do
      local err = H.message_of(function() local r = p:run(runnel.ndjson_source(src), { batch = bad }) return r end)
      assert.matches(HERE .. "run: batch must be a positive integer$", err)
      err = H.message_of(function()
        local r = p:run(runnel.ndjson_source(src), { on_error = "skip", max_rejects = bad })
        return r
      end)
      assert.matches(HERE .. "run: max_rejects must be a positive integer$", err)
    end
    p:close()
  end)

  it("runnel.open's max_readers, map_size and carry", function()
    local p = runnel.open{ path = H.tmpdir(), max_readers = 10.0, map_size = 1048576.0, sync = false,
                           carry = { groups = 8.0, changes = 100.0, page_share = 0.0 } }
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:insert{ k = 1 }
    assert.equal(1, t:count())
    p:close()
    local err = H.message_of(function() local q = runnel.open{ max_readers = 10.5 } return q end)
    assert.matches(HERE .. "open: max_readers must be an integer from 1 to 65536 %(LMDB's reader slots; 126 by "
                   .. "default%), got 10.5$", err)
    err = H.message_of(function() local q = runnel.open{ map_size = 1.5 } return q end)
    assert.matches(HERE .. "open: map_size must be an integer$", err)
    err = H.message_of(function() local q = runnel.open{ carry = { groups = 8.5 } } return q end)
    assert.matches(HERE .. "open: carry.groups must be an integer above 0$", err)
    err = H.message_of(function() local q = runnel.open{ carry = { page_share = 0/0 } } return q end)
    assert.matches(HERE .. "open: carry.page_share must be an integer, 0 %(off%) or above$", err)
  end)

  it("jetstream_source's batch and limit, runnel.format's and runnel.watch's limit", function()
    local src = runnel.jetstream_source{ url = "nats://127.0.0.1:1", stream = "S", subject = "s", batch = 10.0,
                                         limit = 5.0 }
    assert.equal("integer", math.type(src.batch))
    assert.equal("integer", math.type(src.limit))
    local err = H.message_of(function()
      local s = runnel.jetstream_source{ url = "nats://127.0.0.1:1", stream = "S", subject = "s", batch = 1.5 }
      return s
    end)
    assert.matches(HERE .. "jetstream_source: batch must be a positive integer$", err)
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:insert{ k = 1 }
    t:insert{ k = 2 }
    assert.matches("%(2 rows, 1 shown%)", runnel.format(t, 1.0))
    err = H.message_of(function() local s = runnel.format(t, 1.5) return s end)
    assert.matches(HERE .. "format: limit must be an integer >= 0$", err)
    local w = runnel.watch(t, { print = function() end, limit = 3.0 })
    assert.is_not_nil(w)
    err = H.message_of(function() local x = runnel.watch(t, { print = print, limit = 1.5 }) return x end)
    assert.matches(HERE .. "watch: limit must be an integer >= 0$", err)
    p:close()
  end)
end)

describe("t:index given a map", function()
  -- Regression: 'index: unknown option score (name)' named no relation
  it("is refused naming the relation", function()
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, {"score","int"}, key = "k" })
    local err = H.message_of(function() local i = t:index{ score = "desc" } return i end)
    assert.matches(HERE .. "t: index: unknown option score %(name%)$", err)
    p:close()
  end)
end)

describe("an attached table asked for an order", function()
  after_each(H.cleanup)

  -- Regression: range and rank said 'a store has no order' of a table
  it("says what it is and that the read needs an index", function()
    local d = H.tmpdir()
    local p = runnel.open(d)
    local players = p:table("players", { {"id","int"}, {"score","int"}, key = "id" })
    players:insert{ id = 1, score = 5 }
    players:aggregate{ by = "score", n = runnel.count(), name = "per_score" }
    local att = runnel.attach(d, "players")
    local err = H.message_of(function() local r = att:range{} return r end)
    assert.matches(HERE .. "attach players: range: players is a table; range needs an index$", err)
    err = H.message_of(function() local r = att:rank(5) return r end)
    assert.matches(HERE .. "attach players: rank: players is a table; rank needs an index$", err)
    err = H.message_of(function() local r = runnel.attach(d, "per_score"):range{} return r end)
    assert.matches(HERE .. "attach per_score: range: per_score is an aggregate; range needs an index$", err)
    err = H.message_of(function() local r = runnel.attach(d, "per_score"):count{ from = 1 } return r end)
    assert.matches("per_score is an aggregate$", err)
    att:close()
    p:close()
  end)
end)

describe("a selector's bad key", function()
  local function join(selector)
    local p = runnel.open()
    local teams = p:table("teams", { {"id","int"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"team_id","int"}, {"v","int", null = true}, key = "id" })
    players:join(teams, { on = "team_id", name = "j", selector = selector })
    teams:insert{ id = 1 }
    return p, players
  end

  -- Regression: '{a = 1}' said 'j: selector: returned no key': neither
  -- where the selector is nor what it returned
  it("names the join, the selector's file:line and what was wrong", function()
    local cases = {
      { function() return { a = 1 } end, 'returned no key: a table with field "a" and no values by position' },
      { function() return {} end, "returned no key: an empty table" },
      { function() return nil end, "returned no key: nil" },
      { function() return runnel.null end, "returned a null key (a key is never null)" },
      { function() return { 1, runnel.null } end, "returned a null key part (a key is never null)" },
      { function() return 0/0 end, "keys are scalars (not NaN), got number" },
      -- a field besides the values by position was dropped unread
      { function() return { 1, a = 2 } end, 'returned a key with field "a" besides its 1 value by position' },
    }
    for _, case in ipairs(cases) do
      local p, players = join(case[1])
      local err = H.error_of(players.insert, players, { id = 1, team_id = 1 })
      assert.matches("j: selector %(spec/options_edges24_spec.lua:%d+%) ", err)
      assert.matches(case[2], err, 1, true)
      assert.equal(0, players:count())
      p:close()
    end
  end)

  it("a key given to two left rows, or another key than before, shows the key", function()
    local p, players = join(function(_, tid) return { tid, "x" } end)
    players:insert{ id = 1, team_id = 1 }
    assert.matches('j: the selector gave result key (1, "x") to two left rows (ids 1 and 2)',
                   H.error_of(players.insert, players, { id = 2, team_id = 1 }), 1, true)
    p:close()
    local n = 0
    p, players = join(function() n = n + 1 return n end) -- no function of its keys
    players:insert{ id = 1, team_id = 1 }
    local err = H.error_of(players.update, players, { id = 1, team_id = 1, v = 5 })
    assert.matches("j: the selector gave the result of left row id 1 another key than before for the same keys "
                   .. "(key 2, id 2; was key 1, id 1): a selector must depend on its two keys alone", err, 1, true)
    p:close()
  end)
end)
