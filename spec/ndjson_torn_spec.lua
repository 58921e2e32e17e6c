-- An NDJSON sink on an open file whose write stops partway through a group
-- (OUTBOX-6 in core/outbox.c; core/ndjson.c, "An open file"): the groups
-- written whole before the failure stay delivered; the group cut short is
-- never written twice, nor left torn. A regular file is cut back to the
-- group's start and the retry writes it whole (a pipe's reader gets the
-- rest of the group first: spec/c/test_ndjson_torn.c).
local H = require "helper"

describe("an NDJSON sink on an open file whose write stops inside a group", function()
  after_each(H.cleanup)

  it("cuts the group's partial lines away; the retry writes it whole, once", function()
    local dir = H.tmpdir()
    local log, script = dir .. "/out.ndjson", dir .. "/run.lua"
    H.write(script, ([[
local runnel = require "runnel"
local p = runnel.open()
local s = p:stream("s", { {"k","int"}, {"pad","string"} })
local f = assert(io.open(%q, "a"))
s:sink(runnel.ndjson(f, { verb = false }))
s:insert{ k = 1, pad = string.rep("a", 60000) } -- written whole
p:begin()                                         -- 60 kB more: the file may not pass 100 kB
for k = 2, 4 do s:insert{ k = k, pad = string.rep("b", 20000) } end
p:commit()                                        -- committed; its delivery failed partway (k = 4)
assert(not pcall(p.deliver, p))                   -- and fails again
local before = assert(io.open(%q)):read("a")
io.write(before)
io.open(%q, "w"):close()                          -- room again (f appends: at the new end)
p:deliver()
p:close()
f:close()
io.write(assert(io.open(%q)):read("a"))
]]):format(log, log, log, log))
    -- the file may not grow past 102,400 bytes (ulimit -f counts 512-byte blocks in sh); nor may the
    -- script's stdout, which goes through cat
    local out, err, code = H.sh(("sh -c \"(trap '' XFSZ; ulimit -f 200; exec lua5.4 %s) | cat\""):format(script))
    assert.equal("", err)
    assert.equal(0, code)
    local ks = {}
    for l in out:gmatch("[^\n]*\n?") do
      if l ~= "" then ks[#ks + 1] = l:match('^{"k":(%d+),"pad":"%a+"}\n$') or "torn" end
    end
    -- before: { "1", "2", "3", "torn", "2", "3", "4" }: group 2's first lines twice, a torn line
    assert.same({ "1", "2", "3", "4" }, ks)
  end)
end)
