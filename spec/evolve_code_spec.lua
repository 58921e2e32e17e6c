-- A filter's or map's function, or a join's mapper, selector or joiner,
-- changed between runs over one state (README "Changing a pipeline"): the
-- state records a fingerprint of each function (its bytecode without debug
-- information, and the values of the upvalues it reads), and a new one has
-- what is built from it rebuilt, as a changed declaration does; the same
-- function (moved to another line, say) rebuilds nothing.
local runnel = require "runnel"
local H = require "helper"

local open = H.open_noting

local T = { {"k","int"}, {"v","int"}, {"g","int"}, key = "k" }

-- Declares t, a filter by keep and an aggregate over it, on the state at dir.
local function filtered(dir, keep)
  local p, lines = open(dir)
  local t = p:table("t", T)
  local a = t:filter(keep, "kept"):aggregate{ by = "g", n = runnel.count(), total = runnel.sum("v"), name = "a" }
  return p, t, a, lines
end

local function seed(t)
  for k = 1, 4 do t:insert{ k = k, v = 10 * k, g = k % 2 } end
end

describe("a changed filter function", function()
  after_each(H.cleanup)

  it("rebuilds the aggregate over it, and says so", function()
    local dir = H.tmpdir()
    local p, t, a = filtered(dir, function(r) return r.k > 1 end)
    seed(t)
    assert.same({ g = 0, n = 2, total = 60 }, a:get{ g = 0 })
    p:close()
    local lines
    p, t, a, lines = filtered(dir, function(r) return r.k > 2 end)
    assert.same({ g = 0, n = 1, total = 40 }, a:get{ g = 0 })
    assert.same({ g = 1, n = 1, total = 30 }, a:get{ g = 1 })
    assert.truthy(lines[1] and lines[1]:find('kept: its function changed', 1, true), table.concat(lines, "\n"))
    t:insert{ k = 5, v = 50, g = 1 }
    assert.same({ g = 1, n = 2, total = 80 }, a:get{ g = 1 })
    p:close()
  end)

  it("rebuilds nothing when the function is the same (another line, another name)", function()
    local dir = H.tmpdir()
    local p, t = filtered(dir, function(r) return r.k > 1 end)
    seed(t)
    p:close()
    local function   keep_more(row)
      return row.k > 1
    end
    local lines
    p, t, _, lines = filtered(dir, keep_more)
    assert.same({}, lines)
    p:close()
  end)

  it("sees a changed upvalue the function reads", function()
    local dir = H.tmpdir()
    local limit = 1
    local p, t, a = filtered(dir, function(r) return r.k > limit end)
    seed(t)
    p:close()
    limit = 3
    p, t, a = filtered(dir, function(r) return r.k > limit end)
    assert.same({ g = 0, n = 1, total = 40 }, a:get{ g = 0 })
    assert.is_nil(a:get{ g = 1 })
    p:close()
  end)
end)

describe("a changed map function", function()
  after_each(H.cleanup)

  local function mapped(dir, fn)
    local p, lines = open(dir)
    local t = p:table("t", T)
    local a = t:map(fn, { {"k","int"}, {"w","int"}, key = "k" }, "m"):aggregate{ total = runnel.sum("w"), name = "a" }
    return p, t, a, lines
  end

  it("rebuilds the aggregate over it", function()
    local dir = H.tmpdir()
    local p, t, a = mapped(dir, function(r) return { k = r.k, w = r.v } end)
    seed(t)
    assert.equal(100, select(1, a:rows())().total)
    p:close()
    local lines
    p, t, a, lines = mapped(dir, function(r) return { k = r.k, w = 2 * r.v } end)
    assert.equal(200, select(1, a:rows())().total)
    assert.truthy(lines[1] and lines[1]:find("m: its function changed", 1, true), table.concat(lines, "\n"))
    p:close()
  end)
end)

describe("a changed runnel.agg function", function()
  after_each(H.cleanup)

  local function summed(dir, times)
    local p, lines = open(dir)
    local t = p:table("t", T)
    local a = t:aggregate{ by = "g", x = runnel.agg{ init = function() return 0 end,
                                                     add = function(s, r) return s + times * r.v end,
                                                     remove = function(s, r) return s - times * r.v end }, name = "a" }
    return p, t, a, lines
  end

  it("rebuilds the aggregate", function()
    local dir = H.tmpdir()
    local p, t, a = summed(dir, 1)
    seed(t)
    assert.same({ g = 0, x = 60 }, a:get{ g = 0 })
    p:close()
    local lines
    p, t, a, lines = summed(dir, 2) -- an upvalue the functions read
    assert.same({ g = 0, x = 120 }, a:get{ g = 0 })
    assert.truthy(table.concat(lines, "\n"):find("a: its function changed", 1, true), table.concat(lines, "\n"))
    t:delete{ k = 4 }
    assert.same({ g = 0, x = 40 }, a:get{ g = 0 })
    p:close()
  end)
end)

describe("a changed join mapper", function()
  after_each(H.cleanup)

  local function joined(dir, mapper)
    local p, lines = open(dir)
    local t = p:table("t", T)
    local u = p:table("u", { {"id","int"}, {"name","string"}, key = "id" })
    local j = t:join(u, { mapper = mapper, name = "j" })
    return p, t, u, j, lines
  end

  it("rebuilds the join's rows", function()
    local dir = H.tmpdir()
    local p, t, u, j = joined(dir, function(r) return r.g end)
    u:insert{ id = 0, name = "even" }
    u:insert{ id = 1, name = "odd" }
    u:insert{ id = 2, name = "two" }
    seed(t)
    assert.equal("odd", j:get{ k = 3 }.name)
    p:close()
    local lines
    p, t, u, j, lines = joined(dir, function(r) return r.k % 3 end)
    local seen = {}
    j:sink(function(verb, row) seen[#seen + 1] = verb .. " " .. row.k .. " " .. row.name end)
    u:update{ id = 1, name = "ODD" } -- fans out to the left rows the mapper files under 1: k = 1 and 4 now
    -- the group starts with what the rebuild changed (evolve_changelog_spec.lua), then its own changes
    assert.same({ "UPDATE 2 two", "UPDATE 3 even", "UPDATE 4 odd", "UPDATE 1 ODD", "UPDATE 4 ODD" }, seen)
    assert.truthy(table.concat(lines, "\n"):find("j: its function changed", 1, true), table.concat(lines, "\n"))
    p:close()
  end)
end)
