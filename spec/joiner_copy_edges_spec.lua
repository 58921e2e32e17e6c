-- Joiners the bytecode reader (lua/runnel/joiner.lua) might take for a
-- copy of columns when doing them in C would not give what calling them
-- gives: each is run both ways (as given, and called through a wrapper
-- that cannot be recognised) and the rows, events and errors must agree.
local runnel = require "runnel"
local H = require "helper"
local copies = require("runnel.joiner")()

local function pass(v) return v end

-- teams and players, with nullable columns and a missing team.
local function tables(p)
  local teams = p:table("teams", { {"id","int"}, {"name","string"}, {"w","float", null = true}, key = "id" })
  local players = p:table("players", { {"id","int"}, {"name","string"}, {"team","int", null = true},
                                       {"nick","string", null = true}, key = "id" })
  return teams, players
end

local function changes(teams, players)
  teams:insert{ id = 1, name = "one", w = 2 }
  teams:insert{ id = 2, name = "two", w = -0.5 }
  players:insert{ id = 1, name = "a", team = 1, nick = "aa" }
  players:insert{ id = 2, name = "b", team = 3 }
  players:insert{ id = 3, name = "c" }
  players:insert{ id = 4, name = "d", team = 2 }
  teams:insert{ id = 3, name = "three" }
  teams:update{ id = 1, name = "uno" }
  players:update{ id = 1, nick = runnel.null }
  teams:delete{ id = 2 }
end

-- The rows, events and error of a join declared by opts(joiner) (a
-- function of the joiner giving players:join's options).
local function outcome(joiner, opts)
  local p = runnel.open()
  local teams, players = tables(p)
  local j = players:join(teams, opts(joiner))
  local log = {}
  j:sink(function(verb, row, old) log[#log + 1] = verb .. " " .. runnel.format_value(row) .. " " .. runnel.format_value(old) end)
  local ok, err = pcall(changes, teams, players)
  local rows = {}
  for r in j:rows() do rows[#rows + 1] = runnel.format_value(r) end
  table.sort(rows)
  p:close()
  -- the error without where the joiner is: the wrapper calling it is elsewhere
  err = not ok and tostring(err):gsub("^.-:%d+: ", ""):gsub(" %(the joiner at [^()]*%)$", "") or nil
  return { rows = rows, log = log, err = err }
end

local function same_as_called(joiner, opts)
  local called = function(l, r) return pass(joiner)(l, r) end
  assert.same(outcome(called, opts), outcome(joiner, opts))
end

describe("a joiner that looks like a copy", function()
  after_each(H.cleanup)

  it("returning one value is called: a nil value is no result, not a row with a null", function()
    local guarded = function(_, r) return r and r.name end
    local nick = function(l) return l.nick end
    assert.is_nil(copies(guarded, "left"))
    assert.is_nil(copies(nick, "inner"))
    same_as_called(guarded, function(j)
      return { on = "team", kind = "left", joiner = j, columns = { {"name","string", null = true} } }
    end)
    same_as_called(nick, function(j)
      return { on = "team", joiner = j, columns = { {"nick","string", null = true} } }
    end)
  end)
end)

describe("the bytecode reader", function()
  after_each(H.cleanup)

  local cols = { {"id","int"}, {"tname","string", null = true}, key = "id" }
  local shapes = {
    reused = function(l, r) local a = l.id; a = r and r.name; return { id = l.id, tname = a } end,
    own_register = function(l, r) local t = { id = l.id }; t = { id = l.id, tname = r and r.name }; return t end,
    into_param = function(l, r) r = r and r.name; return { id = l.id, tname = r } end,
    left_guard = function(l, r) return { id = l and l.id, tname = r and r.name } end,
    other_guard = function(l, r) return { id = l.id, tname = l and r.name } end,
    long_jump = function(l, r) return { id = l.id, tname = r and r.name and r.name } end,
    or_guard = function(l, r) return { id = l.id, tname = r or r.name } end,
    no_column = function(l, r) return { id = l.id, tname = r and r.nick } end,
    left_not_right = function(l, r) return { id = l.id, tname = r and l.name } end,
    nested = function(l, r) return { id = l.id, tname = r and r.name.x } end,
    values = function(l, r) return l.id, r and r.name end,
    values_three = function(l, r) return l.id, r and r.name, l.nick end,
    loaded = load("return function(l, r) return { id = l.id, tname = r and r.name } end")(),
    stripped = load(string.dump(function(l, r) return { id = l.id, tname = r and r.name } end, true)),
    with_lines = load(string.dump(function(l, r) return { id = l.id, tname = r and r.name } end)),
    long_key = function(l, r)
      return { id = l.id, tname = r and r.name, a_column_name_that_is_longer_than_forty_bytes = l.name }
    end,
  }

  it("reads a dump of every shape without raising", function()
    for name, fn in pairs(shapes) do
      for _, kind in ipairs{ "inner", "left", "outer" } do
        local ok, got = pcall(copies, fn, kind)
        assert.is_true(ok, name .. " " .. kind)
        assert.is_true(got == nil or type(got) == "table", name)
      end
    end
  end)

  for name, fn in pairs(shapes) do
    for _, kind in ipairs{ "inner", "left" } do
      it("gives what calling it gives: " .. name .. ", " .. kind, function()
        same_as_called(fn, function(j)
          return { on = "team", kind = kind, joiner = j, columns = cols }
        end)
      end)
    end
  end
end)

describe("a join whose joiner changes between opens", function()
  after_each(H.cleanup)

  -- The join's rows counted by tname, as agg should hold them.
  local function counted(j)
    local n = {}
    for r in j:rows() do n[r.tname] = (n[r.tname] or 0) + 1 end
    return n
  end
  local function held(agg)
    local n = {}
    for r in agg:rows() do n[r.tname] = r.n end
    return n
  end

  -- A state made with first, opened again with second: the join is
  -- rebuilt, and so is an aggregate over it, which holds its old rows.
  local function reopened(first, second)
    local dir = H.tmpdir()
    local function open(joiner)
      local p = runnel.open{ path = dir }
      local teams = p:table("teams", { {"id","int"}, {"name","string"}, {"nick","string"}, key = "id" })
      local players = p:table("players", { {"id","int"}, {"team","int", null = true}, key = "id" })
      local j = players:join(teams, { on = "team", kind = "left", joiner = joiner, name = "j",
                                      columns = { {"id","int"}, {"tname","string", null = true}, key = "id" } })
      return p, teams, players, j, j:aggregate{ by = "tname", n = runnel.count(), name = "agg" }
    end
    local p, teams, players, j, agg = open(first)
    teams:insert{ id = 1, name = "N", nick = "K" }
    players:insert{ id = 1, team = 1 }
    players:insert{ id = 2, team = 1 }
    p:close()
    p, teams, players, j, agg = open(second)
    assert.same({ K = 2 }, counted(j))
    assert.same(counted(j), held(agg))
    players:delete{ id = 1 }
    assert.same({ K = 1 }, held(agg))
    p:close()
  end

  it("rebuilds what is declared over it: from one copy to another", function()
    reopened(function(l, r) return { id = l.id, tname = r and r.name } end,
             function(l, r) return { id = l.id, tname = r and r.nick } end)
  end)

  it("rebuilds what is declared over it: from a joiner called to a copy", function()
    reopened(function(l, r) return { id = l.id, tname = r and pass(r.name) } end,
             function(l, r) return { id = l.id, tname = r and r.nick } end)
  end)
end)

describe("a select declared again over another column of the same type", function()
  after_each(H.cleanup)

  it("has what is declared over it rebuilt", function()
    local dir = H.tmpdir()
    local notes = {}
    local function open(col)
      local p = runnel.open{ path = dir, notes = function(line) notes[#notes + 1] = line end }
      local t = p:table("t", { {"id","int"}, {"a","string"}, {"b","string"}, key = "id" })
      local s = t:select({ "id", {"x", col} }, "s")
      return p, t, s:aggregate{ by = "x", n = runnel.count(), name = "agg" }
    end
    local p, t, agg = open("a")
    t:insert{ id = 1, a = "A", b = "B" }
    p:close()
    p, t, agg = open("b")
    local held = {}
    for r in agg:rows() do held[r.x] = r.n end
    assert.same({ B = 1 }, held)
    assert.matches("s: its declaration changed", table.concat(notes, "\n"), 1, true)
    t:delete{ id = 1 }
    assert.equal(0, agg:count())
    p:close()
  end)
end)
