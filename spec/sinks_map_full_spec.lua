-- A plain sink (no rollback hook) sees each change of a committed group
-- once when LMDB's map fills in the sink phase (a store sink's writes):
-- the group runs again after the map grew, and a sink that cannot be told
-- of a rollback resumes after what it took; one with a rollback hook hears
-- of it before it gets the group again (sink.c, SINKS-3; group.c, GROUP-5).
-- Before: the plain sink saw the group twice, with no notice.
local runnel = require "runnel"
local H = require "helper"

local BIG = ("x"):rep(1000)

-- A state with a 1 MiB map, t's sinks added by add(t) first, then a store
-- sink whose writes fill the map in the sink phase of one 300-row group.
local function filled(sync, add)
  local p = runnel.open{ map_size = 1024 * 1024, sync = sync }
  local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
  add(t)
  t:sink(runnel.store("st"))
  local size = p:stats().map_size
  p:begin()
  for k = 1, 300 do t:insert{ k = k, v = BIG } end
  p:commit()
  assert.is_true(p:stats().map_size > size, "the map did not grow: the case proves nothing")
  assert.equal(1, p:seq())
  assert.equal(300, t:count())
  return p, t
end

describe("a sink without a rollback hook, when the map fills in the sink phase", function()
  for _, sync in ipairs{ true, false } do
    it(("sees each change once, numbered 1 to n (sync = %s)"):format(sync), function()
      local ns = {}
      local p = filled(sync, function(t)
        t:sink(function(verb, row, _, info) ns[#ns + 1] = ("%s %d %d %d"):format(verb, row.k, info.seq, info.n) end)
      end)
      assert.equal(300, #ns) -- before: 600, the group twice
      for i = 1, 300 do assert.equal(("INSERT %d 1 %d"):format(i, i), ns[i]) end
      p:close()
    end)

    it(("gets the table form's changes and its commit once, consolidated too (sync = %s)"):format(sync), function()
      local inserts, commits, net = 0, {}, 0
      local p = filled(sync, function(t)
        t:sink{ insert = function() inserts = inserts + 1 end, commit = function(seq) commits[#commits + 1] = seq end }
        t:sink{ consolidate = true, insert = function() net = net + 1 end }
      end)
      assert.equal(300, inserts)
      assert.same({ 1 }, commits)
      assert.equal(300, net)
      p:close()
    end)
  end
end)

describe("a sink with a rollback hook, when the map fills in the sink phase", function()
  it("hears the group rolled back before it gets it again whole", function()
    local events = {}
    local p = filled(true, function(t)
      t:sink{ insert = function(row) if row.k == 1 or row.k == 300 then events[#events + 1] = "INSERT " .. row.k end end,
              commit = function(seq) events[#events + 1] = "commit " .. seq end,
              rollback = function(seq) events[#events + 1] = "rollback " .. seq end }
    end)
    local want, i = {}, 1
    while events[i] == "INSERT 1" and events[i + 1] == "INSERT 300" and events[i + 2] == "rollback 1" do
      want[#want + 1] = "INSERT 1"; want[#want + 1] = "INSERT 300"; want[#want + 1] = "rollback 1"
      i = i + 3
    end
    assert.is_true(#want > 0, "no rollback notice: the map filled elsewhere")
    for _, e in ipairs{ "INSERT 1", "INSERT 300", "commit 1" } do want[#want + 1] = e end
    assert.same(want, events)
    p:close()
  end)
end)
