-- A join whose mapper makes right keys longer than the join's inline part
-- (RN_JOIN_FK_INLINE, 400 bytes: its index files them under their first
-- bytes and a hash) is read from outside its pipeline (runnel.attach,
-- runnel query) as its pipeline reads it: the whole keys are found again
-- among the right rows the join joins with (core/join_scan.c), and a key
-- no right row holds is no match.
local runnel = require "runnel"
local H = require "helper"

local bin = H.runnel_bin
local T = { {"k","int"}, {"g","int"}, key = "k" }
local U = { {"id","string"}, {"name","string"}, key = "id" }

local function long(n, size) return ("%d:"):format(n) .. ("x"):rep(size) end

local function declare(dir, size, through, kind)
  local p = runnel.open{ path = dir, notes = false }
  local t = p:table("t", T)
  local u = p:table("u", U)
  local right = through and u:filter(function() return true end, "uf") or u
  -- k = 5 maps to a key no right row holds
  local j = t:join(right, { mapper = function(r) return long(r.k == 5 and 9 or r.g, size) end, name = "j",
                            kind = kind })
  return p, t, u, j
end

local function by_k(rows)
  local out = {}
  for _, row in ipairs(rows) do out[row.k] = row end
  return out
end

for _, size in ipairs{ 420, 600 } do
  for _, through in ipairs{ false, true } do
    for _, kind in ipairs{ "inner", "left" } do
      local what = ("%s join over %s, keys of %d bytes"):format(kind, through and "a relation it copies" or
                                                                 "a keyed table", #long(0, size))
      describe("reading a mapper " .. what, function()
        after_each(H.cleanup)

        it("gives the rows, a row by key and the count its pipeline gives, attached and queried", function()
          local dir = H.tmpdir()
          local p, t, u, j = declare(dir, size, through, kind)
          for g = 0, 2 do u:insert{ id = long(g, size), name = "n" .. g } end
          for k = 1, 5 do t:insert{ k = k, g = k % 3 } end
          u:delete{ id = long(2, size) } -- k = 2 now matches nothing too
          local want = {}
          for row in j:rows() do want[#want + 1] = row end
          assert.equal(kind == "left" and 5 or 3, #want)
          if kind == "left" then
            assert.same({ k = 5, g = 2 }, j:get{ k = 5 })
            assert.same({ k = 2, g = 2 }, j:get{ k = 2 })
          end
          assert.same({ k = 1, g = 1, id = long(1, size), name = "n1" }, j:get{ k = 1 })

          -- attached while its pipeline is open
          local att = runnel.attach(dir, "j")
          assert.same(by_k(want), by_k(att:rows()))
          att:close()
          p:close()

          att = runnel.attach(dir, "j")
          assert.same(by_k(want), by_k(att:rows()))
          assert.equal(#want, att:count())
          assert.same({ k = 3, g = 0, id = long(0, size), name = "n0" }, att:get{ k = 3 })
          if kind == "left" then assert.same({ k = 5, g = 2 }, att:get{ k = 5 })
          else assert.is_nil(att:get{ k = 5 }) end
          att:close()

          -- from another process
          local out, err, code = H.sh(("%s query %s j --format ndjson"):format(bin, dir))
          assert.same({ "", 0 }, { err, code })
          local lines = 0
          for _ in out:gmatch("\n") do lines = lines + 1 end
          assert.equal(#want, lines)
          assert.truthy(out:find('"k":4,"g":1,"id":"' .. long(1, size) .. '","name":"n1"', 1, true))
          out, err, code = H.sh(("%s query %s j 1 --format csv"):format(bin, dir))
          assert.same({ "k,g,id,name\n1,1," .. long(1, size) .. ",n1\n", "", 0 }, { out, err, code })

          -- the key's right row inserted since: found
          p, t, u, j = declare(dir, size, through, kind)
          u:insert{ id = long(9, size), name = "n9" }
          p:close()
          att = runnel.attach(dir, "j")
          assert.same({ k = 5, g = 2, id = long(9, size), name = "n9" }, att:get{ k = 5 })
          assert.equal(kind == "left" and 5 or 4, att:count())
          att:close()
        end)
      end)
    end
  end
end
