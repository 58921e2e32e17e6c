-- Rows pushed from Lua (rel:insert/update/delete/upsert): rn_lua_torow finds
-- a key's column by the name string itself and guesses each key's column
-- from the row before; whatever a row's keys, their order or their length
-- (names longer than Lua interns), every value lands in its own column and
-- bad keys get the same messages.
local runnel = require "runnel"

local LONG = ("c"):rep(45) -- longer than Lua's short strings: never the name's own object

local function open()
  local p = runnel.open()
  local t = p:table("t", { {"id","int"}, {"name","string", null = true}, {LONG,"int", null = true},
                           {"score","float", null = true}, key = "id" })
  return p, t
end

local function rows_of(t)
  local rows = {}
  t:scan(function(r) rows[r.id] = { name = r.name, long = r[LONG], score = r.score } end)
  return rows
end

describe("rows pushed from Lua", function()
  it("put every value in its column whatever the row's shape, one after another", function()
    local p, t = open()
    t:insert{ id = 1, name = "a", [LONG] = 10, score = 1.0 }
    t:insert{ score = 2.5, id = 2 }                       -- another shape: the guesses miss
    t:insert{ [("c"):rep(44) .. "c"] = 30, id = 3 }       -- a long name made at run time
    t:update{ id = 1, [LONG] = 11 }
    t:update{ name = "b", id = 2 }
    t:upsert{ id = 4, name = "d", [LONG] = -4, score = -0.5 }
    t:delete{ id = 3 }
    t:delete(4)
    local rows = rows_of(t)
    assert.same({ [1] = { name = "a", long = 11, score = 1.0 }, [2] = { name = "b", score = 2.5 } }, rows)
    assert.equal("float", math.type(rows[1].score)) -- 1.0 stays a float
    p:close()
  end)

  it("refuse a key that names no column, or is not a string, with the same messages", function()
    local p, t = open()
    t:insert{ id = 1, name = "a" }
    local ok, err = pcall(t.insert, t, { id = 2, nmae = "x" })
    assert.is_false(ok)
    assert.matches('t: unknown column "nmae"', err, 1, true)
    ok, err = pcall(t.update, t, { id = 1, [LONG .. "x"] = 1 })
    assert.is_false(ok)
    assert.matches('t: unknown column "' .. LONG .. 'x"', err, 1, true)
    ok, err = pcall(t.insert, t, { id = 3, [true] = 1 })
    assert.is_false(ok)
    assert.matches("t: column names are strings, got boolean", err, 1, true)
    ok, err = pcall(t.insert, t, { id = 3, [runnel.null] = 1 })
    assert.is_false(ok)
    assert.matches("t: column names are strings, got userdata", err, 1, true)
    ok, err = pcall(t.insert, t, "row")
    assert.is_false(ok)
    assert.matches("t: a row is a table keyed by column names, got string", err, 1, true)
    assert.same({ [1] = { name = "a" } }, rows_of(t))
    p:close()
  end)
end)
