-- runnel.sqlite(path, table) takes a file's path, and knows its file by
-- it (its real path, device and inode: the connection its sinks share,
-- the check that one table has one writer, a file moved while open).
-- SQLite as Debian builds it reads every "file:" name as a URI and
-- ":memory:" as a database in memory: "file:o.db" wrote o.db, which the
-- sink took for another file (a second relation's sink on o.db wrote the
-- same table: the two mixed), and "file:m.db?mode=memory" or ":memory:"
-- wrote each group into memory that was gone at close, while the outbox
-- counted it delivered (round 29). Such a path now names the file it
-- spells, relative to the current directory, as an NDJSON sink's does.
local H = require "helper"

local run_in = H.run_script_in

local DECLARE = [[
local runnel = require "runnel"
local p = runnel.open{ path = "st", notes = false }
local COLS = { {"id","int"}, {"v","int"}, key = "id" }
local t, u = p:table("t", COLS), p:table("u", COLS)
]]

describe("a SQLite sink's path that SQLite would read as a URI or a memory database (round 29)", function()
  after_each(H.cleanup)

  it("file:o.db is the file named so, not o.db: another relation's sink on o.db keeps its own table", function()
    local dir = H.tmpdir()
    run_in(dir, DECLARE .. [[
t:sink(runnel.sqlite("file:o.db", "t"))
u:sink(runnel.sqlite("o.db", "t"))
t:insert{ id = 1, v = 1 }
u:insert{ id = 1, v = 10 }
u:insert{ id = 2, v = 20 }
t:delete{ id = 1 }
t:insert{ id = 3, v = 3 }
p:close()
]])
    assert.equal("3|3\n", H.sql("'" .. dir .. "/file:o.db'", "SELECT id, v FROM t ORDER BY id"))
    assert.equal("1|10\n2|20\n", H.sql(dir .. "/o.db", "SELECT id, v FROM t ORDER BY id"))
  end)

  for _, name in ipairs({ "file:m.db?mode=memory", ":memory:" }) do
    it(("%s is a file: the groups are there after close, each once"):format(name), function()
      local dir = H.tmpdir()
      local script = DECLARE .. ([[
t:sink(runnel.sqlite(%q, "t"))
t:insert{ id = tonumber(arg[1]) or 1, v = 1 }
p:close()
]]):format(name)
      run_in(dir, script)
      run_in(dir, script:gsub("tonumber%(arg%[1%]%) or 1", "2"))
      local db = "'" .. dir .. "/" .. name .. "'"
      assert.equal("1|1\n2|1\n", H.sql(db, "SELECT id, v FROM t ORDER BY id"))
      assert.equal("t|2\n", H.sql(db, "SELECT tbl, seq FROM runnel_sinks"))
    end)
  end
end)
