-- With sync = false a group is told committed while LMDB's transaction
-- still carries it. When that transaction cannot be written (a full disk)
-- the carried groups are lost and their seqs are given again: a sink's
-- rollback(seq) hears of each one it saw, newest first (SINKS-2 in
-- core/sink.c). It heard nothing, so a sink mirroring the table kept rows
-- the state had lost and took the next group 1 for a second group 1.
-- The disk is full by the file size limit (bash's ulimit -f, in KiB),
-- which needs no root; the child ignores SIGXFSZ so that writes fail.
local runnel = require "runnel"
local H = require "helper"

describe("a carried group lost to a full disk", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  it("is told to the sinks that saw it, newest first, before its seq is given again", function()
    local state = dir .. "/s"
    local p = runnel.open{ path = state, sync = false }
    p:table("docs", { {"id","int"}, {"body","string"}, key = "id" })
    p:close()
    local size = assert(io.open(state .. "/data.mdb")):seek("end")
    H.write(dir .. "/child.lua", ([[
      local runnel = require "runnel"
      local p = runnel.open{ path = %q, sync = false, carry = { groups = 100000, seconds = 3600 } }
      local docs = p:table("docs", { {"id","int"}, {"body","string"}, key = "id" })
      local mirror, log = {}, {}
      docs:sink{ insert = function(row, info) mirror[row.id] = info.seq end,
                 commit = function(seq) log[#log + 1] = "commit " .. seq end,
                 rollback = function(seq)
                   log[#log + 1] = "rollback " .. seq
                   for id, s in pairs(mirror) do if s == seq then mirror[id] = nil end end
                 end }
      for id = 1, 3 do docs:insert{ id = id, body = string.rep("x", 100000) } end
      local ok, err = pcall(p.flush, p)
      print(ok, (tostring(err):gsub("^.-disk full", "disk full")))
      print(p:seq(), docs:count(), next(mirror) == nil)
      print(table.concat(log, ", "))
    ]]):format(state))
    local limit = math.floor(size / 1024) + 16
    local out, err, code = H.sh(("bash -c \"trap '' XFSZ; ulimit -f %d; exec lua5.4 %s\""):format(limit,
                                                                                                   dir .. "/child.lua"))
    assert.equal("", err)
    assert.equal(0, code)
    local lines = {}
    for line in out:gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.matches("^false\tdisk full or I/O error writing the state at .* %(3 groups not yet flushed to LMDB were lost%)$",
                   lines[1])
    assert.equal("0\t0\ttrue", lines[2])
    assert.equal("commit 1, commit 2, commit 3, rollback 3, rollback 2, rollback 1", lines[3])
  end)
end)
