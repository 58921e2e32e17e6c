-- An NDJSON sink's file cut shorter by logrotate's copytruncate (core/
-- ndjson.c: offsets are the file's own): the sink goes on at the file's new
-- end, never pads it with zeros, never cuts it further.
local runnel = require "runnel"
local H = require "helper"

local read = H.text_of

local ks = H.ndjson_ks

local function range(a, b)
  local v = {}
  for k = a, b do v[#v + 1] = tostring(k) end
  return table.concat(v, ",")
end

describe("an NDJSON sink whose file copytruncate cut", function()
  local dir, log, state
  before_each(function() dir = H.tmpdir(); log = dir .. "/out.ndjson"; state = dir .. "/st" end)
  after_each(H.cleanup)

  local function open()
    local p, s = H.ndjson_stream(state, log, { verb = false })
    return p, s
  end

  it("while the state was closed goes on at the new end", function()
    local p, s = open()
    for k = 1, 3 do s:insert{ k = k, pad = "x" } end
    p:close()
    H.write(log, "") -- copytruncate: copied away, cut to nothing
    p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("4", ks(read(log)))
  end)

  it("between groups, then a write failing half way, leaves no zeros and no torn line", function()
    local script = dir .. "/rotate.lua"
    H.write(script, ([[
local runnel = require "runnel"
local p = runnel.open{ path = %q }
local s = p:stream("s", { {"k","int"}, {"pad","string"} })
s:sink(runnel.ndjson(%q, { verb = false }))
local pad = string.rep("\1", 2000) -- 12 kB a line ("\u0001"), 2 kB in the state
for k = 1, 8 do s:insert{ k = k, pad = pad } end -- 96 kB
io.open(%q, "w"):close() -- copytruncate, between groups
for k = 31, 33 do s:insert{ k = k, pad = pad } end -- 36 kB from 0
p:begin()
for k = 41, 46 do s:insert{ k = k, pad = pad } end -- 72 kB more: past the 100 kB limit
p:commit()
local ok, err = pcall(p.deliver, p)
assert(not ok and err:find(": writing: File too large", 1, true), tostring(err))
p:close()
]]):format(state, log, log))
    local _, err, code = H.sh(("sh -c \"trap '' XFSZ; ulimit -f 200; exec lua5.4 %s\""):format(script))
    assert.equal("", err)
    assert.equal(0, code)
    local text = read(log)
    assert.is_nil(text:find("\0", 1, true)) -- a cut back to the length before copytruncate would pad
    assert.equal(range(31, 33), ks(text)) -- before: the failed group's first lines stayed (cut back to a stale length)
    local p = open() -- no limit now: the waiting group goes out, once
    p:close()
    text = read(log)
    assert.is_nil(text:find("\0", 1, true))
    assert.equal(range(31, 33) .. "," .. range(41, 46), ks(text))
  end)
end)
