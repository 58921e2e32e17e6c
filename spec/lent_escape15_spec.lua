-- Which mappers and joiners can keep a row lent to them past the call
-- (lua/runnel/lent.lua): those get a new Row each call, so that a kept
-- Row raises when read later; the others reuse one Row. The analysis must
-- never call a function that can keep a row safe; the specs after it
-- check the calls themselves, including a helper swapped after the join
-- was declared (one that can be assigned is not trusted; a <const> one
-- swapped by the debug library fails its guard: lent_escape_review15_spec).
local runnel = require "runnel"
local lent = require "runnel.lent"
local H = require "helper"

local STALE = H.STALE_ROW

local function keeps(fn, nrows) return lent(fn, nrows or 2) == nil end

-- A helper for a join: keeps the row it is given, and notes in seen what
-- reading the row it kept the call before gives (a value, or the error).
local function keeper(seen, column)
  local kept
  return function(row)
    if kept then seen[#seen + 1] = H.read_id(kept) end
    kept = row
    return row[column]
  end
end

describe("lent.lua: whether a function can keep its rows", function()
  local kept, log = nil, {}
  local column_of <const> = function(t, col) return t and t[col] end
  local function note(row) log[#log + 1] = row end
  local function passes_on(row) return column_of(row, "id") end
  local M = { column_of = column_of }

  it("reading, testing and returning rows keeps nothing", function()
    assert.is_false(keeps(function(l, r) return { a = l.id, b = r and r.n } end))
    assert.is_false(keeps(function(l, r) return l.id, l["@ID"], r and r.n end))
    assert.is_false(keeps(function(l) return l end))
    assert.is_false(keeps(function(l, r) if not r then return nil end return { a = l.id .. r.n } end))
    assert.is_false(keeps(function(l) local s = 0; for i = 1, 3 do s = s + (l.id or i) end; return s end))
  end)

  it("globals called with columns keep nothing", function()
    assert.is_false(keeps(function(l, r) return { a = string.upper(l.name), b = tostring(r and r.n) } end))
  end)

  it("a local <const> helper that only reads the row keeps nothing, under one guard per helper", function()
    local fn = function(pl, t) return { a = column_of(t, "name"), b = column_of(t, "region"), c = pl.id } end
    local g = lent(fn, 2)
    assert.equal(2, #g)
    assert.same({ "column_of", column_of }, { debug.getupvalue(fn, g[1]) })
    assert.equal(column_of, g[2])
  end)

  it("a helper in an upvalue that can be assigned may be another function by the time it is called", function()
    local function name_of(t) return t and t.name end
    assert.is_true(keeps(function(_, t) return { a = name_of(t) } end))
  end)

  it("storing a row anywhere keeps it", function()
    assert.is_true(keeps(function(l) kept = l; return l.fk end))
    assert.is_true(keeps(function(l) log[#log + 1] = l end))
    assert.is_true(keeps(function(l) return { x = l } end))
    assert.is_true(keeps(function(l) return { l } end))
    assert.is_true(keeps(function(l) local t = {}; t[l] = true; return 1 end))
    assert.is_true(keeps(function(_, r) local x = r or 1; kept = x end))
    assert.is_true(keeps(function(l) local a = l; local b = a; kept = b end))
  end)

  it("passing a row to a function that is not a reading helper keeps it", function()
    assert.is_true(keeps(function(l) note(l) end))                     -- the helper stores it
    assert.is_true(keeps(function(l) return passes_on(l) end))         -- the helper passes it on
    assert.is_true(keeps(function(l) return M.column_of(l, "id") end)) -- not an upvalue of its own
    assert.is_true(keeps(function(l) return tostring(l) end))          -- a global
    assert.is_true(keeps(function(l) return pcall(column_of, l) end))
    assert.is_true(keeps(function(l) for k in pairs(l) do return k end end))
    assert.is_true(keeps(function(l) return l:upper() end))
    local id = function(x) return x end
    assert.is_true(keeps(function(l) return id(l).x end))             -- a helper that returns it
  end)

  it("a row beside another value in ==, <, .. or arithmetic keeps it (that value's metamethod gets it)", function()
    local other = {}
    assert.is_true(keeps(function(l) return l == other end))
    assert.is_true(keeps(function(l) return other < l end))
    assert.is_true(keeps(function(l) return other + l end))
    assert.is_true(keeps(function(l) return "x" .. l end))
  end)

  it("closures, varargs, C functions and non-functions keep their rows", function()
    assert.is_true(keeps(function(l) return function() return l end end))
    assert.is_true(keeps(function(...) return (...).id end))
    assert.is_true(keeps(print))
    assert.is_true(keeps(nil))
  end)

  it("only the arguments that are rows count", function()
    assert.is_false(keeps(function(l, extra) kept = extra; return l.fk end, 1))
    assert.is_true(keeps(function(l, r) kept = r; return l.fk end, 2))
  end)
end)

describe("a joiner whose helper is swapped after the join was declared", function()
  local setup = H.lent_tables -- all fk values new: a mapper's memo spares no call

  it("gets new Rows from then on, so a Row its new helper keeps raises when read later", function()
    local p, L, R = setup()
    local function id_of(row) return row.id end
    local j = L:join(R, { on = "fk", name = "j", columns = { {"id","int"}, {"n","string"}, key = "id" },
      joiner = function(l, r) return { id = id_of(l), n = r.n } end })
    L:insert{ id = 1, fk = 1 }
    local seen = {}
    id_of = keeper(seen, "id")
    L:insert{ id = 2, fk = 2 }
    L:insert{ id = 3, fk = 1 }
    assert.same({ STALE }, seen)
    assert.same({ id = 3, n = "one" }, j:get(3))
    assert.equal(3, j:count())
    p:close()
  end)

  it("a mapper's too", function()
    local p, L, R = setup()
    local function fk_of(row) return row.fk end
    L:join(R, { mapper = function(l) return fk_of(l) end, name = "j" })
    L:insert{ id = 1, fk = 1 }
    local seen = {}
    fk_of = keeper(seen, "fk")
    L:insert{ id = 2, fk = 2 }
    L:insert{ id = 3, fk = 3 }
    assert.same({ STALE }, seen)
    p:close()
  end)
end)
