-- model.lua — what the crash test's writer applies and its checker expects.
--
-- Group k of a run is a pure function of (seed, k) and of the groups before
-- it: gen(model, seed, k) draws it from a generator seeded by seed and k
-- alone, against the model state after groups 1 … k-1, and applies it to
-- the model as it goes. The writer replays the model to the state's seq on
-- every start, so all its runs on one state apply one sequence of groups.
--
-- The schema (declare):
--   owners(oid, name)                      keyed by oid
--   accounts(aid, oid, balance, seq)       keyed by aid; seq = the group that
--                                          last touched the row
--   owned    = accounts ⋈ owners on oid    (inner, foreign key)
--   by_owner = accounts by oid: n = count, total = sum(balance)
--   accounts:cdc{} → store "cdc_log"; accounts → NDJSON and SQLite sinks
-- Invariants: the balances always sum to TOTAL (each group only moves money
-- between accounts, opens accounts at 0 and closes them at 0); account ids
-- are never reused, so a row id is its aid.
local M = {}

M.ACCOUNTS, M.OWNERS, M.START_BALANCE = 8, 4, 1000
M.TOTAL = M.ACCOUNTS * M.START_BALANCE

---------------------------------------------------------------------------
-- The generator: splitmix64 over Lua's wrapping 64-bit integers.

local function rng(seed, k)
  local state = seed * -7046029254386353131 + k * 0x632BE59BD9B4E019
  local r = {}
  function r.next()
    state = state + -7046029254386353131 -- 0x9E3779B97F4A7C15
    local z = state
    z = (z ~ (z >> 30)) * -4658895280553007687 -- 0xBF58476D1CE4E5B9
    z = (z ~ (z >> 27)) * -7723592293110705685 -- 0x94D049BB133111EB
    return z ~ (z >> 31)
  end
  function r.below(n) return (r.next() >> 1) % n + 1 end -- 1 … n
  return r
end

---------------------------------------------------------------------------
-- The model: the state after groups 1 … seq and, when `record` is set,
-- everything the sinks saw (the NDJSON lines and the CDC log rows).

--- A model before group 1. record = true keeps the sinks' expected output.
function M.new(record)
  return { seq = 0, accounts = {}, owners = {}, next_aid = 1, next_oid = 1,
           record = record, ndjson = {}, cdc = {}, batch_no = 0 }
end

--- An independent copy of the tables (not the recorded output).
function M.copy(m)
  local c = M.new(false)
  c.seq, c.next_aid, c.next_oid = m.seq, m.next_aid, m.next_oid
  for aid, a in pairs(m.accounts) do c.accounts[aid] = { aid = a.aid, oid = a.oid, balance = a.balance, seq = a.seq } end
  for oid, o in pairs(m.owners) do c.owners[oid] = { oid = o.oid, name = o.name } end
  return c
end

local ACC_COLS = { "aid", "oid", "balance", "seq" }

-- The NDJSON sink's line for a change of accounts: the verb, then the whole
-- row in schema order (a DELETE: the key). Values are ints only.
local function ndjson_line(verb, row)
  local parts = { ('"verb":"%s"'):format(verb) }
  for _, c in ipairs(verb == "DELETE" and { "aid" } or ACC_COLS) do
    parts[#parts + 1] = ('"%s":%d'):format(c, row[c])
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

-- The CDC log row of a change (format "log", deltas only): INSERT all
-- columns, UPDATE the key and the columns it changed, DELETE the key.
local function cdc_row(m, verb, row, old)
  local out = { ["cdc$seq"] = m.seq, ["cdc$batch_seq_no"] = m.batch_no, ["cdc$id"] = (row or old).aid,
                ["cdc$operation"] = verb == "INSERT" and 2 or verb == "UPDATE" and 1 or 3 }
  m.batch_no = m.batch_no + 1
  out.aid = (row or old).aid
  for _, c in ipairs(ACC_COLS) do
    if verb == "INSERT" or verb == "UPDATE" and row[c] ~= old[c] then out[c] = row[c] end
  end
  return out
end

local function record(m, verb, row, old)
  if not m.record then return end
  m.ndjson[#m.ndjson + 1] = ndjson_line(verb, row or old)
  m.cdc[#m.cdc + 1] = cdc_row(m, verb, row, old)
end

-- Each change is applied to the model and appended to the group as
-- { op, relation, row }: what the writer calls rel[op](rel, row) with.
local function change(m, group, op, rel, row)
  group[#group + 1] = { op, rel, row }
  if rel == "owners" then
    m.owners[row.oid] = op ~= "delete" and { oid = row.oid, name = row.name } or nil
    return
  end
  local old = m.accounts[row.aid]
  if op == "insert" then
    m.accounts[row.aid] = row
    record(m, "INSERT", row)
  elseif op == "update" then
    local new = { aid = old.aid, oid = row.oid or old.oid, balance = row.balance or old.balance, seq = row.seq or old.seq }
    m.accounts[row.aid] = new
    record(m, "UPDATE", new, old)
  else
    m.accounts[row.aid] = nil
    record(m, "DELETE", nil, old)
  end
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

local function pick(r, t) local keys = sorted_keys(t); return keys[r.below(#keys)] end
local function pick_other(r, t, not_this)
  local keys = {}
  for _, k in ipairs(sorted_keys(t)) do if k ~= not_this then keys[#keys + 1] = k end end
  return keys[r.below(#keys)]
end

-- Moves amount from account a to account b (two updates).
local function move(m, group, k, a, b, amount)
  change(m, group, "update", "accounts", { aid = a, balance = m.accounts[a].balance - amount, seq = k })
  change(m, group, "update", "accounts", { aid = b, balance = m.accounts[b].balance + amount, seq = k })
end

local function first_group(m, group, k)
  for oid = 1, M.OWNERS do change(m, group, "insert", "owners", { oid = oid, name = "owner" .. oid }) end
  for aid = 1, M.ACCOUNTS do
    change(m, group, "insert", "accounts", { aid = aid, oid = (aid - 1) % M.OWNERS + 1, balance = M.START_BALANCE, seq = k })
  end
  m.next_aid, m.next_oid = M.ACCOUNTS + 1, M.OWNERS + 1
end

-- One step of a group, drawn by weight: mostly transfers, sometimes an
-- account opened or closed, moved to another owner, an owner renamed,
-- added or removed (its accounts then leave the inner join).
local function step(m, group, k, r, i)
  local n_acc = #sorted_keys(m.accounts)
  local roll = r.below(100)
  if roll <= 60 then
    local a = pick(r, m.accounts)
    move(m, group, k, a, pick_other(r, m.accounts, a), r.below(50))
  elseif roll <= 68 then
    local aid = m.next_aid
    m.next_aid = aid + 1
    local from = pick(r, m.accounts)
    change(m, group, "insert", "accounts", { aid = aid, oid = r.below(m.next_oid - 1), balance = 0, seq = k })
    move(m, group, k, from, aid, r.below(50))
  elseif roll <= 74 and n_acc > 3 then
    local a = pick(r, m.accounts)
    local b = pick_other(r, m.accounts, a)
    if m.accounts[a].balance ~= 0 then move(m, group, k, a, b, m.accounts[a].balance) end
    change(m, group, "delete", "accounts", { aid = a })
  elseif roll <= 84 then
    local a = pick(r, m.accounts)
    local oid = r.below(m.next_oid - 1)
    if oid ~= m.accounts[a].oid then change(m, group, "update", "accounts", { aid = a, oid = oid, seq = k }) end
  elseif roll <= 92 and next(m.owners) then
    change(m, group, "update", "owners", { oid = pick(r, m.owners), name = ("n%d.%d"):format(k, i) })
  elseif roll <= 96 then
    local oid = m.next_oid
    m.next_oid = oid + 1
    change(m, group, "insert", "owners", { oid = oid, name = "owner" .. oid })
  elseif #sorted_keys(m.owners) > 2 then
    change(m, group, "delete", "owners", { oid = pick(r, m.owners) })
  end
end

--- gen(m, seed, k) -> group: the changes of group k (m must be at k-1);
-- applies them to m. A group has 1 to 4 steps, one in 20 has 20 to 60.
function M.gen(m, seed, k)
  assert(m.seq == k - 1, "model out of step")
  m.seq, m.batch_no = k, 0
  local group = {}
  if k == 1 then first_group(m, group, k); return group end
  local r = rng(seed, k)
  local steps = r.below(20) == 1 and 19 + r.below(41) or r.below(4)
  for i = 1, steps do step(m, group, k, r, i) end
  if #group == 0 then -- every step drew a no-op: a group is never empty
    local a = pick(r, m.accounts)
    move(m, group, k, a, pick_other(r, m.accounts, a), 1)
  end
  return group
end

--- Advances m to group seq.
function M.advance(m, seed, seq)
  for k = m.seq + 1, seq do M.gen(m, seed, k) end
  return m
end

---------------------------------------------------------------------------
-- The pipeline.

--- apply(p, rel, group, first, last): runs changes first … last (all by
-- default) of a group made by gen as one runnel group.
function M.apply(p, rel, group, first, last)
  p:batch(function()
    for i = first or 1, last or #group do
      local c = group[i]
      local r = rel[c[2]]
      r[c[1]](r, c[3])
    end
  end)
end

--- declare(p, sinks) -> relations { owners, accounts, owned, by_owner, log }.
-- sinks = { ndjson = path, sqlite = path } attaches the outside sinks and
-- the store (the writer); without it nothing is attached (the checker).
function M.declare(p, runnel, sinks)
  local rel = {}
  rel.owners = p:table("owners", { {"oid","int"}, {"name","string"}, key = "oid" })
  rel.accounts = p:table("accounts", { {"aid","int"}, {"oid","int"}, {"balance","int"}, {"seq","int"}, key = "aid" })
  rel.owned = rel.accounts:join(rel.owners, { on = "oid" })
  rel.by_owner = rel.accounts:aggregate{ by = "oid", n = runnel.count(), total = runnel.sum("balance") }
  rel.log = rel.accounts:cdc{}
  if sinks then
    rel.log:sink(runnel.store("cdc_log"))
    rel.accounts:sink(runnel.ndjson(sinks.ndjson))
    rel.accounts:sink(runnel.sqlite(sinks.sqlite, "accounts"))
  end
  return rel
end

return M
