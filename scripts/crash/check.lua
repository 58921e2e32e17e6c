-- check.lua — after a SIGKILL: reopens the writer's state and compares it,
-- its derived relations, its store and (optionally) its NDJSON and SQLite
-- sinks with the model (model.lua) advanced to the state's seq.
--
-- What must hold after any kill:
--   (1) seq >= the last acknowledged group (acks: durable when written);
--   (2) the ledger sums to TOTAL: no group is ever partly present;
--   (3) owners and accounts equal groups 1 … seq recomputed from the seed;
--   (4) the join and the aggregate equal a recomputation from the tables;
--   (5) the store "cdc_log" holds exactly the CDC rows of groups 1 … seq;
--   (6) with sinks: the NDJSON log holds exactly the lines of groups
--       1 … seq (none ahead, none twice, none torn) and the SQLite table
--       equals accounts.
local runnel = require "runnel"
local M = require "crash.model"

local C = {}

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

--- The last acknowledged seq in ROOT/acks (0 if none); a line cut by the
-- kill has no newline and does not count.
function C.last_ack(root)
  local last = 0
  for line in (read_file(root .. "/acks") or ""):gmatch("(%d+)\n") do last = math.max(last, tonumber(line)) end
  return last
end

local function fmt(row, cols)
  if row == nil then return "nil" end
  local parts = {}
  for _, c in ipairs(cols) do parts[#parts + 1] = ("%s=%s"):format(c, tostring(row[c])) end
  return "{" .. table.concat(parts, " ") .. "}"
end

-- Compares two maps key → row on cols; returns a message for the first
-- difference (in key order) or nil.
local function diff_rows(what, got, want, cols)
  local keys, seen = {}, {}
  for k in pairs(got) do keys[#keys + 1] = k; seen[k] = true end
  for k in pairs(want) do if not seen[k] then keys[#keys + 1] = k end end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    local g, w = fmt(got[k], cols), fmt(want[k], cols)
    if g ~= w then return ("%s: key %s: got %s, want %s"):format(what, tostring(k), g, w) end
  end
end

local function rows_by(rel, key)
  local out = {}
  for row in rel:rows() do out[row[key]] = row end
  return out
end

-- (4) The join and the aggregate recomputed from the tables as read.
local function expected_derived(accounts, owners)
  local owned, by_owner = {}, {}
  for aid, a in pairs(accounts) do
    local o = owners[a.oid]
    if o then owned[aid] = { aid = aid, oid = a.oid, balance = a.balance, seq = a.seq, name = o.name } end
    local g = by_owner[a.oid] or { oid = a.oid, n = 0, total = 0 }
    g.n, g.total = g.n + 1, g.total + a.balance
    by_owner[a.oid] = g
  end
  return owned, by_owner
end

local function check_tables(fail, rel, model)
  local accounts, owners = rows_by(rel.accounts, "aid"), rows_by(rel.owners, "oid")
  local total = 0
  for _, a in pairs(accounts) do total = total + a.balance end
  local want = model.seq == 0 and 0 or M.TOTAL -- group 1 opens the accounts
  if total ~= want then fail(("ledger: balances sum to %d, want %d (a partial group?)"):format(total, want)) end
  fail(diff_rows("accounts", accounts, model.accounts, { "aid", "oid", "balance", "seq" }))
  fail(diff_rows("owners", owners, model.owners, { "oid", "name" }))
  local owned, by_owner = expected_derived(accounts, owners)
  fail(diff_rows("join owned", rows_by(rel.owned, "aid"), owned, { "aid", "oid", "balance", "seq", "name" }))
  fail(diff_rows("aggregate by_owner", rows_by(rel.by_owner, "oid"), by_owner, { "oid", "n", "total" }))
end

local CDC_COLS = { "cdc$seq", "cdc$batch_seq_no", "cdc$id", "cdc$operation", "aid", "oid", "balance", "seq" }

-- (5)
local function check_store(fail, state, model)
  local ok, att = pcall(runnel.attach, state, "cdc_log")
  if not ok then -- a writer killed before it declared the store leaves none
    if #model.cdc > 0 or not tostring(att):match('no store "cdc_log" there') then fail("store: " .. tostring(att)) end
    return
  end
  local rows = {}
  for row in att:rows() do rows[#rows + 1] = row end
  att:close()
  for i = 1, math.max(#rows, #model.cdc) do
    local g, w = fmt(rows[i], CDC_COLS), fmt(model.cdc[i], CDC_COLS)
    if g ~= w then
      return fail(("store cdc_log: row %d of %d (want %d): got %s, want %s"):format(i, #rows, #model.cdc, g, w))
    end
  end
end

-- The last group named by lines[from …] (a DELETE line names none).
local function last_group(lines, from)
  local last = 0
  for i = from, #lines do last = math.max(last, tonumber(lines[i]:match('"seq":(%d+)') or 0)) end
  return last
end

-- (6) The NDJSON log against the model's lines; names the kind of damage.
local function check_ndjson(fail, path, model)
  local text = read_file(path) or ""
  local want = model.ndjson
  local lines = {}
  for line in text:gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  if text ~= "" and text:sub(-1) ~= "\n" then
    return fail(("ndjson: torn last line after %d lines (%d wanted): %q"):format(#lines, #want, text:match("[^\n]*$")))
  end
  for i = 1, math.max(#lines, #want) do
    if lines[i] ~= want[i] then
      local kind = not lines[i] and "missing lines"
        or not want[i] and ("ahead: %d lines of groups up to %d past seq %d"):format(#lines - #want,
          last_group(lines, #want + 1), model.seq)
        or not lines[i]:match("^{.*}$") and "torn line inside"
        or "differs (a group written twice or a lost group's lines)"
      return fail(("ndjson: %s: line %d of %d (want %d): got %s, want %s"):format(kind, i, #lines, #want,
        tostring(lines[i]), tostring(want[i])))
    end
  end
end

-- The rows of the SQLite table by aid, or nil and sqlite3's message.
local function sqlite_accounts(path)
  local f = io.open(path)
  if not f then return {} end -- killed before the sink created it
  f:close()
  local cmd = ("sqlite3 -batch -separator ' ' '%s' 'SELECT aid, oid, balance, seq FROM accounts' 2>&1"):format(path)
  local h = io.popen(cmd)
  local out = h:read("a")
  h:close()
  if out:match("no such table: accounts") then return {} end -- killed before the sink created it
  local rows = {}
  local rest = out:gsub("(%-?%d+) (%-?%d+) (%-?%d+) (%-?%d+)\n", function(aid, oid, balance, seq)
    rows[tonumber(aid)] = { aid = tonumber(aid), oid = tonumber(oid), balance = tonumber(balance), seq = tonumber(seq) }
    return ""
  end)
  if rest ~= "" then return nil, rest end
  return rows
end

-- (6) The SQLite table against accounts; when it differs, how many groups
-- ahead of LMDB it is (it matches the model a few groups on) if it is.
local function check_sqlite(fail, path, model, seed)
  local rows, err = sqlite_accounts(path)
  if not rows then return fail("sqlite: cannot read the table: " .. err) end
  local cols = { "aid", "oid", "balance", "seq" }
  local d = diff_rows("sqlite accounts", rows, model.accounts, cols)
  if not d then return end
  local ahead = M.copy(model)
  for n = 1, 300 do
    M.gen(ahead, seed, ahead.seq + 1)
    if not diff_rows("", rows, ahead.accounts, cols) then
      return fail(("sqlite: ahead: the table shows group %d, LMDB has seq %d (%d ahead)"):format(ahead.seq, model.seq, n))
    end
  end
  fail(d)
end

--- check(root, seed, model, sinks) -> seq, failures: reopens ROOT/state
-- (no writer may be running), advances model (a recording one, at or
-- before the state's seq) and lists every invariant that does not hold.
function C.check(root, seed, model, sinks)
  local failures = {}
  local function fail(msg) if msg then failures[#failures + 1] = msg end end
  local acked = C.last_ack(root)
  local ok, p = pcall(runnel.open, root .. "/state")
  if not ok then fail("reopen: " .. tostring(p)); return model.seq, failures end
  local seq = p:seq()
  -- Durable sinks catch up when they are declared again (OUTBOX-3): the
  -- checker declares them as the writer does, then reads what they hold.
  local outside = sinks and { ndjson = root .. "/accounts.ndjson", sqlite = root .. "/accounts.db" } or nil
  local declared, rel = pcall(M.declare, p, runnel, outside)
  if not declared then
    fail("declare: " .. tostring(rel))
  elseif seq < acked then
    fail(("acknowledged group lost: seq %d, last acknowledged %d"):format(seq, acked))
  elseif seq < model.seq then
    fail(("seq went back: %d after %d"):format(seq, model.seq))
  else
    M.advance(model, seed, seq)
    check_tables(fail, rel, model)
  end
  p:close()
  if #failures > 0 then return seq, failures end
  check_store(fail, root .. "/state", model)
  if sinks then
    check_ndjson(fail, root .. "/accounts.ndjson", model)
    check_sqlite(fail, root .. "/accounts.db", model, seed)
  end
  return seq, failures
end

return C
