-- fkjoin_common.lua — what fkjoin.lua (runnel) and fkjoin_lua.lua (plain
-- Lua) measure alike, so their figures are comparable by construction:
--   local common = dofile(arg[0]:match("^(.*)/") .. "/fkjoin_common.lua")
local common = {}

-- Resident memory in MB (Linux): { rss =, anon =, file = }, or nil. anon is
-- what the process itself allocated; file is mapped file pages (LMDB's,
-- on disk or tmpfs), page cache the kernel may share and drop.
function common.memory()
  local f = io.open("/proc/self/status")
  local text = f and f:read("a")
  if f then f:close() end
  if not text then return nil end
  local function mb(field) local kb = text:match(field .. ":%s*(%d+)"); return kb and tonumber(kb) / 1024 end
  local m = { rss = mb("VmRSS"), anon = mb("RssAnon"), file = (mb("RssFile") or 0) + (mb("RssShmem") or 0) }
  return m.rss and m
end

-- Prints the memory figures after the run, above those once the input
-- was loaded, each line prefixed (e.g. "lua.").
function common.print_memory(prefix, before, after)
  if not (before and after) then return end
  print(("%srss_above_input_mb: %.0f"):format(prefix, after.rss - before.rss))
  if before.anon and after.anon then
    print(("%sanon_above_input_mb: %.0f"):format(prefix, after.anon - before.anon))
    print(("%sfile_above_input_mb: %.0f"):format(prefix, after.file - before.file))
  end
end

-- The checksum of a result: rows { pid, pname, score, tname, region } in
-- any order, sorted by pid, one "pid|pname|score|tname|region" line each
-- (\N for null), FNV-1a 64 over the lines joined by newlines.
function common.checksum(rows)
  table.sort(rows, function(a, b) return a[1] < b[1] end)
  local parts = {}
  for i, r in ipairs(rows) do
    parts[i] = ("%d|%s|%d|%s|%s"):format(r[1], r[2], r[3], r[4] or "\\N", r[5] or "\\N")
  end
  local text = table.concat(parts, "\n")
  local h = -3750763034362895579 -- 0xcbf29ce484222325
  for i = 1, #text do h = (h ~ text:byte(i)) * 1099511628211 end
  return ("%016x"):format(h)
end

return common
