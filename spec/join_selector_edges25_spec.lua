-- A join's selector that gives a result another key than before: the
-- message shows the old key, as it shows the new one.
local H = require "helper"
local runnel = require "runnel"

describe("a selector that gives a result another key than before", function()
  -- The message showed the new key but only the old result's id ("key
  -- (1, "b"), id 2; was id 1"): which key the selector had given before
  -- was left to guess.
  it("shows the key it gave before, as it shows the new one", function()
    local p = runnel.open()
    local teams = p:table("teams", { {"id","int"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"team_id","int"}, {"v","int", null = true}, key = "id" })
    local tags = { "a", "b" }
    local n = 0
    players:join(teams, { on = "team_id", name = "j",
                          selector = function(_, tid) n = n + 1; return { tid, tags[n] or "c" } end })
    teams:insert{ id = 1 }
    players:insert{ id = 1, team_id = 1 }
    assert.equal('j: the selector gave the result of left row id 1 another key than before for the same keys '
                 .. '(key (1, "b"), id 2; was key (1, "a"), id 1): a selector must depend on its two keys alone',
                 H.error_of(players.update, players, { id = 1, team_id = 1, v = 5 }))
    assert.is_nil(players:get(1).v) -- the update was refused
    p:close()
  end)

  -- A key longer than LMDB's is stored under its hash, the whole key beside its id.
  it("shows a long old key from where it is kept whole", function()
    local p = runnel.open()
    local teams = p:table("teams", { {"id","int"}, key = "id" })
    local players = p:table("players", { {"id","int"}, {"team_id","int"}, {"v","int", null = true}, key = "id" })
    local n = 0
    players:join(teams, { on = "team_id", name = "j",
                          selector = function(_, tid) n = n + 1; return { tid, (n == 1 and "a" or "b"):rep(600) } end })
    teams:insert{ id = 1 }
    players:insert{ id = 1, team_id = 1 }
    local err = H.error_of(players.update, players, { id = 1, team_id = 1, v = 5 })
    assert.matches('; was key (1, "aaaa', err, 1, true)
    assert.matches('(key (1, "bbbb', err, 1, true)
    p:close()
  end)
end)
