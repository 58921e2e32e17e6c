-- p:stats().changes counts each source change that went through once
-- (docs/api.md). With sync = false a failed group among carried ones
-- replays the carried groups into a new LMDB transaction, and a map that
-- fills replays the transaction's changes after growing it (core/group.c
-- (5), (6)): the replay counted every change again, so the count grew
-- with each rollback and each growth of the map. Found by
-- spec/writeback_ops_edges27_spec.lua (the write-back state, carried,
-- against the plain one with sync = true).
local runnel = require "runnel"

local function counts(opts, map_size)
  local p = runnel.open(opts)
  local t = p:table("t", { {"k","string"}, {"pad","string"}, key = "k" })
  local kl = p:table("kl", { {"g","string"} })
  local e = p:stream("e", { {"k","string"}, {"ts","int"} })
  e:aggregate{ by = "k", window = runnel.tumbling(10, "ts"), n = runnel.count(), name = "w" }
  t:aggregate{ by = "pad", n = runnel.count(), name = "a" }
  local oks = {}
  local function try(fn, ...) oks[#oks + 1] = pcall(fn, ...) and "ok" or "no" end
  p:begin()
  try(t.insert, t, { k = "a", pad = "x" })
  try(t.update, t, { k = "zz", pad = "x" })  -- fails: the group rolls back (1 change went through)
  try(t.insert, t, { k = "b", pad = "x" })   -- a group of its own, carried
  try(t.delete, t, { k = "zz" })             -- fails: the carried group is replayed
  try(kl.insert, kl, { g = "x" })
  try(t.insert, t, { k = "b", pad = "x" })   -- fails
  try(e.insert, e, { k = "b", ts = 1 })
  try(t.insert, t, { k = "c", pad = 1 })     -- fails
  p:begin()                                  -- enough changes to fill a small map: it grows, twice or more
  for i = 1, 3000 do t:upsert{ k = "r" .. i, pad = string.rep("p", 300) .. i } end
  p:commit()
  local s = p:stats()
  assert(map_size > 1 << 20 or s.map_size > 1 << 20, "the map grew")
  p:close()
  return table.concat(oks, " "), s.changes, s.groups, s.rollbacks
end

describe("p:stats().changes", function()
  for _, wb in ipairs{ false, true } do
    for _, sync in ipairs{ false, true } do
      for _, map_size in ipairs{ 1 << 16, 1 << 26 } do
        it(("counts each change once (sync = %s, write_back = %s, map_size = %d)"):format(tostring(sync),
           tostring(wb), map_size), function()
          local oks, changes, groups, rollbacks = counts({ sync = sync, write_back = wb, map_size = map_size }, map_size)
          assert.equal("ok no ok no ok no ok no", oks)
          assert.equal(4 + 3000, changes)
          assert.equal(4, groups)
          assert.equal(4, rollbacks)
        end)
      end
    end
  end
end)
