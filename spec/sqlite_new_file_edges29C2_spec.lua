-- A durable SQLite sink is known in the state's outbox by its file's real
-- path and its table. The name was made before the file was opened: a
-- declaration that made the file named the sink by the path as given
-- ("out.db"), every later one by the real path ("/dir/out.db"): two sinks
-- to the state. The groups still waiting under the first name at close
-- never reached the table: a stream's log lost those events for good
-- (listed only in p:stats().outbox_undeclared), and a table's mirror was
-- written whole again (round 29). The sink is now named once its file is
-- there.
local runnel = require "runnel"
local H = require "helper"

local run_in = H.run_script_in

local SESSION = [[
local runnel = require "runnel"
local p = runnel.open{ path = "st", notes = false }
local s = p:stream("s", { {"x","int"} })
local t = p:table("t", { {"id","int"}, {"v","int"}, key = "id" })
s:sink(runnel.sqlite("out.db", "s"))
t:sink(runnel.sqlite("out.db", "t"))
local function sh(sql) assert(os.execute("sqlite3 out.db '" .. sql .. "'")) end
]]

describe("a SQLite sink whose declaration makes its file (round 29)", function()
  after_each(H.cleanup)

  it("delivers the groups left waiting at close to the next session: none lost, none twice", function()
    local dir = H.tmpdir()
    run_in(dir, SESSION .. [[
s:insert{ x = 1 }
t:insert{ id = 1, v = 1 }
sh("CREATE TRIGGER hold BEFORE INSERT ON s BEGIN SELECT RAISE(ABORT, \"held\"); END")
p:batch(function() s:insert{ x = 2 }; t:insert{ id = 2, v = 2 } end)
assert(not pcall(p.deliver, p))
p:close()
]])
    local db = dir .. "/out.db"
    assert.equal("1|1\n", H.sql(db, "SELECT runnel_id, x FROM s"))
    local out = run_in(dir, SESSION .. [[
sh("DROP TRIGGER hold")
s:insert{ x = 3 }
t:update{ id = 1, v = 10 }
p:deliver()
local n = 0
for _ in pairs(p:stats().outbox_undeclared or {}) do n = n + 1 end
print(n)
p:close()
]])
    assert.equal("0\n", out) -- no sink left behind under another name
    assert.equal("1|1\n2|2\n3|3\n", H.sql(db, "SELECT runnel_id, x FROM s ORDER BY runnel_id"))
    assert.equal("1|10\n2|2\n", H.sql(db, "SELECT id, v FROM t ORDER BY id"))
    assert.equal("s|4\nt|5\n", H.sql(db, "SELECT tbl, seq FROM runnel_sinks ORDER BY tbl"))
  end)
end)
