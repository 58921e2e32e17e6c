-- rel:distinct(): the distinct rows of a table-like relation, copies counted,
-- one stable id per row (core/distinct.c, DISTINCT-1..3).
local runnel = require "runnel"
local H = require "helper"

-- A row as a string that equal rows share.
local function text(row)
  local names = {}
  for k in pairs(row) do names[#names + 1] = k end
  table.sort(names)
  local parts = {}
  for _, k in ipairs(names) do parts[#parts + 1] = k .. "=" .. tostring(row[k]) end
  return table.concat(parts, ",")
end

-- { [text] = id } of rel's rows, failing on a row seen twice.
local function by_row(rel)
  local out = {}
  for row, id in rel:rows() do
    local t = text(row)
    assert.is_nil(out[t], "a row twice in " .. rel:name() .. ": " .. t)
    out[t] = id
  end
  return out
end

-- The set of distinct rows of rel, recomputed from its rows.
local function recomputed(rel)
  local out = {}
  for row in rel:rows() do out[text(row)] = true end
  return out
end

local function keys(set)
  local out = {}
  for k in pairs(set) do out[#out + 1] = k end
  table.sort(out)
  return out
end

describe("distinct", function()
  local p
  after_each(function() if p then p:close() end p = nil end)
  teardown(H.cleanup)

  it("keeps a row while one copy of it is in the input (DISTINCT-1)", function()
    p = runnel.open()
    local t = p:table("bag", { {"v","int"}, {"s","string"} })
    local d = t:distinct()
    local log = H.record(d)
    t:insert{ v = 1, s = "a" }
    t:insert{ v = 1, s = "a" }
    t:insert{ v = 2, s = "b" }
    assert.same({ "INSERT 1", "INSERT 2" }, H.verbs(log))
    assert.equal(2, d:count())
    t:delete{ v = 1, s = "a" }
    assert.same({ "INSERT 1", "INSERT 2" }, H.verbs(log))
    assert.same({ ["s=a,v=1"] = 1, ["s=b,v=2"] = 2 }, by_row(d))
    t:delete{ v = 1, s = "a" }
    assert.same({ "INSERT 1", "INSERT 2", "DELETE 1" }, H.verbs(log))
    assert.same({ v = 1, s = "a" }, log[3][4])
    assert.same({ ["s=b,v=2"] = 2 }, by_row(d))
  end)

  it("gives a row that comes back a new id, never a reused one (DISTINCT-2)", function()
    p = runnel.open()
    local t = p:table("bag", { {"v","int"} })
    local d = t:distinct()
    t:insert{ v = 1 }
    t:delete{ v = 1 }
    t:insert{ v = 1 }
    assert.same({ ["v=1"] = 2 }, by_row(d))
  end)

  it("turns an update into the old row's removal and the new row's addition (DISTINCT-3)", function()
    p = runnel.open()
    local t = p:table("players", { {"id","int"}, {"team","string"}, key = "id" })
    local teams = t:select{ "team" }
    local d = teams:distinct()
    local log = H.record(d)
    t:insert{ id = 1, team = "red" }
    t:insert{ id = 2, team = "red" }
    t:update{ id = 1, team = "blue" }      -- red keeps a copy: only blue comes in
    t:update{ id = 1, team = "blue" }      -- no change at all
    t:update{ id = 2, team = "green" }     -- red's last copy leaves
    assert.same({ "INSERT 1", "INSERT 2", "DELETE 1", "INSERT 3" }, H.verbs(log))
    assert.same({ ["team=blue"] = 2, ["team=green"] = 3 }, by_row(d))
  end)

  it("is a keyless relation with its input's columns", function()
    p = runnel.open()
    local t = p:table("players", { {"id","int"}, {"team","string", null = true}, key = "id" })
    local s = t:distinct("uniq"):schema()
    assert.equal("distinct", s.kind)
    assert.equal("uniq", s.name)
    assert.is_nil(s.key)
    assert.same({ "id", "team" }, { s.columns[1].name, s.columns[2].name })
  end)

  it("refuses a stream", function()
    p = runnel.open()
    local s = p:stream("clicks", { {"v","int"} })
    assert.equal("clicks.distinct: distinct needs a table-like relation (a table, or a relation derived "
                 .. "from one); clicks is a stream", H.error_of(s.distinct, s))
  end)

  it("agrees with a recomputation over random changes, ids stable while a row stays", function()
    math.randomseed(12)
    p = runnel.open()
    local t = p:table("bag", { {"a","int"}, {"b","string", null = true} })
    local k = p:table("kv", { {"id","int"}, {"a","int"}, key = "id" })
    local ka = k:select{ "a" }
    local d, dk = t:distinct(), ka:distinct()
    local live = {}  -- keyless rows inserted and not yet deleted
    -- What a sink sees, applied: a row enters once and leaves under the id it entered with.
    local function follow(rel)
      local view = {}
      rel:sink(function(verb, row, old, info)
        assert.not_equal("UPDATE", verb)
        if verb == "INSERT" then
          assert.is_nil(view[text(row)], "entered twice: " .. text(row))
          view[text(row)] = info.id
        else
          assert.equal(view[text(old)], info.id)
          view[text(old)] = nil
        end
      end)
      return view
    end
    local view, view_k = follow(d), follow(dk)
    for step = 1, 400 do
      local row = { a = math.random(0, 4), b = math.random() < 0.2 and runnel.null or ("x" .. math.random(0, 2)) }
      local r = math.random()
      if r < 0.5 or #live == 0 then
        t:insert(row)
        live[#live + 1] = row
      else
        local i = math.random(#live)
        t:delete(live[i])
        table.remove(live, i)
      end
      k:upsert{ id = math.random(1, 8), a = math.random(0, 3) }
      local gone = math.random(1, 8)
      if math.random() < 0.2 and k:get(gone) then k:delete{ id = gone } end
      if step % 20 == 0 then
        assert.same(keys(recomputed(t)), keys(by_row(d)))
        assert.same(keys(recomputed(ka)), keys(by_row(dk)))
        assert.same(view, by_row(d))
        assert.same(view_k, by_row(dk))
      end
    end
  end)

  it("rolls back with the group: rows, copies and ids", function()
    p = runnel.open()
    local t = p:table("bag", { {"v","int"} })
    local d = t:distinct()
    t:insert{ v = 1 }
    p:begin()
    t:insert{ v = 1 }
    t:insert{ v = 2 }
    p:rollback()
    assert.same({ ["v=1"] = 1 }, by_row(d))
    t:delete{ v = 1 } -- one copy, so the row leaves
    assert.same({}, by_row(d))
    local ok = pcall(p.batch, p, function() t:insert{ v = 3 }; error("changed my mind") end)
    assert.is_false(ok)
    t:insert{ v = 4 }
    assert.same({ ["v=4"] = 2 }, by_row(d)) -- 3's id was rolled back with it
  end)

  it("is replayed with its group when the group fills the map (GROUP-5): each row once, ids as if not", function()
    p = runnel.open{ map_size = 1024 * 1024 }
    local t = p:table("bag", { {"k","int"}, {"blob","string"} })
    local d = t:distinct()
    local log = H.record(d)
    local blob = ("x"):rep(1000)
    p:begin()
    for k = 1, 3000 do t:insert{ k = k % 1500, blob = blob } end -- ~3 MB into a 1 MiB map
    t:delete{ k = 7, blob = blob }
    p:commit()
    assert.is_true(p:stats().map_size > 1024 * 1024)
    assert.equal(1500, #log)
    assert.equal("INSERT 1500", H.verbs(log)[1500])
    assert.equal(1500, d:count())
    t:delete{ k = 7, blob = blob }
    assert.equal(1499, d:count())
    assert.equal("DELETE 7", H.verbs(log)[1501]) -- k = 1 … 1499 came in first, in order, then 0
  end)

  it("keeps its rows, copies and ids across reopen, and rebuilds a stale state keeping ids", function()
    local dir = H.tmpdir()
    local function open()
      p = runnel.open{ path = dir, sync = false }
      return p:table("bag", { {"v","int"} })
    end
    local t = open()
    local d = t:distinct()
    for _, v in ipairs{ 1, 1, 2, 3 } do t:insert{ v = v } end
    p:close()
    t = open()
    d = t:distinct()
    assert.same({ ["v=1"] = 1, ["v=2"] = 2, ["v=3"] = 3 }, by_row(d))
    t:delete{ v = 1 }
    assert.same({ ["v=1"] = 1, ["v=2"] = 2, ["v=3"] = 3 }, by_row(d)) -- a copy of 1 is left
    p:close()
    t = open() -- the distinct is not declared: its state goes stale
    t:delete{ v = 2 }
    t:insert{ v = 5 }
    t:insert{ v = 3 }
    p:close()
    t = open()
    d = t:distinct()
    assert.same({ ["v=1"] = 1, ["v=3"] = 3, ["v=5"] = 4 }, by_row(d))
    t:delete{ v = 3 }
    assert.same({ ["v=1"] = 1, ["v=3"] = 3, ["v=5"] = 4 }, by_row(d)) -- two copies of 3 were counted
    t:delete{ v = 3 }
    t:insert{ v = 6 }
    assert.same({ ["v=1"] = 1, ["v=5"] = 4, ["v=6"] = 5 }, by_row(d))
  end)

  it("is a kind runnel inspect and runnel verify read (regression: its catalogue entry was called malformed)", function()
    local dir = H.tmpdir()
    p = runnel.open{ path = dir .. "/state" }
    local t = p:table("bag", { {"v","int"} })
    t:distinct()
    t:insert{ v = 1 }
    t:insert{ v = 1 }
    p:close()
    p = nil
    local out, err, code = H.sh(("%s inspect %s/state"):format(H.runnel_bin, dir))
    assert.equal(0, code, err)
    assert.matches("bag.distinct", out, 1, true)
    assert.matches("distinct", out:match("[^\n]*bag%.distinct[^\n]*"), 1, true)
    out, err, code = H.sh(("%s verify %s/state"):format(H.runnel_bin, dir))
    assert.equal(0, code, out .. err)
    assert.matches("0 damaged", out, 1, true)
  end)
end)
