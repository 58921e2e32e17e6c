-- A join's messages about a result key wrote its float parts as msgpack-c
-- prints them, with %f: 1e-07 came out as 0.000000 (the key 0 to the
-- reader), 1e300 as 301 digits, and 0.1 and 0.1000001 both as 0.100000.
-- They are written as other key messages write them (key_text_edges29):
-- the shortest text that reads back as the value, a float keeping ".0".
local runnel = require "runnel"
local H = require "helper"

local function refused(key)
  local p = runnel.open()
  local r = p:table("r", { {"k","int"}, key = "k" })
  local l = p:table("l", { {"id","int"}, {"fk","int", null = true}, key = "id" })
  l:join(r, { on = "fk", kind = "left", selector = function() return key end,
              joiner = function(a) return { rk = key, id = a.id } end,
              columns = { {"rk","float"}, {"id","int"}, key = "rk" } })
  l:insert{ id = 1, fk = 1 }
  local err = H.error_of(l.insert, l, { id = 2, fk = 1 })
  p:close()
  return err
end

describe("a join's message naming a float result key", function()
  after_each(H.cleanup)

  it("writes it so that it reads back as the key", function()
    for _, c in ipairs{ { 1e-7, "1e-07" }, { 0.1, "0.1" }, { 1e300, "1e+300" }, { 7.0, "7.0" }, { -2.5, "-2.5" } } do
      local err = refused(c[1])
      assert.truthy(err:find("the selector gave result key " .. c[2] .. " to two left rows (ids 1 and 2)", 1, true), err)
    end
  end)
end)
