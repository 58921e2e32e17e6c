-- runnel.attach in one process while a writer in another grows the
-- state's map and commits (round 20): every read sees whole groups, counts
-- never go back, and an iteration kept open across the growth reads the
-- snapshot it began with.
local runnel = require "runnel"
local H = require "helper"

local bin = H.runnel_bin

describe("runnel.attach beside a writer process that grows the map", function()
  after_each(H.cleanup)

  it("reads whole groups, before and after each growth", function()
    local dir = H.tmpdir()
    local ready, stop, done = dir .. ".ready", dir .. ".stop", dir .. ".done"
    local writer = os.tmpname() .. ".lua"
    -- groups of 50 rows of about 1 KiB from a 1 MiB map: it doubles 5 times or more
    H.write(writer, ([[
      local runnel = require "runnel"
      local p = runnel.open{ path = %q, map_size = 1 << 20, notes = false }
      local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
      local big = ("x"):rep(1000)
      t:insert{ k = 0, v = "first" }
      io.open(%q, "w"):close()
      for g = 0, 599 do
        p:batch(function() for i = 1, 50 do t:insert{ k = g * 50 + i, v = big } end end)
        if io.open(%q) then break end
      end
      p:close()
      io.open(%q, "w"):close()
    ]]):format(dir, ready, stop, done))
    local proc = io.popen(("%s run %s 2>&1"):format(bin, writer))
    local deadline = os.time() + 30
    while not io.open(ready) and os.time() < deadline do os.execute("sleep 0.02") end
    local att = runnel.attach(dir, "t")
    local last, reads = 1, 0
    local kept, state = att:rows() -- an iteration held across the growth
    local first = kept(state)
    while not io.open(done) and os.time() < deadline do
      local n = att:count()
      assert((n - 1) % 50 == 0, ("a count of %d rows is not whole groups"):format(n))
      assert(n >= last, ("the count went back from %d to %d"):format(last, n))
      last = n
      if n > 1 then
        local row = att:get(n - 1)
        assert(row and #row.v == 1000, "the last group's last row is missing")
      end
      reads = reads + 1
      if reads >= 200 and last > 10000 then io.open(stop, "w"):close() end -- 10 MB: the map grew 4 times
    end
    io.open(stop, "w"):close()
    local said = proc:read("a")
    proc:close()
    local seen = first and 1 or 0
    for _ in kept, state do seen = seen + 1 end
    local final = att:count()
    local iterated = 0
    for _ in att:rows() do iterated = iterated + 1 end
    att:close()
    local f = assert(io.open(dir .. "/data.mdb"))
    local file_size = f:seek("end")
    f:close()
    os.remove(writer)
    os.remove(ready)
    os.remove(stop)
    os.remove(done)
    assert.are.equal("", said)
    assert.is_true(reads > 0)
    assert.is_true((seen - 1) % 50 == 0 and seen <= final, ("the kept iteration read %d rows"):format(seen))
    assert.are.equal(final, iterated)
    assert.is_true(final > 1 and (final - 1) % 50 == 0)
    assert.is_true(file_size > 1 << 23, "the writer did not grow the map: " .. file_size)
  end)
end)
