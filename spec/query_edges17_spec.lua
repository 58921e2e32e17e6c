-- runnel query's grid footer when --limit cut the rows: it says more rows
-- exist, where "(N rows)" read as if the relation held N (lua/runnel/state.lua).
local runnel = require "runnel"
local H = require "helper"

local bin = H.runnel_bin

local function state(dir, n)
  local p = runnel.open{ path = dir, notes = false }
  local t = p:table("t", { {"id","int"}, {"name","string"}, key = "id" })
  p:batch(function() for i = 1, n do t:insert{ id = i, name = "n" .. i } end end)
  p:close()
end

describe("runnel query --limit", function()
  local dir
  before_each(function() dir = H.tmpdir() .. "/st"; state(dir, 4) end)
  after_each(H.cleanup)

  it("says more rows exist when the limit cut them", function()
    local out, err, code = H.sh(("%s query %s t --limit 2"):format(bin, dir))
    -- before: "(2 rows)", as if t held two
    assert.same({ " id | name\n----+------\n  1 | n1\n  2 | n2\n(2 rows shown, more exist)\n", "", 0 },
                { out, err, code })
    out = H.sh(("%s query %s t --limit 1"):format(bin, dir))
    assert.equal(" id | name\n----+------\n  1 | n1\n(1 row shown, more exist)\n", out)
    out = H.sh(("%s query %s t --limit 0"):format(bin, dir))
    assert.equal(" id | name\n----+------\n(0 rows shown, more exist)\n", out)
  end)

  it("counts the rows as before when the limit cut none", function()
    assert.equal(" id | name\n----+------\n  1 | n1\n  2 | n2\n  3 | n3\n  4 | n4\n(4 rows)\n",
                 (H.sh(("%s query %s t --limit 4"):format(bin, dir))))
    assert.equal(" id | name\n----+------\n  1 | n1\n  2 | n2\n  3 | n3\n  4 | n4\n(4 rows)\n",
                 (H.sh(("%s query %s t --limit 9"):format(bin, dir))))
    assert.equal(" id | name\n----+------\n  1 | n1\n  2 | n2\n  3 | n3\n  4 | n4\n(4 rows)\n",
                 (H.sh(("%s query %s t"):format(bin, dir))))
  end)

  it("says so for keys too: the keys found past the limit", function()
    assert.equal(" id | name\n----+------\n  3 | n3\n(1 row shown, more exist)\n",
                 (H.sh(("%s query %s t 3 9 1 --limit 1"):format(bin, dir))))
    assert.equal(" id | name\n----+------\n  3 | n3\n(1 row)\n",
                 (H.sh(("%s query %s t 3 9 --limit 1"):format(bin, dir))))
    assert.equal(" id | name\n----+------\n(0 rows shown, more exist)\n",
                 (H.sh(("%s query %s t 3 --limit 0"):format(bin, dir))))
    assert.equal(" id | name\n----+------\n(0 rows)\n", (H.sh(("%s query %s t 9 --limit 0"):format(bin, dir))))
  end)

  it("leaves ndjson and csv as they were: rows only", function()
    assert.equal("id,name\n1,n1\n", (H.sh(("%s query %s t --limit 1 --format csv"):format(bin, dir))))
    assert.equal('{"id":1,"name":"n1"}\n', (H.sh(("%s query %s t --limit 1 --format ndjson"):format(bin, dir))))
  end)
end)
