-- Lua row tables into stored rows (lconvert.c's rn_lua_torow): every value
-- keeps its Lua type and value whatever order the table's keys come in,
-- whether the table is given to insert or returned by a joiner; a key that
-- names no column is refused wherever it comes. Randomized, seeded.
local runnel = require "runnel"
local H = require "helper"

local COLS = { {"k","int"}, {"i","int", null = true}, {"f","float", null = true}, {"s","string", null = true},
               {"b","bool", null = true}, {"a","any", null = true}, key = "k" }
local NAMES = { "i", "f", "s", "b", "a" }

local function random_value(name)
  local pick = math.random(6)
  if pick == 1 then return nil end
  if name == "i" then return ({ 0, -1, 1, math.maxinteger, math.mininteger, math.random(-1000, 1000) })[pick] end
  if name == "f" then return ({ 1.0, -0.5, 0.0, 2.0^53, math.random() * 1e6, -3.25 })[pick] end
  if name == "s" then return ({ "", "x", "name", ("z"):rep(300), "é", tostring(math.random(1e6)) })[pick] end
  if name == "b" then return pick % 2 == 0 end
  return ({ 7, 2.5, "s", 1.0, { 1, 2 }, { x = 1, y = 3.0 } })[pick] -- 1.0 must stay a float
end

-- A fresh table of row's fields (key first: the key column's name), set in a random order.
local function shuffled(row, key)
  local names = { key or "k" }
  for _, name in ipairs(NAMES) do names[#names + 1] = key and "p" .. name or name end
  for n = #names, 2, -1 do local m = math.random(n); names[n], names[m] = names[m], names[n] end
  local t = {}
  for _, name in ipairs(names) do t[name] = row[name] end
  return t
end

local function same_value(want, got, where)
  if type(want) == "table" then assert.same(want, got, where) return end
  assert.equal(want, got, where)
  assert.equal(math.type(want), math.type(got), where) -- 1.0 stays a float, 1 an integer
end

local function check_rows(rel, want, what)
  local rows = {}
  rel:scan(function(r)
    local copy = {}
    for name, v in pairs(r) do copy[name] = v end
    rows[#rows + 1] = copy
  end)
  local count = 0
  for _ in pairs(want) do count = count + 1 end
  assert.equal(count, #rows, what)
  for _, r in ipairs(rows) do
    local prefix = r.k and "" or "p" -- a joiner's result has pk, pi, …
    local w = assert(want[r[prefix .. "k"]], what .. ": unexpected row")
    for _, name in ipairs(NAMES) do same_value(w[name], r[prefix .. name], what .. " " .. name) end
  end
end

describe("row tables", function()
  it("keep every value's type through insert and through a joiner's returned table, in any key order", function()
    math.randomseed(1313)
    local p = runnel.open()
    local t = p:table("t", COLS)
    local one = p:table("one", { {"id","int"}, key = "id" })
    local j = t:join(one, { kind = "left", mapper = function() return 1 end,
      joiner = function(l)
        local out = { pk = l.k }
        for _, name in ipairs(NAMES) do out["p" .. name] = l[name] end
        return shuffled(out, "pk")
      end,
      columns = { {"pk","int"}, {"pi","int", null = true}, {"pf","float", null = true}, {"ps","string", null = true},
                  {"pb","bool", null = true}, {"pa","any", null = true}, key = "pk" } })
    local want = {}
    for g = 1, 20 do
      p:begin()
      for n = 1, 25 do
        local row = { k = (g - 1) * 25 + n }
        for _, name in ipairs(NAMES) do row[name] = random_value(name) end
        t:insert(shuffled(row))
        want[row.k] = row
      end
      p:commit()
    end
    check_rows(t, want, "table")
    check_rows(j, want, "joiner result")
    p:close()
  end)

  it("refuse a key naming no column wherever it comes, and roll the group back", function()
    math.randomseed(1314)
    local p = runnel.open()
    local t = p:table("t", COLS)
    for trial = 1, 30 do
      local row = { k = trial }
      for _, name in ipairs(NAMES) do row[name] = random_value(name) end
      local bad = shuffled(row)
      bad["nope" .. trial] = trial % 2 == 0 and 1 or "x"
      p:begin()
      t:insert{ k = 1000 + trial }
      local err = H.error_of(t.insert, t, bad)
      assert.matches('unknown column "nope' .. trial .. '"', err, 1, true)
      if p:in_group() then p:rollback() end
    end
    assert.equal(0, t:count())
    p:close()
  end)
end)
