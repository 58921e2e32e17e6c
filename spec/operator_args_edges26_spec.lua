-- Bad arguments to the less-used operators (top, index, distinct, and the
-- reads of what they make), and their relations used after close: each
-- error names the relation and points at the caller's line. Round 26.
local runnel = require "runnel"
local H = require "helper"

local HERE = debug.getinfo(1, "S").short_src

-- The message fn raises, and the "file:line: " it must begin with (fn's
-- own line: each call below is written on one line).
local function raised(fn)
  local ok, err = pcall(fn)
  assert(not ok, "expected an error")
  return tostring(err), HERE .. ":" .. debug.getinfo(fn, "S").linedefined .. ": "
end

local function pipeline()
  local p = runnel.open()
  local t = p:table("t", { {"k","int"}, {"g","string"}, {"v","int", null = true}, key = "k" })
  return p, t
end

describe("operator options that are not a table or not a name", function()
  -- Regression: these said "top: …", "index: …", "distinct: …", "range: …"
  -- and "count: …" without the relation they were called on, unlike every
  -- other error of the same methods ("t.top: no column …", "ix: range:
  -- unknown option …").
  it("name the relation the method was called on", function()
    local p, t = pipeline()
    local ix = t:index{ "v", name = "ix" }
    local cases = {
      { function() t:top() end, "t: top: expects an options table, got nil" },
      { function() t:top(3) end, "t: top: expects an options table, got number" },
      { function() t:top{ n = 1, order = { "v" }, bogus = 1 } end,
        "t: top: unknown option bogus (n, by, order, rank, ties, name)" },
      { function() t:top{ n = 1, order = { "v" }, name = 5 } end, "t: top: the name must be a string, got number" },
      { function() t:index("v") end, "t: index: expects a list of columns, got string" },
      { function() t:index{ "v", name = true } end, "t: index: the name must be a string, got boolean" },
      { function() t:distinct(5) end, "t: distinct: the name must be a string, got number" },
      { function() t:select({ "g" }, {}):count() end, "t: select: the name must be a string, got table" },
      { function() t:filter(print, 5) end, "t: filter: the name must be a string, got number" },
      { function() for _ in ix:range(5) do end end, "ix: range: expects { from =, to =, offset =, limit = }, got number" },
      { function() ix:count(5) end, "ix: count: expects { from =, to = }, got number" },
    }
    for i, c in ipairs(cases) do
      local err, at = raised(c[1])
      assert.equal(at .. c[2], err, "case #" .. i)
    end
    p:close()
  end)
end)

describe("id_of of a relation without a key", function()
  -- Regression: d:id_of(…) on a distinct (keyless) said "get needs a
  -- relation with a key", naming a method that was not called.
  it("names id_of", function()
    local p, t = pipeline()
    local d = t:select{ "g" }:distinct("d")
    t:insert{ k = 1, g = "a" }
    assert.equal("d: id_of needs a relation with a key", H.error_of(function() d:id_of{ g = "a" } end))
    assert.equal("d: get needs a relation with a key", H.error_of(function() d:get{ g = "a" } end))
    p:close()
  end)
end)

describe("a top, distinct, aggregate, window or index after its pipeline closed", function()
  -- Regression: every method said "runnel: the pipeline of this relation
  -- is closed", and tostring "runnel.Relation (closed)": with several
  -- relations in a script, which one was used late was not said.
  it("names the relation, in errors and in tostring", function()
    local p, t = pipeline()
    local s = p:stream("s", { {"k","string"}, {"ts","int"} })
    local rels = {
      top = t:top{ n = 2, by = "g", order = { {"v","desc"} }, name = "top" },
      d = t:select{ "g" }:distinct("d"),
      a = t:aggregate{ by = "g", n = runnel.count(), name = "a" },
      w = s:aggregate{ by = "k", window = runnel.tumbling(10, "ts"), n = runnel.count(), name = "w" },
      ix = t:index{ "v", name = "ix" },
    }
    t:insert{ k = 1, g = "a", v = 1 }
    p:close()
    for name, r in pairs(rels) do
      local want = "runnel: " .. name .. ": the pipeline of this relation is closed"
      local err, at = raised(function() local n = r:count() return n end)
      assert.equal(at .. want, err)
      err, at = raised(function() for _ in r:rows() do end end)
      assert.equal(at .. want, err)
      err, at = raised(function() r:sink(print) end)
      assert.equal(at .. want, err)
      err, at = raised(function() r:top{ n = 1, order = { "g" } } end)
      assert.equal(at .. want, err)
      assert.equal("runnel.Relation " .. name .. " (closed)", tostring(r))
    end
  end)

  it("escapes a control byte of the name as the open relation's errors do", function()
    local p = runnel.open()
    local t = p:table("a\nb", { {"k","int"}, key = "k" })
    p:close()
    assert.equal('runnel: a\\nb: the pipeline of this relation is closed', H.error_of(function() t:count() end))
  end)
end)
