-- A selector's key was kept as the selector gave it: 7 and 7.0 were two
-- result keys, so two left rows, one given 7 and one 7.0, made two rows
-- of the join holding one key (rk = 7) in a relation keyed by rk: its
-- sinks (a SQLite or store sink keyed by rk) got two INSERTs of one key.
-- The key is now taken as the result's key columns hold it, so the second
-- row is refused as any selector giving one key to two left rows is.
local runnel = require "runnel"
local H = require "helper"

local function pipeline(selector, keytype)
  local p = runnel.open()
  local r = p:table("r", { {"k","int"}, {"v","string"}, key = "k" })
  local l = p:table("l", { {"id","int"}, {"fk","int", null = true}, key = "id" })
  local j = l:join(r, { on = "fk", kind = "left", selector = selector,
    joiner = function(a, b) return { rk = selector(a.id, a.fk), id = a.id, v = b and b.v } end,
    columns = { {"rk", keytype}, {"id","int"}, {"v","string", null = true}, key = "rk" } })
  local log = H.record(j)
  r:insert{ k = 1, v = "one" }
  return p, l, j, log
end

local function rows_of(j)
  local out = {}
  for row in j:rows() do out[#out + 1] = runnel.format_value(row) end
  return out
end

describe("a selector's key", function()
  after_each(H.cleanup)

  for _, keytype in ipairs{ "int", "float" } do
    it("7 and 7.0 are one key of a " .. keytype .. " key column: two left rows given them are refused", function()
      local p, l, j, log = pipeline(function(lk) return lk == 1 and 7 or 7.0 end, keytype)
      l:insert{ id = 1, fk = 1 }
      local err = H.error_of(l.insert, l, { id = 2, fk = 1 })
      assert.truthy(err:find("l.join: the selector gave result key 7", 1, true), err)
      assert.truthy(err:find("to two left rows (ids 1 and 2)", 1, true), err)
      assert.equal(1, #log)
      assert.equal(1, #rows_of(j))
      -- the other way round, in one group: refused too, nothing kept
      l:delete{ id = 1 }
      assert.equal(3, p:seq())
      H.message_of(function() p:begin(); l:insert{ id = 2, fk = 1 }; l:insert{ id = 1, fk = 1 }; p:commit() end)
      assert.equal(3, p:seq())
      assert.same({}, rows_of(j))
      p:close()
    end)
  end

  it("given as a float for an int key column is the int key: found by it, its id reused", function()
    local p, l, j, log = pipeline(function(lk) return lk * 10 / 1 end, "int")
    l:insert{ id = 1, fk = 1 }
    l:insert{ id = 2, fk = 5 }
    assert.same({ "{id=1, rk=10, v=one}", "{id=2, rk=20}" }, rows_of(j))
    assert.equal(1, j:get(10).id)
    assert.equal(2, j:get(20).id)
    l:update{ id = 1, fk = 5 }
    l:delete{ id = 2 }
    l:insert{ id = 2, fk = 1 }
    assert.same({ "{id=1, rk=10}", "{id=2, rk=20, v=one}" }, rows_of(j))
    assert.same({ "INSERT 1", "INSERT 2", "UPDATE 1", "DELETE 2", "INSERT 2" }, H.verbs(log))
    p:close()
  end)
end)
