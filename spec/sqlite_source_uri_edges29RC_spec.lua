-- runnel.sqlite(path, table) reads "file:o.db" and ":memory:" as the files
-- they spell (round 29, sqlite_uri_edges29C2_spec.lua), but
-- runnel.sqlite_source(path, table) still gave the path to SQLite, which
-- reads "file:" names as URIs and ":memory:" as a database in memory: a
-- lookup on the file a sink of the pipeline writes, named by the same
-- path, read o.db (or an empty memory database) and failed, or found
-- another file's rows (round 29 review). Both now read one file.
local H = require "helper"

local bin = H.runnel_bin:sub(1, 1) == "/" and H.runnel_bin or H.root .. "/" .. H.runnel_bin

-- Runs script in dir (its current directory) with runnel run: its stdout.
local function run_in(dir, script)
  H.write(dir .. "/s.lua", script)
  local out, err, code = H.sh(("cd '%s' && '%s' run s.lua"):format(dir, bin))
  assert(err == "" and code == 0, ("exit %s: %s"):format(tostring(code), err))
  return out
end

describe("runnel.sqlite_source on a path SQLite would read as a URI or a memory database (round 29)", function()
  after_each(H.cleanup)

  for _, name in ipairs({ "file:o.db", ":memory:" }) do
    it(("%s is the file a sink named so writes, not another one"):format(name), function()
      local dir = H.tmpdir()
      local out = run_in(dir, ([[
local runnel = require "runnel"
local p = runnel.open{ path = "st", notes = false }
local prices = p:table("prices", { {"sku","string"}, {"price","int"}, key = "sku" })
prices:sink(runnel.sqlite(%q, "prices"))
prices:insert{ sku = "a", price = 7 }
p:deliver()
local orders = p:stream("orders", { {"sku","string"} })
local look = p:lookup("look", { {"sku","string"}, {"price","int"}, key = "sku",
  source = runnel.sqlite_source(%q, "prices") })
orders:join(look, { on = "sku", kind = "left" }):sink(function(verb, row) print(verb, row.sku, row.price) end)
orders:insert{ sku = "a" }
p:close()
]]):format(name, name))
      assert.equal("INSERT\ta\t7\n", out)
    end)
  end
end)
