-- An NDJSON sink on a path cuts only an incomplete last line it can show
-- is its own: a waiting group whose lines, from a line start after its
-- mark, run to the end of the file (a crash cut them short). Any other
-- incomplete last line — another program's, a file runnel never wrote,
-- another state's — is kept byte for byte, and the sink refuses to append
-- after it, naming the relation, file:line and bytes (core/ndjson.c, "An
-- incomplete last line"). Before, place_sink cut every incomplete last line.
local runnel = require "runnel"
local H = require "helper"

local read = H.text_of
local function line(verb, k, v) return ('{"verb":"%s","k":%d,"v":"%s"}\n'):format(verb, k, v) end
local function append(path, text)
  local f = assert(io.open(path, "a"))
  f:write(text)
  f:close()
end

describe("an NDJSON sink on a file ending in an incomplete line", function()
  local dir, log
  before_each(function() dir = H.tmpdir(); log = dir .. "/out.ndjson" end)
  after_each(H.cleanup)

  local function table_of(p) return p:table("t", { {"k","int"}, {"v","string"}, key = "k" }) end

  local function refusal(at_line, from, to)
    return ("t: ndjson: %s:%d: the file ends in an incomplete line (bytes %d to %d, no newline) that this state "
            .. "did not write (another program's, or another state's cut short by a crash): it neither cuts "
            .. "another writer's bytes nor appends its lines to that line; end the line with a newline, remove "
            .. "it, or first declare the sink of the state that wrote it"):format(log, at_line, from, to)
  end

  -- A child process on state `name` declares the sink and runs body (an
  -- exit without close is a crash: its last group's mark is not recorded).
  local function child(name, body)
    local script = dir .. "/child.lua"
    H.write(script, ([[
local runnel = require "runnel"
local p = runnel.open(%q)
local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
t:sink(runnel.ndjson(%q))
]]):format(dir .. "/" .. name, log) .. body)
    local _, err, code = H.sh(("%s run %s"):format(H.runnel_bin, script))
    assert.equal("", err)
    assert.equal(0, code)
  end

  it("that runnel never wrote: keeps it, refuses the sink, and takes it once the line is ended", function()
    local mine = '{"id":1}\n{"id":2}\n{"id":3,"note":"half'
    H.write(log, mine)
    local p = runnel.open()
    local t = table_of(p)
    assert.equal(refusal(3, 18, #mine), H.error_of(t.sink, t, runnel.ndjson(log)))
    t:insert{ k = 1, v = "a" }
    assert.equal(mine, read(log)) -- before: '{"id":3,"note":"half' cut, then the line written
    append(log, '"}\n')
    t:sink(runnel.ndjson(log))
    t:insert{ k = 2, v = "b" }
    p:close()
    assert.equal(mine .. '"}\n' .. line("INSERT", 2, "b"), read(log))
  end)

  it("that another program appended while the sink was open: the group waits, p:deliver says why", function()
    local p = runnel.open()
    local t = table_of(p)
    t:sink(runnel.ndjson(log))
    t:insert{ k = 1, v = "a" }
    local other = '{"from":"logger","msg":"par'
    append(log, other) -- a program that takes no flock
    t:insert{ k = 2, v = "b" } -- committed; its line waits
    local text = line("INSERT", 1, "a") .. other
    assert.equal(text, read(log))
    assert.equal(refusal(2, #line("INSERT", 1, "a"), #text), H.error_of(p.deliver, p))
    assert.equal(text, read(log))
    append(log, 'tial"}\n')
    p:deliver()
    p:close()
    assert.equal(text .. 'tial"}\n' .. line("INSERT", 2, "b"), read(log))
  end)

  it("that the state's own crash left: cuts it and writes the group again whole", function()
    child("a", 't:insert{ k = 1, v = "a1" }; t:insert{ k = 2, v = "a2" }; os.exit(0, false)')
    local text = read(log)
    assert.equal(line("INSERT", 1, "a1") .. line("INSERT", 2, "a2"), text)
    H.write(log, text:sub(1, #text - 7)) -- the crash tore a2's line
    local p = runnel.open(dir .. "/a")
    table_of(p):sink(runnel.ndjson(log))
    p:close()
    assert.equal(line("INSERT", 1, "a1") .. line("INSERT", 2, "a2"), read(log))
  end)

  it("that the state's own crash left after another state's lines: cuts it and writes the group whole", function()
    child("a", 't:insert{ k = 1, v = "a1" }; p:close()')
    child("b", 't:insert{ k = 10, v = "b1" }; p:close()')
    child("a", 't:insert{ k = 2, v = "a2" }; t:insert{ k = 3, v = "a3" }; os.exit(0, false)')
    local text = read(log)
    assert.equal(line("INSERT", 1, "a1") .. line("INSERT", 10, "b1") .. line("INSERT", 2, "a2")
                 .. line("INSERT", 3, "a3"), text)
    H.write(log, text:sub(1, #text - 4)) -- a3's line torn; its mark not recorded (a2's rode with a3's group)
    local p = runnel.open(dir .. "/a")
    table_of(p):sink(runnel.ndjson(log)) -- b1 at its position: a3 looked for at the end, found cut short
    p:close()
    assert.equal(text, read(log))
  end)

  it("after the state's waiting group found whole: keeps it and refuses the sink", function()
    child("a", 't:insert{ k = 1, v = "a1" }; t:insert{ k = 2, v = "a2" }; os.exit(0, false)')
    local other = '{"from":"logger"'
    append(log, other)
    local text = read(log)
    local p = runnel.open(dir .. "/a")
    local t = table_of(p)
    assert.equal(refusal(3, #text - #other, #text), H.error_of(t.sink, t, runnel.ndjson(log)))
    p:close()
    assert.equal(text, read(log))
  end)
end)
