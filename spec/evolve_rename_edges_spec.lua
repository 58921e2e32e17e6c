-- A rename (`was =` in a declaration, or p:alter before it) that names a
-- column the state does not hold is refused, naming the relation, both
-- columns and what the state holds: applied as it was, the stored column
-- was dropped with its values and the new one filled with its default.
local runnel = require "runnel"
local H = require "helper"

local V1 = { {"id","int"}, {"lvl","int"}, {"score","int"}, key = "id" }

local function seeded(dir)
  local p = runnel.open{ path = dir, notes = false }
  p:table("players", V1):insert{ id = 1, lvl = 3, score = 10 }
  p:close()
end

describe("a rename of a column the state does not hold", function()
  after_each(H.cleanup)

  it("is refused (was =), and the stored column keeps its values", function()
    local dir = H.tmpdir()
    seeded(dir)
    local p = runnel.open{ path = dir, notes = false }
    local err = H.error_of(function()
      p:table("players", { {"id","int"}, {"level","int", default = 1, was = "lv"}, {"score","int"}, key = "id" })
    end)
    assert.equal('relation "players": column "level" is renamed from "lv", but the state holds no column "lv" '
                 .. '(it holds id, lvl, score): name a stored column, or drop the rename', err)
    assert.same({}, p:changes())
    local t = p:table("players", V1)
    assert.same({ id = 1, lvl = 3, score = 10 }, t:get{ id = 1 })
    p:close()
  end)

  it("is refused (p:alter)", function()
    local dir = H.tmpdir()
    seeded(dir)
    local p = runnel.open{ path = dir, notes = false }
    p:alter("players", { rename = { lv = "level" } })
    local err = H.error_of(function()
      p:table("players", { {"id","int"}, {"level","int", null = true}, {"score","int"}, key = "id" })
    end)
    assert.matches('column "level" is renamed from "lv", but the state holds no column "lv"', err, 1, true)
    p:close()
  end)

  it("is skipped once applied: the state holds the new name", function()
    local dir = H.tmpdir()
    seeded(dir)
    local V2 = { {"id","int"}, {"level","int", was = "lvl"}, {"score","int"}, key = "id" }
    local p = runnel.open{ path = dir, notes = false }
    p:table("players", V2)
    p:close()
    p = runnel.open{ path = dir, notes = false }
    local t = p:table("players", { {"id","int"}, {"level","int", was = "lvl"}, {"score","int"}, {"x","int", null = true},
                                   key = "id" })
    assert.same({ 'players: added "x" int = null' }, p:changes())
    assert.same({ id = 1, level = 3, score = 10 }, t:get{ id = 1 })
    p:close()
  end)
end)

describe("p:alter on a relation this pipeline declared already", function()
  after_each(H.cleanup)

  it("is refused: the rename would apply at a declaration that cannot come", function()
    local dir = H.tmpdir()
    seeded(dir)
    local p = runnel.open{ path = dir, notes = false }
    p:table("players", V1)
    local err = H.error_of(p.alter, p, "players", { rename = { lvl = "level" } })
    assert.equal('alter: relation "players" is declared already in this pipeline, and a rename applies when it '
                 .. 'is declared: call p:alter before declaring it', err)
    p:close()
  end)
end)

describe("a table declared twice with was =", function()
  after_each(H.cleanup)

  it("is refused as declared twice, not as an alter", function()
    local dir = H.tmpdir()
    seeded(dir)
    local p = runnel.open{ path = dir, notes = false }
    p:table("players", V1)
    local err = H.error_of(p.table, p, "players",
                           { {"id","int"}, {"level","int", was = "lvl"}, {"score","int"}, key = "id" })
    assert.is_nil(err:find("alter", 1, true), err)
    p:close()
  end)
end)
