-- A helper held in a mapper's or joiner's upvalue is trusted by lent.lua
-- (lua/runnel/lent.lua) when it cannot keep the row, and the call checks,
-- before it starts, that the upvalue still holds it. An upvalue anyone can
-- assign may hold another function by the time the function reads it in
-- that same call (the function itself, the helper, or any code either
-- calls can assign it): that function then gets the one Row reused call
-- after call, and a Row it keeps reads a later call's row. Only a helper
-- in a read-only (<const>) upvalue can be trusted.
local runnel = require "runnel"
local lent = require "runnel.lent"
local H = require "helper"

local STALE = H.STALE_ROW

local function keeps(fn, nrows) return lent(fn, nrows or 2) == nil end

local setup, read = H.lent_tables, H.read_id

local COLUMNS = { {"id","int"}, {"n","string"}, key = "id" }

-- Inserts L rows 1..3 through a join with joiner and returns what reading
-- the kept row gave during the later calls.
local function run(joiner, seen)
  local p, L, R = setup()
  L:join(R, { on = "fk", name = "j", columns = COLUMNS, joiner = joiner })
  for i = 1, 3 do L:insert{ id = i, fk = i } end
  p:close()
  return seen
end

describe("a helper swapped during the call", function()
  it("by the joiner itself: the Row the new helper keeps raises when read later", function()
    local kept, seen = nil, {}
    local function good(row) return row.id end
    local function bad(row) kept = row; return row.id end
    local h = good
    local function joiner(l, r)
      if kept then seen[#seen + 1] = read(kept) end
      local id = h(l)
      h = bad
      h(l)
      h = good
      return { id = id, n = r.n }
    end
    assert.same({ STALE, STALE }, run(joiner, seen))
  end)

  it("by the helper (an upvalue it shares): the same", function()
    local kept, seen = nil, {}
    local h
    local function bad(row) kept = row; h = nil; return row.id end
    local function good(row) h = bad; return row.id end
    h = good
    local function joiner(l, r)
      if kept then seen[#seen + 1] = read(kept) end
      if h == nil then h = good end
      return { id = h(l), n = h(l) and r.n }
    end
    assert.same({ STALE, STALE }, run(joiner, seen))
  end)

  it("by a function called without rows: the same", function()
    local kept, seen = nil, {}
    local h
    local function good(row) return row.id end
    local function bad(row) kept = row; h = good; return row.id end
    local function swap() h = bad end
    h = good
    local function joiner(l, r)
      if kept then seen[#seen + 1] = read(kept) end
      swap()
      return { id = h(l), n = r.n }
    end
    assert.same({ STALE, STALE }, run(joiner, seen))
  end)

  it("by a mapper: the same", function()
    local kept, seen = nil, {}
    local function good(row) return row.fk end
    local function bad(row) kept = row; return row.fk end
    local h = good
    local function mapper(row)
      if kept then seen[#seen + 1] = read(kept) end
      h = bad
      local fk = h(row)
      h = good
      return fk
    end
    local p, L, R = setup()
    L:join(R, { mapper = mapper, name = "j" })
    for i = 1, 3 do L:insert{ id = i, fk = i } end
    p:close()
    assert.same({ STALE, STALE }, seen)
  end)
end)

describe("a helper in a read-only upvalue", function()
  local column_of <const> = function(t, col) return t and t[col] end
  local function mutable(t, col) return t and t[col] end

  it("is trusted, under a guard; one in an upvalue that can be assigned is not", function()
    local fn = function(pl, t) return { a = column_of(t, "name"), c = pl.id } end
    local g = lent(fn, 2)
    assert.equal(2, #g)
    assert.equal(column_of, g[2])
    assert.is_true(keeps(function(pl, t) return { a = mutable(t, "name"), c = pl.id } end))
  end)

  it("swapped all the same (debug.setupvalue): new Rows from then on", function()
    local p, L, R = setup()
    local seen, kept = {}, nil
    local fn = function(l, r) return { id = column_of(l, "id"), n = r.n } end
    L:join(R, { on = "fk", name = "j", columns = COLUMNS, joiner = fn })
    L:insert{ id = 1, fk = 1 }
    local i = 1
    while debug.getupvalue(fn, i) ~= "column_of" do i = i + 1 end
    debug.setupvalue(fn, i, function(row, col)
      if kept then seen[#seen + 1] = read(kept) end
      kept = row
      return row[col]
    end)
    L:insert{ id = 2, fk = 2 }
    L:insert{ id = 3, fk = 3 }
    assert.same({ STALE }, seen)
    p:close()
  end)

  it("swapped during a call (debug.setupvalue): the reused Row kept then stays stale in later calls", function()
    local p, L, R = setup()
    local seen, kept = {}, nil
    local value_of <const> = function(t, col) return t and t[col] end -- its own: the test above swapped column_of
    local fn = function(l, r)
      local id = value_of(l, "id")
      swap_helper() -- a global called with no row: allowed; it swaps value_of under the call
      return { id = value_of(l, "id") or id, n = r.n }
    end
    local i = 1
    while debug.getupvalue(fn, i) ~= "value_of" do i = i + 1 end
    _G.swap_helper = function()
      debug.setupvalue(fn, i, function(row, col)
        if kept then seen[#seen + 1] = read(kept) end
        kept = row
        return row[col]
      end)
    end
    L:join(R, { on = "fk", name = "j", columns = COLUMNS, joiner = fn })
    L:insert{ id = 1, fk = 1 } -- the guard holds: the reused Row, kept by the swapped helper
    L:insert{ id = 2, fk = 2 } -- the guard fails: new Rows; the reused one is not renewed for them
    L:insert{ id = 3, fk = 3 }
    _G.swap_helper = nil
    -- each call reads the Row kept the call before (stale), then the one it
    -- kept itself earlier in the same call (valid: its id)
    assert.same({ STALE, 2, STALE, 3 }, seen)
    p:close()
  end)
end)
