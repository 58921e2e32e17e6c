-- An NDJSON sink's line format across a crash (core/ndjson.c, "Ownership";
-- OUTBOX-3): a crash before the sink's mark is recorded leaves the last
-- groups' lines in the file, and the reopen finds them there by their
-- bytes. A reopen whose declaration writes lines another way (`verb =
-- false`, another `id` field) compares the file with the format those
-- lines were written in, which the state records with the mark, so no
-- line is written twice.
local runnel = require "runnel"
local H = require "helper"

local read = H.text_of

-- The k of each line, whatever comes before it.
local function ks(text)
  local got = {}
  for l in text:gmatch("[^\n]+") do got[#got + 1] = l:match('"k":(%d+)') or "?" end
  return table.concat(got, ",")
end

describe("an NDJSON sink declared with another line format after a crash", function()
  local dir, log, state
  before_each(function() dir = H.tmpdir(); log = dir .. "/out.ndjson"; state = dir .. "/st" end)
  after_each(H.cleanup)

  -- A child process declares the sink with `opts` (Lua source), runs body,
  -- and exits without close: the mark of its last group is not recorded.
  local function child(opts, body)
    local script = dir .. "/child.lua"
    H.write(script, ([[
local runnel = require "runnel"
local p = runnel.open{ path = %q }
local s = p:stream("s", { {"k","int"}, {"pad","string"} })
s:sink(runnel.ndjson(%q, %s))
]]):format(state, log, opts) .. body .. "\nos.exit(0, false)\n")
    local _, err, code = H.sh(("%s run %s"):format(H.runnel_bin, script))
    assert.equal("", err)
    assert.equal(0, code)
  end

  local function open(opts)
    local p, s = H.ndjson_stream(state, log, opts)
    return p, s
  end

  local three = 'for k = 1, 3 do s:insert{ k = k, pad = "x" } end'

  it("with verb = false does not write the crashed run's last group again", function()
    child("nil", three)
    assert.equal("1,2,3", ks(read(log)))
    local p, s = open{ verb = false }
    assert.equal("1,2,3", ks(read(log)))
    s:insert{ k = 4, pad = "x" }
    p:close()
    local text = read(log)
    assert.equal("1,2,3,4", ks(text))
    assert.truthy(text:find('{"verb":"INSERT","k":3,', 1, true))
    assert.truthy(text:find('\n{"k":4,"pad":"x"}\n$'))
  end)

  it("with another id field does not write the crashed run's last group again", function()
    child('{ verb = false, id = "rid" }', three)
    local p, s = open{ verb = false, id = "eid" }
    s:insert{ k = 4, pad = "x" }
    p:close()
    local text = read(log)
    assert.equal("1,2,3,4", ks(text))
    assert.equal(3, select(2, text:gsub('"rid":', "")))
    assert.equal(1, select(2, text:gsub('"eid":', "")))
  end)

  it("from a format the sink had before the id field to one with it", function()
    child("{ verb = false }", three)
    local p, s = open{ verb = false, id = "eid" }
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("1,2,3,4", ks(read(log)))
  end)

  it("finds the lines of two crashed runs, each in its own format", function()
    child("nil", three)
    -- the second run finds group 3, writes group 4 its way, and crashes before either is marked
    child("{ verb = false }", 's:insert{ k = 4, pad = "x" }')
    assert.equal("1,2,3,4", ks(read(log)))
    local p, s = open{ verb = "op" }
    s:insert{ k = 5, pad = "x" }
    p:close()
    local text = read(log)
    assert.equal("1,2,3,4,5", ks(text))
    assert.truthy(text:find('\n{"k":4,"pad":"x"}\n', 1, true))
    assert.truthy(text:find('\n{"op":"INSERT","k":5,"pad":"x"}\n$'))
  end)

  it("writes a group the crash took before its lines in the new format", function()
    child("nil", three .. "; p:close()")
    -- no crash this time: the next run declares the new format and writes its groups that way
    local p, s = open{ verb = false }
    s:insert{ k = 4, pad = "x" }
    p:close()
    local text = read(log)
    assert.equal("1,2,3,4", ks(text))
    assert.truthy(text:find('\n{"k":4,"pad":"x"}\n$'))
    -- and a crash after it: the record now says the new format
    child("{ verb = false }", 's:insert{ k = 5, pad = "x" }')
    p, s = open{ verb = "op" }
    p:close()
    assert.equal("1,2,3,4,5", ks(read(log)))
  end)
end)
