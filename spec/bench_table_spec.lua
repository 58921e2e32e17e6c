-- bench_table_spec.lua — issue 13's table at the end of make bench
-- (scripts/bench/table.lua): each path is set against the plain-Lua fkjoin
-- of the same run, the mean of its run before the runnel paths and its run
-- after them when both are there, so a machine whose speed drifts during
-- the run leans no ratio one way.
local H = require "spec.helper"

local function table_for(figures)
  local dir = H.tmpdir()
  H.write(dir .. "/figures.txt", figures)
  local out, err, code = H.sh("lua5.4 scripts/bench/table.lua " .. dir .. "/figures.txt")
  assert.equal(0, code, err)
  local rows = {}
  for line in out:gmatch("[^\n]+") do
    local cells = {}
    for cell in (line .. " |"):gmatch("%s*(.-)%s*|") do cells[#cells + 1] = cell end
    rows[cells[1]] = cells
  end
  return rows
end

local DECL = "declarative FK join, state in LMDB, sync = false"
local MAPPER = "Lua mapper + joiner"

describe("make bench's issue 13 table", function()
  after_each(H.cleanup)

  it("sets each path against the mean of the plain-Lua runs before and after the runnel paths", function()
    local rows = table_for("lua.changes_per_s: 100000\nlua2.changes_per_s: 300000\n" ..
                           "decl.changes_per_s: 260000\nmapper.changes_per_s: 150000\n")
    local plain = rows["plain Lua, hash tables (fkjoin_lua.lua): before / after the runnel paths"]
    assert.is_truthy(plain, "no plain-Lua row naming both runs")
    assert.equal("100,000 / 300,000 changes/s", plain[2])
    assert.equal("1.30×", rows[DECL][3])
    assert.equal("yes", rows[DECL][5])
    assert.equal("0.75×", rows[MAPPER][3])
    assert.equal("no", rows[MAPPER][5]) -- 0.75× but under 200,000/s
  end)

  it("uses the one plain-Lua run when the second is missing", function()
    local rows = table_for("lua.changes_per_s: 100000\ndecl.changes_per_s: 120000\n")
    assert.equal("100,000 changes/s", rows["plain Lua, hash tables (fkjoin_lua.lua)"][2])
    assert.equal("1.20×", rows[DECL][3])
    assert.equal("no", rows[DECL][5])
    assert.equal("n/a", rows[MAPPER][3])
  end)

  it("shows the host's control tick beside its ticks, and judges the host's ticks alone", function()
    local host = "host60.ticks: 2000\n" ..
                 "host60.group_ms: p50 0.37 p99 0.45 max 3.10 over_1ms 2\n" ..
                 "host60.ticks_over_1_ms: 0 preempted (under 1 ms of CPU); idle flushes: 2000\n"
    local row = "example host at its default 60 Hz, 2,000 ticks of 100 changes"
    local rows = table_for(host .. "host60.control_ms: p50 0.40 p99 0.71 max 4.07 over_1ms 3\n")
    assert.equal("p50 0.37 p99 0.45 max 3.10 ms; 2 over 1 ms (0 preempted); "
                 .. "control tick of arithmetic alone: p50 0.40 p99 0.71 max 4.07 ms, 3 over 1 ms", rows[row][2])
    assert.equal("no", rows[row][5]) -- the control explains, it does not excuse
    rows = table_for(host) -- a host without the control (an older build): its figures alone
    assert.equal("p50 0.37 p99 0.45 max 3.10 ms; 2 over 1 ms (0 preempted)", rows[row][2])
  end)
end)
