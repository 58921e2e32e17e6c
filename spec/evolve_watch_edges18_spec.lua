-- A filter or map declared over a table whose columns moved in this run
-- reads its rows through a watch of the names the table had (lua/
-- lcallback.c, watch_gone), cleared when the call is over. Only the row
-- held the watch: a function that raised an error whose __tostring ran the
-- collector freed the row and its watch before the clearing wrote to it (a
-- heap use-after-free under `make asan`; in a plain build a write into
-- freed memory). The watch is now held until it is cleared.
local runnel = require "runnel"
local H = require "helper"

-- An error object whose message is made after the row is out of reach.
local function collecting_error()
  error(setmetatable({}, { __tostring = function() collectgarbage() collectgarbage() return "boom" end }))
end

local function renamed_state(dir, n)
  local p = runnel.open{ path = dir, notes = false }
  local t = p:table("t", { {"id","int"}, {"v","int"}, key = "id" })
  for i = 1, n do t:insert{ id = i, v = i } end
  return p, t
end

describe("a filter or map told its rows over a table whose columns moved", function()
  after_each(H.cleanup)

  for _, kind in ipairs{ "map", "filter" } do
    it(kind .. " whose function raises an error object that collects: refused, the state whole", function()
      local dir = H.tmpdir() .. "/st"
      local p, t = renamed_state(dir, 20)
      if kind == "map" then
        t:map(function(r) return { id = r.id, w = r.v } end, { {"id","int"}, {"w","int"}, key = "id" }, "d")
      else
        t:filter(function(r) return r.v % 2 == 0 end, "d")
      end
      p:close()
      p = runnel.open{ path = dir, notes = false }
      p:alter("t", { rename = { v = "x" } })
      t = p:table("t", { {"id","int"}, {"x","int"}, key = "id" })
      local calls = 0
      local ok, err
      if kind == "map" then
        ok, err = pcall(t.map, t, function(r)
          calls = calls + 1
          if calls == 3 then collecting_error() end
          return { id = r.id, w = r.x }
        end, { {"id","int"}, {"w","int"}, key = "id" }, "d")
      else
        ok, err = pcall(t.filter, t, function(r)
          calls = calls + 1
          if calls == 3 then collecting_error() end
          return r.x % 2 == 0
        end, "d")
      end
      assert.is_false(ok)
      assert.matches("d: " .. kind .. ": boom", tostring(err), 1, true)
      assert.equal(3, calls)
      collectgarbage()
      assert.equal(20, t:count())
      -- the declaration that failed left the relation as it was: declared again, it is told its rows
      local d = kind == "map" and t:map(function(r) return { id = r.id, w = r.x } end,
                                        { {"id","int"}, {"w","int"}, key = "id" }, "d")
                               or t:filter(function(r) return r.x % 2 == 0 end, "d")
      assert.equal(kind == "map" and 20 or 10, d:count())
      p:close()
    end)
  end
end)
