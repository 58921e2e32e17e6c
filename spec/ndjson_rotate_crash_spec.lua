-- An NDJSON sink's file cut by logrotate's copytruncate while the state was
-- open, then a crash (core/ndjson.c, "Ownership"): the recorded position is
-- past the cut file's end, so the waiting groups are looked for in what the
-- file holds now, and each goes out exactly once.
local runnel = require "runnel"
local H = require "helper"

local read = H.text_of

local ks = H.ndjson_ks

describe("an NDJSON sink whose file copytruncate cut while the state was open, then a crash", function()
  local dir, log, state, open
  before_each(function() dir, log, state, open = H.ndjson_case() end)
  after_each(H.cleanup)

  -- A child process writes to the sink, runs body, and exits without close.
  local function child(body, sync)
    local script = dir .. "/child.lua"
    H.write(script, ([[
local runnel = require "runnel"
local p = runnel.open{ path = %q, sync = %s }
local s = p:stream("s", { {"k","int"}, {"pad","string"} })
s:sink(runnel.ndjson(%q, { verb = false }))
local function cut() io.open(%q, "w"):close() end -- copytruncate
]]):format(state, tostring(sync ~= false), log, log) .. body .. "\nos.exit(0, false)\n")
    local _, err, code = H.sh(("%s run %s"):format(H.runnel_bin, script))
    assert.equal("", err)
    assert.equal(0, code)
  end

  it("writes the group written after the cut once", function()
    child('for k = 1, 3 do s:insert{ k = k, pad = "x" } end; cut(); s:insert{ k = 4, pad = "x" }')
    assert.equal("4", ks(read(log)))
    local p, s = open()
    s:insert{ k = 5, pad = "x" }
    p:close()
    assert.equal("4,5", ks(read(log)))
  end)

  it("with sync = false finds the groups written after the cut, and writes those never written", function()
    -- 1..3 marked (flush), 4 written before the cut (in the rotated copy), 5 and 6 after it, 7 carried: lost
    child('for k = 1, 3 do s:insert{ k = k, pad = "x" } end; p:flush(); s:insert{ k = 4, pad = "x" }; p:flush(); '
          .. 'cut(); s:insert{ k = 5, pad = "x" }; s:insert{ k = 6, pad = "x" }; p:flush(); s:insert{ k = 7, pad = "x" }',
          false)
    assert.equal("5,6", ks(read(log)))
    local p, s = open(false)
    s:insert{ k = 8, pad = "x" }
    p:close()
    assert.equal("5,6,8", ks(read(log)))
  end)

  it("writes whole a group the crash cut short after the cut", function()
    child('for k = 1, 3 do s:insert{ k = k, pad = "x" } end; cut(); p:begin(); '
          .. 'for k = 4, 6 do s:insert{ k = k, pad = "x" } end; p:commit()')
    local text = read(log)
    local second = text:find("\n") -- the crash kept the group's first line only
    H.write(log, text:sub(1, second))
    assert.equal("4", ks(read(log)))
    local p = open()
    p:close()
    assert.equal("4,5,6", ks(read(log)))
  end)
end)
