-- NDJSON lines that name their change (runnel.ndjson(path, { id = "field" })):
-- "<state id>:<seq>:<n>" after the verb. Back from a crash, a path sink
-- checks its waiting groups against the file's tail (ndjson.c,
-- "Ownership"); by content alone, lines another writer appended that read
-- like a waiting group's are taken for it and the group is never written.
-- With the id, only this state's own lines match.
local runnel = require "runnel"
local H = require "helper"

local CHILD = [[
local runnel = require "runnel"
local p = runnel.open(%q)
local t = p:table("t", { {"k","int"}, key = "k" })
local function killer() -- the process dies delivering group 2
  t:sink{ durable = true, name = "kill", insert = function(row) if row.k == 2 then os.exit(3) end end }
end
if %q == "before" then killer() end -- dies before the NDJSON sink writes group 2
t:sink(runnel.ndjson(%q, %s))
if %q == "after" then killer() end  -- dies after it wrote group 2, before its mark is recorded
t:insert{ k = 1 }
t:insert{ k = 2 }
]]

describe("an NDJSON path sink back from a crash", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  local function crash(mode, opts)
    local script = dir .. "/child.lua"
    local f = assert(io.open(script, "w"))
    f:write(CHILD:format(dir .. "/s", mode, dir .. "/out.ndjson", opts, mode))
    f:close()
    local ok, how, code = os.execute("lua5.4 " .. script .. " 2>/dev/null")
    assert.same({ nil, "exit", 3 }, { ok, how, code })
  end

  local function append(line)
    local f = assert(io.open(dir .. "/out.ndjson", "a"))
    f:write(line, "\n")
    f:close()
  end

  local function reopen(opts)
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:sink(runnel.ndjson(dir .. "/out.ndjson", opts))
    return p, t
  end

  local function lines()
    local out = {}
    for l in (H.read(dir .. "/out.ndjson") or ""):gmatch("[^\n]+") do out[#out + 1] = l end
    return out
  end

  it("with id, writes a waiting group after another writer's line that reads like it", function()
    crash("before", '{ id = "_id" }')
    append('{"verb":"INSERT","_id":"another:2:1","k":2}')
    local p = reopen{ id = "_id" }
    local got = lines()
    assert.equal(3, #got)
    local sid = got[1]:match('^{"verb":"INSERT","_id":"(%x+):1:1","k":1}$')
    assert.is_truthy(sid)
    assert.equal(32, #sid)
    assert.equal('{"verb":"INSERT","_id":"another:2:1","k":2}', got[2])
    assert.equal(('{"verb":"INSERT","_id":"%s:2:1","k":2}'):format(sid), got[3])
    p:close()
  end)

  it("with id, still finds its own group written before the crash and writes it once", function()
    crash("after", '{ id = "_id" }')
    local p, t = reopen{ id = "_id" }
    t:insert{ k = 3 }
    p:close()
    local got = lines()
    assert.equal(3, #got)
    local sid = got[1]:match('"_id":"(%x+):1:1"')
    for i, l in ipairs(got) do
      assert.equal(('{"verb":"INSERT","_id":"%s:%d:1","k":%d}'):format(sid, i, i), l)
    end
  end)

  it("without id, takes another writer's identical line for the waiting group (content decides)", function()
    crash("before", "nil")
    append('{"verb":"INSERT","k":2}') -- another writer's line, byte for byte group 2's
    local p = reopen()
    assert.same({ '{"verb":"INSERT","k":1}', '{"verb":"INSERT","k":2}' }, lines())
    p:close()
  end)

  it("refuses an id field named like a column or like the verb field", function()
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", { {"k","int"}, key = "k" })
    assert.matches('t: the id field "k" is also a column of t', H.error_of(t.sink, t, runnel.ndjson(dir .. "/o", { id = "k" })),
                   1, true)
    assert.matches('t: the id field "verb" is also the verb field',
                   H.error_of(t.sink, t, runnel.ndjson(dir .. "/o", { id = "verb" })), 1, true)
    assert.matches("ndjson: id must be a field name", H.error_of(runnel.ndjson, dir .. "/o", { id = 1 }), 1, true)
    p:close()
  end)
end)
