-- A permanent store (rel:sink(runnel.store(name))) of a relation keyed past
-- LMDB's 511 bytes is written again from its relation when the relation's
-- columns change (core/store_sink.c, rewrite): the rewrite put the whole
-- key, so the declaration failed with MDB_BAD_VALSIZE where a change
-- stores it hashed (core/longkey.c). Found by
-- spec/writeback_ops_edges27_spec.lua (a column added to t under a join's
-- store).
local runnel = require "runnel"
local H = require "helper"

local LONG = string.rep("q", 600)

local function declare(p, extra)
  local cols = { {"k","string"}, {"g","string"}, key = "k" }
  if extra then cols[#cols + 1] = { "x", "int", null = true } end
  local t = p:table("t", cols)
  local gt = p:table("gt", { {"g","string"}, {"label","string"}, key = "g" })
  t:join(gt, { on = "g", kind = "left", name = "j" }):sink(runnel.store("jstore"))
  t:sink(runnel.store("tstore"))
  return t, gt
end

local function stored(dir, name)
  local att = runnel.attach(dir, name)
  local out = {}
  for row in att:rows() do out[#out + 1] = (row.k:gsub(LONG, "L")) .. "=" .. tostring(row.x) end
  table.sort(out)
  local got = att:get(LONG .. "1")
  att:close()
  return table.concat(out, " "), got and got.g
end

describe("a store keyed past 511 bytes", function()
  teardown(H.cleanup)
  for _, wb in ipairs{ false, true } do
    it("is written again when its relation's columns change (write_back = " .. tostring(wb) .. ")", function()
      local dir = H.tmpdir()
      local p = runnel.open{ path = dir, sync = false, write_back = wb, notes = false }
      local t, gt = declare(p)
      gt:insert{ g = "a", label = "A" }
      t:insert{ k = LONG .. "1", g = "a" }
      t:insert{ k = "2", g = "b" }
      p:close()
      p = runnel.open{ path = dir, sync = false, write_back = wb, notes = false }
      t = declare(p, true) -- x added: both stores are written again
      t:insert{ k = LONG .. "3", g = "a", x = 7 }
      t:update{ k = LONG .. "1", x = 5 }
      p:close()
      for _, name in ipairs{ "jstore", "tstore" } do
        local rows, g = stored(dir, name)
        assert.equal("2=nil L1=5 L3=7", rows)
        assert.equal("a", g)
      end
    end)
  end
end)
