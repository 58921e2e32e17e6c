-- rel:top{} at its edges (adversarial review): n of 1 and past every row,
-- descending floats with -0, infinities and nulls, strings holding NUL
-- bytes, bool groups with nulls, rollbacks in the middle of groups; and the
-- refusal of a row whose group values are too long for a key, naming its column.
local runnel = require "runnel"
local H = require "helper"

local null = runnel.null
local function isnull(v) return v == nil or v == null end

-- -1, 0 or 1: null after every value, in either direction.
local function cmp(a, b, desc)
  if isnull(a) or isnull(b) then return (isnull(a) and 1 or 0) - (isnull(b) and 1 or 0) end
  if a == b then return 0 end
  local less = a < b
  if desc then less = not less end
  return less and -1 or 1
end

local function text(r)
  local g = r.g
  if g == null then g = nil end
  return ("%s|%s|%s|%s|%s"):format(r.id, tostring(g), tostring(r.f), tostring(r.s), tostring(r.rank))
end

describe("top edges", function()
  teardown(H.cleanup)

  for _, n in ipairs{ 1, 2, math.maxinteger } do
    it(("keeps a top of n = %d equal to sorting, through rollbacks, with its changes replayable"):format(n), function()
      local p = runnel.open{ sync = false }
      local t = p:table("t", { {"id","int"}, {"g","bool", null = true}, {"f","float", null = true},
                               {"s","string", null = true}, key = "id" })
      local top = t:top{ n = n, by = "g", order = { {"f","desc"}, {"s","asc"} } }
      local copy, model = {}, {}
      top:sink(function(verb, row, old)
        local id = (row or old).id
        if verb == "INSERT" then assert.is_nil(copy[id]); copy[id] = text(row)
        elseif verb == "DELETE" then assert.equal(copy[id], text(old)); copy[id] = nil
        else assert.equal(copy[id], text(old)); assert.are_not.equal(text(old), text(row)); copy[id] = text(row) end
      end)
      local function expected()
        local groups, out = {}, {}
        for _, r in pairs(model) do
          local g = tostring(r.g)
          groups[g] = groups[g] or {}
          table.insert(groups[g], r)
        end
        for _, rows in pairs(groups) do
          table.sort(rows, function(x, y)
            local c = cmp(x.f, y.f, true)
            if c ~= 0 then return c < 0 end
            c = cmp(x.s, y.s, false)
            if c ~= 0 then return c < 0 end
            return t:id_of(x.id) < t:id_of(y.id)   -- row ids: a rolled-back insert's id is used again
          end)
          for i = 1, math.min(n, #rows) do
            local r = rows[i]
            out[r.id] = text{ id = r.id, g = r.g, f = not isnull(r.f) and r.f or nil, s = not isnull(r.s) and r.s or nil, rank = i }
          end
        end
        return out
      end
      local fs = { -0.0, 0.0, 1.5, -1.5, 1e300, -math.huge, math.huge, null, 2.0 }
      local ss = { "a", "a\0", "ab", "", "a\0b", null }
      local gs = { true, false, null }
      local seed = 20261201 + (n % 1000)
      local function random(k) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % k + 1 end
      local function row(id) return { id = id, g = gs[random(#gs)], f = fs[random(#fs)], s = ss[random(#ss)] } end
      local ids = 0
      for _ = 1, 300 do
        local staged, saved = {}, {}
        for k, v in pairs(model) do staged[k] = v end
        for k, v in pairs(copy) do saved[k] = v end
        p:begin()
        for _ = 1, random(5) do
          local live = {}
          for id in pairs(staged) do live[#live + 1] = id end
          table.sort(live)
          local op = random(10)
          if op <= 3 or #live < 3 then
            ids = ids + 1
            local r = row(ids)
            t:insert(r)
            staged[ids] = r
          elseif op <= 8 then
            local id = live[random(#live)]
            local r = row(id)
            if random(2) == 1 then r.g = staged[id].g end
            t:update(r)
            staged[id] = r
          else
            local id = live[random(#live)]
            t:delete{ id = id }
            staged[id] = nil
          end
        end
        if random(6) == 1 then p:rollback(); copy = saved else p:commit(); model = staged end
        local want, got = expected(), {}
        for r in top:rows() do got[r.id] = text(r) end
        assert.same(want, got)
        assert.same(want, copy)
      end
      p:close()
    end)
  end

  it("keeps a row whose group values are longer than a key, in a group (top_longgroup_spec)", function()
    local p = runnel.open()
    local t = p:table("long", { {"id","int"}, {"team","string"}, {"name","string"}, key = "id" })
    local top = t:top{ n = 1, by = "team", order = { "name" } }
    t:insert{ id = 1, team = "a", name = "short" }
    p:begin()
    t:insert{ id = 2, team = "b", name = "fine" }
    t:insert{ id = 3, team = ("x"):rep(600), name = "a" }
    p:commit()
    assert.equal(3, t:count())
    assert.equal(3, top:count())
    p:close()
  end)
end)
