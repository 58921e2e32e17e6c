-- Aggregates at their edges against a plain Lua recomputation (what a SQL
-- database gives): AGG-1 (each group's row is the aggregate of its rows,
-- nulls skipped), AGG-2 (verbs), AGG-4 (int sums exact or refused).
local runnel = require "runnel"
local H = require "helper"
local null = runnel.null

-- Values as text that tells ints, floats, NaN and big ints apart exactly.
local function fmt(v)
  if math.type(v) == "integer" then return "int:" .. v end
  if type(v) == "number" then
    if v ~= v then return "nan" end
    return ("float:%.17g"):format(v == 0 and 0.0 or v) -- -0.0 and 0.0 are one value (one key)
  end
  if type(v) == "string" then return ("%q"):format(v) end
  return tostring(v)
end

-- A row's columns as sorted "name=value" text.
local function text(r)
  local out = {}
  for k, v in pairs(r) do out[#out + 1] = k .. "=" .. fmt(v) end
  table.sort(out)
  return table.concat(out, " ")
end

-- rows by id -> sorted list of their texts (the ids left out)
local function texts(by_id)
  local out = {}
  for _, r in pairs(by_id) do out[#out + 1] = text(r) end
  table.sort(out)
  return out
end

local function rows_of(rel)
  local out = {}
  for r, id in rel:rows() do out[id] = r end
  return out
end

describe("min and max of values longer than an LMDB key", function()
  local p
  after_each(function() if p then p:close() end p = nil end)

  it("gives the least and greatest string and bytes value, however long, through deletes", function()
    p = runnel.open{ sync = false }
    local t = p:table("t", { {"id","int"}, {"g","string"}, {"s","string", null = true}, {"b","bytes", null = true},
                             key = "id" })
    local a = t:aggregate{ by = "g", lo = runnel.min("s"), hi = runnel.max("s"), blo = runnel.min("b"),
                           bhi = runnel.max("b") }
    local long = string.rep("x", 600)
    t:insert{ id = 1, g = "a", s = long .. "b", b = long .. "\0b" }
    t:insert{ id = 2, g = "a", s = long .. "a", b = long .. "\0a" }
    t:insert{ id = 3, g = "a", s = long .. "c", b = long }
    t:insert{ id = 4, g = "a", s = "z", b = "z" }
    local r = a:get("a")
    assert.equal(long .. "a", r.lo)
    assert.equal("z", r.hi)
    assert.equal(long, r.blo)
    assert.equal("z", r.bhi)
    t:delete{ id = 4 }
    r = a:get("a")
    assert.equal(long .. "c", r.hi)
    assert.equal(long .. "\0b", r.bhi)
    t:delete{ id = 2 }
    t:update{ id = 3, s = null }
    r = a:get("a")
    assert.equal(long .. "b", r.lo)
    assert.equal(long .. "b", r.hi)
  end)

  it("follows random long values beside long group keys, as a recomputation gives them, also from attach", function()
    local dir = H.tmpdir()
    p = runnel.open{ path = dir .. "/st", sync = false }
    local t = p:table("t", { {"id","int"}, {"g","string"}, {"s","string", null = true}, {"b","bytes", null = true},
                             key = "id" })
    local a = t:aggregate{ name = "a", by = "g", lo = runnel.min("s"), hi = runnel.max("s"), blo = runnel.min("b"),
                           bhi = runnel.max("b"), n = runnel.count("s") }
    local rows = {}
    local function expected()
      local exp = {}
      for _, r in pairs(rows) do
        local e = exp[r.g] or { g = r.g, n = 0 }
        exp[r.g] = e
        if r.s then
          e.n = e.n + 1
          e.lo = (not e.lo or r.s < e.lo) and r.s or e.lo
          e.hi = (not e.hi or r.s > e.hi) and r.s or e.hi
        end
        if r.b then
          e.blo = (not e.blo or r.b < e.blo) and r.b or e.blo
          e.bhi = (not e.bhi or r.b > e.bhi) and r.b or e.bhi
        end
      end
      return texts(exp)
    end
    math.randomseed(3)
    local long = string.rep("x", 700)
    local groups = { "a", string.rep("g", 300), string.rep("h", 480) } -- 480: a short room beside the key
    local function value()
      local r = math.random()
      if r < 0.1 then return null end
      if r < 0.3 then return string.rep("x", math.random(0, 20)) end
      return long:sub(1, math.random(470, 700)) .. string.char(math.random(0, 3)) .. (math.random() < 0.5 and "" or "\0z")
    end
    for step = 1, 400 do
      local id = math.random(1, 25)
      if rows[id] and math.random() < 0.4 then
        t:delete{ id = id }
        rows[id] = nil
      else
        local r = { id = id, g = groups[math.random(#groups)], s = value(), b = value() }
        t:upsert(r)
        rows[id] = { g = r.g, s = r.s ~= null and r.s or nil, b = r.b ~= null and r.b or nil }
      end
      assert.same(expected(), texts(rows_of(a)), "after step " .. step)
    end
    p:flush()
    local at = runnel.attach(dir .. "/st", "a")
    local seen = {}
    for r, id in at:rows() do seen[id] = r end
    at:close()
    assert.same(expected(), texts(seen))
  end)

  it("refuses a group key that leaves no room for values, naming the aggregate and the column", function()
    p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"g","string"}, {"s","string"}, key = "id" })
    t:aggregate{ name = "a", by = "g", hi = runnel.max("s") }
    local err = H.error_of(t.insert, t, { id = 1, g = string.rep("g", 500), s = string.rep("s", 40) })
    assert.matches('a: max "hi" of column "s"', err, 1, true)
    assert.is_nil(t:get(1))
  end)
end)
