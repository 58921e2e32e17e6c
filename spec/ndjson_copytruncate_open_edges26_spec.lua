-- Review round 26: logrotate's copytruncate while the sink is open, then a
-- crash after the next group went out (before its mark was recorded).
-- The mark written with that group's transaction holds the position in
-- the file before the cut; the group went to the cut file's start. When
-- the group is at least as long as that position, the next open checks
-- from the old position (inside the group's line), does not find it, and
-- writes it again. 0.37 does the same: not brought by 0.38, which records
-- the file's identity (unchanged by a cut) and not its length.
local H = require "helper"

local ks = H.ndjson_ks
local read = H.text_of

describe("review26: copytruncate while the NDJSON sink is open, then a crash", function()
  local dir, log, state, open
  before_each(function() dir, log, state, open = H.ndjson_case() end)
  after_each(H.cleanup)

  it("does not write the group after the cut twice", function()
    H.run_script(dir .. "/child.lua", ([[
local runnel = require "runnel"
local log = %q
local p = runnel.open{ path = %q }
local s = p:stream("s", { {"k","int"}, {"pad","string"} })
s:sink(runnel.ndjson(log, { verb = false }))
for k = 1, 3 do s:insert{ k = k, pad = "x" } end
os.execute("cp " .. log .. " " .. log .. ".1 && : > " .. log) -- copytruncate between groups
s:insert{ k = 4, pad = string.rep("x", 100) }
os.exit(0, false) -- a crash: group 4's mark is not recorded
]]):format(log, state))
    assert.equal("4", ks(read(log)))
    local p, s = open()
    s:insert{ k = 5, pad = "x" }
    p:close()
    assert.equal("1,2,3", ks(read(log .. ".1")))
    assert.equal("4,5", ks(read(log))) -- before 0.38: "4,4,5"
  end)
end)
