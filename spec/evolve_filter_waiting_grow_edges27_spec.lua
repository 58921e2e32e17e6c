-- Review 27 probes: a filter's waiting told rows given in its columns now
-- in the transaction that replaces its entry (open_source_state), whose
-- map fills: tried again after growing it.
local runnel = require "runnel"
local H = require "helper"

local MAP = 1024 * 1024

describe("a filter's waiting rows given in new columns when the map fills", function()
  after_each(H.cleanup)

  local function run(moved_cols, expect_note)
    local dir, notes = H.tmpdir(), {}
    local told = { DELETE = 0, INSERT = 0, UPDATE = 0 }
    local bad = {}
    local function open() return runnel.open{ path = dir, map_size = MAP, notes = function(l) notes[#notes + 1] = l end } end
    local function declare(p, limit, cols)
      local t = p:table("t", cols)
      local f = t:filter(function(r) return r.k > limit end, "f")
      f:sink(function(verb, row, old, info)
        told[verb] = told[verb] + 1
        local r = row or old
        if r.s ~= string.rep("x", 100) .. r.k then bad[#bad + 1] = verb .. " " .. info.id .. " " .. tostring(r.s) end
      end)
      return t, f
    end
    local BASE = { {"k","int"}, {"s","string"}, {"v","int"}, key = "k" }
    local p = open()
    local t = declare(p, 0, BASE)
    local pad = string.rep("x", 100)
    for b = 0, 7 do
      p:batch(function() for k = b * 1000 + 1, b * 1000 + 1000 do t:insert{ k = k, s = pad .. k, v = k } end end)
    end
    p:close()
    p = open()
    declare(p, 8000, BASE) -- every row waits to leave f
    p:close()
    told.DELETE, told.INSERT = 0, 0
    H.clear(notes)
    p = open()
    local f
    t, f = declare(p, 8000, moved_cols)
    p:batch(function() t:insert{ k = 9000, s = pad .. 9000, v = 1 } end)
    p:close()
    return told, bad, notes
  end

  it("tells every waiting row once, by name", function()
    local told, bad, notes = run({ {"k","int"}, {"v","int"}, {"s","string"}, key = "k" })
    assert.same({}, bad)
    assert.same({ DELETE = 8000, INSERT = 1, UPDATE = 0 }, told, table.concat(notes, "\n"))
  end)
end)
