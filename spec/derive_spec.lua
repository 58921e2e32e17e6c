-- filter and map: ids pass through; incremental on tables (DESIGN §6, §12).
local runnel = require "runnel"
local H = require "helper"

describe("filter", function()
  local p, t
  before_each(function()
    p = runnel.open()
    t = p:table("players", { {"id","int"}, {"score","int"}, key = "id" })
  end)
  after_each(function() p:close() end)

  it("turns rows entering and leaving into INSERT and DELETE under the row's id", function()
    local high = t:filter(function(r) return r.score >= 10 end)
    local log = H.record(high)
    t:insert{ id = 1, score = 5 }
    t:insert{ id = 2, score = 20 }
    t:update{ id = 1, score = 15 }
    t:update{ id = 2, score = 25 }
    t:update{ id = 2, score = 3 }
    t:delete{ id = 1 }
    t:delete{ id = 2 }
    assert.same({ "INSERT 2", "INSERT 1", "UPDATE 2", "DELETE 2", "DELETE 1" }, H.verbs(log))
    assert.same({ id = 2, score = 25 }, log[3][3])
    assert.same({ id = 2, score = 20 }, log[3][4])
  end)

  it("names derived relations after their input unless named", function()
    local a = t:filter(function() return true end)
    local b = t:filter(function() return true end)
    local c = t:filter(function() return true end, "mine")
    assert.equal("players.filter", a:name())
    assert.equal("players.filter2", b:name())
    assert.equal("mine", c:name())
  end)

  it("chains", function()
    local log = H.record(t:filter(function(r) return r.score > 0 end):filter(function(r) return r.score < 10 end))
    t:insert{ id = 1, score = 5 }
    t:insert{ id = 2, score = 50 }
    t:update{ id = 1, score = 50 }
    assert.same({ "INSERT 1", "DELETE 1" }, H.verbs(log))
  end)
end)

describe("map", function()
  local p, t
  before_each(function()
    p = runnel.open()
    t = p:table("players", { {"id","int"}, {"name","string"}, {"score","int"}, key = "id" })
  end)
  after_each(function() p:close() end)

  it("rewrites rows under their input ids and drops changes that map to the same row", function()
    local m = t:map(function(r) return { pid = r.id, label = r.name:upper(), tier = r.score // 10 } end,
                    { {"pid","int"}, {"label","string"}, {"tier","int"}, key = "pid" })
    local log = H.record(m)
    t:insert{ id = 7, name = "ann", score = 12 }
    t:update{ id = 7, score = 15 } -- same tier: no change downstream
    t:update{ id = 7, score = 25 }
    t:delete{ id = 7 }
    assert.same({
      { "INSERT", 1, { pid = 7, label = "ANN", tier = 1 } },
      { "UPDATE", 1, { pid = 7, label = "ANN", tier = 2 }, { pid = 7, label = "ANN", tier = 1 } },
      { "DELETE", 1, nil, { pid = 7, label = "ANN", tier = 2 } },
    }, log)
  end)

  it("treats nil as no row", function()
    local m = t:map(function(r) if r.score > 0 then return { id = r.id } end end, { {"id","int"} })
    local log = H.record(m)
    t:insert{ id = 1, name = "a", score = 0 }
    t:update{ id = 1, score = 1 }
    assert.same({ "INSERT 1" }, H.verbs(log))
  end)

  it("checks the rows it returns against its columns and rolls back", function()
    t:map(function(r) return { id = r.name } end, { {"id","int"} }, "bad")
    local line = debug.getinfo(1, "l").currentline - 1 -- the map's, named since 0.36
    local err = H.error_of(t.insert, t, { id = 1, name = "x", score = 0 })
    assert.equal(('map returned a bad row: bad: column "id": expected int, got string (the map at spec/derive_spec.lua:%d)')
                 :format(line), err)
    assert.equal(0, t:count())
  end)

  it("works on streams", function()
    local s = p:stream("ev", { {"n","int"} })
    local log = H.record(s:map(function(r) return { double = r.n * 2 } end, { {"double","int"} }))
    s:insert{ n = 2 }
    assert.same({ { "INSERT", 1, { double = 4 } } }, log)
  end)
end)

describe("select", function()
  it("keeps, renames and reorders columns, keeps the key, and drops changes to other columns", function()
    local p = runnel.open()
    local t = p:table("players", { {"id","int"}, {"name","string"}, {"score","int"}, {"tags","list", null = true}, key = "id" })
    local s = t:select{ {"pid","id"}, "tags", {"who","name"} }
    local names = {}
    for i, c in ipairs(s:schema().columns) do names[i] = c.name .. ":" .. c.type end
    assert.same({ "pid:int", "tags:list", "who:string" }, names)
    assert.same({ "pid" }, s:schema().key)
    local log = H.record(s)
    t:insert{ id = 1, name = "ann", score = 1, tags = { "a", runnel.null } }
    t:update{ id = 1, score = 2 } -- not selected: nothing downstream
    t:update{ id = 1, name = "anna" }
    assert.same({
      { "INSERT", 1, { pid = 1, who = "ann", tags = { "a", runnel.null } } },
      { "UPDATE", 1, { pid = 1, who = "anna", tags = { "a", runnel.null } }, { pid = 1, who = "ann", tags = { "a", runnel.null } } },
    }, log)
    assert.same({ pid = 1, who = "anna", tags = { "a", runnel.null } }, s:get(1))
    assert.is_nil(t:select{ "name" }:schema().key)
    assert.equal('players.select3: select: players has no column "nope"', H.error_of(t.select, t, { "nope" }))
    p:close()
  end)
end)
