-- common.lua — what the two runs of the API-sequence campaign share (make
-- sequences): the seed and step count from the command line, the state's
-- directory, a relation picked at random, and the end: close, collect,
-- and `runnel verify` of the state (RUNNEL_BIN), "VERIFY FAILED" when it
-- is not whole.
local M = {}

-- seed, steps, the random function, and a new directory s<seed> under
-- $RUNNEL_SEQ_DIR for the run (made empty).
function M.start()
  local seed, steps = tonumber(arg[1]) or 1, tonumber(arg[2]) or 400
  math.randomseed(seed)
  local dir = assert(os.getenv("RUNNEL_SEQ_DIR"), "RUNNEL_SEQ_DIR") .. "/s" .. seed
  os.execute("rm -rf " .. dir .. " && mkdir -p " .. dir)
  return seed, steps, math.random, dir
end

-- One value of t at random (its keys in order, so a seed replays), or nil.
function M.pick(R, t)
  local k = {}
  for n in pairs(t) do k[#k + 1] = n end
  table.sort(k)
  if #k == 0 then return nil end
  return t[k[R(#k)]]
end

-- Closes p (if open), collects, verifies the state at dir (one the run
-- never made is not one) and prints the seed and the calls that returned.
function M.finish(p, dir, seed, ok)
  if p then pcall(p.close, p) end
  collectgarbage()
  local h = io.popen((os.getenv("RUNNEL_BIN") or "runnel") .. " verify " .. dir .. " 2>&1; echo rc $?")
  local out = h:read("a")
  h:close()
  if not out:find("rc 0") and not out:find("not a runnel state") then print("VERIFY FAILED", out) end
  print("done", seed, ok)
end

return M
