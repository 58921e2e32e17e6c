-- A regrow of the open group with carried groups (sync = false): keep_carried
-- writes the "ch:" records with the carried groups' seq, from emitted counts
-- that already hold the open group's changes; reapply restores them, so the
-- open group's commit finds nothing new and writes no "ch:" record of its own.
local runnel = require "runnel"
local H = require "helper"

describe("a regrow with carried groups", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  local function session(opts, sink, body)
    local lines = {}
    opts.path = dir .. "/s"
    opts.notes = function(line) lines[#lines + 1] = line end
    local p = runnel.open(opts)
    local t = p:table("t", { {"k","string"}, {"pad","string"}, key = "k" })
    local u = p:table("u", { {"k","int"}, key = "k" })
    local got = {}
    if sink then t:sink(function(_, row, _, info) got[#got + 1] = info.seq end, { durable = true, name = "d" }) end
    if body then body(p, t, u) end
    p:close()
    local out = {}
    for _, l in ipairs(lines) do if l:find("durable sink", 1, true) then out[#out + 1] = l end end
    return out
  end

  for _, wb in ipairs{ false, true } do
    it("records the open group's change of t (write_back = " .. tostring(wb) .. ")", function()
      session({}, true, function(_, t) t:insert{ k = "a", pad = "x" } end)   -- group 1, seen by d
      local ms
      session({ sync = false, map_size = 1 << 16, write_back = wb }, false, function(p, t, u)
        u:insert{ k = 1 }                                                     -- group 2: u only, carried
        p:begin()                                                             -- group 3: t, then the map grows (u)
        t:insert{ k = "b", pad = "y" }
        for i = 2, 3000 do u:upsert{ k = i } end
        p:commit()
        ms = p:stats().map_size
      end)
      assert.is_true(ms > 1 << 16)
      local notes = session({}, true)
      assert.equal(1, #notes)
      assert.matches("missed the changes of t in groups 2 to 3:", notes[1], 1, true)
    end)
  end

  it("control: no regrow", function()
    session({}, true, function(_, t) t:insert{ k = "a", pad = "x" } end)
    session({ sync = false, map_size = 1 << 26 }, false, function(p, t, u)
      u:insert{ k = 1 }
      p:begin()
      t:insert{ k = "b", pad = "y" }
      for i = 2, 3000 do u:upsert{ k = i } end
      p:commit()
    end)
    local notes = session({}, true)
    assert.equal(1, #notes)
    assert.matches("missed the changes of t in groups 2 to 3:", notes[1], 1, true)
  end)
end)

describe("a regrow at commit (write_back, the map fills flushing)", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  local function session(opts, sink, body)
    local lines = {}
    opts.path = dir .. "/s"
    opts.notes = function(line) lines[#lines + 1] = line end
    local p = runnel.open(opts)
    local t = p:table("t", { {"k","string"}, {"pad","string"}, key = "k" })
    if sink then t:sink(function() end, { durable = true, name = "d" }) end
    local st
    if body then body(p, t); st = p:stats() end
    p:close()
    local out = {}
    for _, l in ipairs(lines) do if l:find("durable sink", 1, true) then out[#out + 1] = l end end
    return out, st
  end

  for _, sync in ipairs{ true, false } do
    it("writes the group's change record of t (sync = " .. tostring(sync) .. ")", function()
      session({}, true, function(_, t) t:insert{ k = "a", pad = "x" } end)   -- group 1, seen by d
      local _, st = session({ sync = sync, map_size = 1 << 16, write_back = true }, false, function(p, t)
        p:begin()                                                             -- group 2: t, the map grows
        for i = 1, 3000 do t:upsert{ k = "r" .. i, pad = string.rep("p", 300) .. i } end
        p:commit()
      end)
      assert.is_true(st.map_size > 1 << 16)
      local notes = session({}, true)
      assert.equal(1, #notes)
      assert.matches("missed the changes of t in group 2:", notes[1], 1, true)
    end)
  end
end)
