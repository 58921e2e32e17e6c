-- features.lua SEED STEPS — the other run of the API-sequence campaign
-- (make sequences): open options (sync, write_back, carry), lookups with
-- Lua sources, aggregates with Lua functions and windows, tops, indexes
-- and their ranges, p:run over NDJSON with bad lines, durable NDJSON,
-- SQLite and store outputs, drop_outbox, drops, reopens; callbacks call
-- the API again or raise. Nothing may crash and the state must verify at
-- the end. The state goes to $RUNNEL_SEQ_DIR/s<SEED>.
local runnel = require "runnel"
local common = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")
local seed, steps, R, base = common.start()
local dir = base .. "/st"
local p, rels, iters = nil, {}, {}
local names = { "t", "u", "s", "j", "a", "w", "tp", "ix", "lk", "lj", "agg2" }
local function pick(t) return common.pick(R, t) end
local function val()
  local c = R(10)
  if c == 1 then return nil elseif c == 2 then return "s" .. R(4) elseif c == 3 then return R(-2, 2) * 1.5
  elseif c == 4 then return runnel.null elseif c == 5 then return math.mininteger else return R(1, 6) end
end
local depth = 0
local api
local function chaos(where)
  if depth > 1 then return end
  depth = depth + 1
  for _ = 1, R(0, 1) do pcall(api) end
  depth = depth - 1
  if R(25) == 1 then error("boom " .. where) end
end
local function declare()
  local c = R(14)
  if c == 1 then rels.t = p:table("t", { {"id","int"}, {"g","int", null=true}, {"sc","int", null=true}, {"ts","int", null=true}, key="id" })
  elseif c == 2 then rels.u = p:table("u", { {"id","int"}, {"name","string", null=true}, key="id" })
  elseif c == 3 then rels.s = p:stream("s", { {"id","int"}, {"ts","int"}, {"sc","int", null=true} })
  elseif c == 4 and rels.t and rels.u then rels.j = rels.t:join(rels.u, { on = "g", kind = "left" })
  elseif c == 5 and rels.t then rels.a = rels.t:aggregate{ by = "g", n = runnel.count(), s = runnel.sum("sc"), mn = runnel.min("sc"), mx = runnel.max("sc"), av = runnel.avg("sc"), name = "a" }
  elseif c == 6 and rels.s then rels.w = rels.s:aggregate{ by = "id", window = runnel.tumbling(10, "ts"), n = runnel.count(), grace = R(0, 5), name = "w" }
  elseif c == 7 and rels.t then rels.tp = rels.t:top{ n = R(1, 3), by = "g", order = { {"sc", R(2) == 1 and "desc" or "asc"} }, name = "tp" }
  elseif c == 8 and rels.t then rels.ix = rels.t:index{ "sc", "desc", name = "ix" }
  elseif c == 9 then rels.lk = p:lookup("lk", { {"id","int"}, {"name","string", null=true}, key = "id",
      source = function(k) chaos("lookup") if R(5) == 1 then return nil end return { id = k, name = "n" .. k } end,
      cache = R(2) == 1 and { ttl = 0, size = R(1, 3) } or nil })
  elseif c == 10 and rels.t and rels.lk then rels.lj = rels.t:join(rels.lk, { on = "g", kind = R(2) == 1 and "left" or "inner" }, "lj")
  elseif c == 11 and rels.t then rels.agg2 = rels.t:aggregate{ by = "g", z = runnel.agg{ init = function() chaos("init") return 0 end,
      add = function(st, r) chaos("add") return st + (r.sc or 0) end, remove = function(st, r) return st - (r.sc or 0) end,
      result = function(st) return st end }, name = "agg2" }
  elseif c == 12 then local r = pick(rels) if r then
      local kind = R(3)
      if kind == 1 then r:sink(runnel.ndjson(base .. "/out" .. R(2) .. ".ndjson"), { name = "nd" .. R(2) })
      elseif kind == 2 then r:sink(runnel.sqlite(base .. "/m.db", "m" .. R(2)), { name = "sq" .. R(2) })
      else r:sink(runnel.store("st" .. R(2))) end end
  elseif c == 13 then p:drop_outbox(({ "nd1", "nd2", "sq1", "sq2" })[R(4)])
  elseif c == 14 then local n = names[R(#names)] p:drop(n)
  end
end
local function write_input()
  local f = io.open(base .. "/in.ndjson", "w")
  for _ = 1, R(1, 30) do
    local c = R(12)
    if c == 1 then f:write("garbage\n")
    elseif c == 2 then f:write('{"rel":"s","op":"insert","row":{"id":', R(3), ',"ts":', R(-5, 40), '}}\n')
    elseif c == 3 then f:write('{"rel":"u","op":"upsert","row":{"id":', R(6), ',"name":"x', R(3), '"}}\n')
    else f:write('{"rel":"t","op":"', ({ "insert", "upsert", "update", "delete" })[R(4)], '","row":{"id":', R(8), ',"g":', R(4), ',"sc":', R(-3, 9), ',"ts":', R(30), '}}\n') end
  end
  f:close()
end
api = function()
  local c = R(24)
  if not p then
    p = runnel.open{ path = dir, sync = R(2) == 1, notes = false, write_back = R(3) == 1,
                     carry = R(2) == 1 and { groups = R(1, 4) } or nil }
    rels = {}
    return
  end
  if c <= 4 then declare()
  elseif c <= 10 then
    local r = pick(rels)
    if r then
      local m = ({ "insert", "update", "upsert", "delete" })[R(4)]
      local row = { id = R(8) }
      for _, col in ipairs(r:schema().columns or r:schema()) do
        local nm = col.name or col[1]
        if nm ~= "id" and R(4) > 1 then row[nm] = R(3) == 1 and val() or R(0, 9) end
      end
      if m == "delete" then r:delete(row.id) else r[m](r, row) end
    end
  elseif c == 11 then p:begin()
  elseif c == 12 then p:commit()
  elseif c == 13 then p:rollback()
  elseif c == 14 then p:batch(function() for _ = 1, R(4) do pcall(api) end if R(3) == 1 then error("batch boom") end end)
  elseif c == 15 and R(3) == 1 then p:close() p = nil iters = {}
  elseif c == 16 then local r = pick(rels) if r then iters[#iters+1] = table.pack(r:rows()) end
  elseif c == 17 then local it = iters[R(math.max(1, #iters))] if it then it[3] = it[1](it[2], it[3]) end
  elseif c == 18 then if rels.ix then for _ in rels.ix:range{ offset = R(0, 2), limit = R(0, 3) } do chaos("range") end rels.ix:rank{ R(9) } end
  elseif c == 19 then write_input() p:run(runnel.ndjson_source(base .. "/in.ndjson"), { batch = R(1, 5), on_error = R(2) == 1 and "skip" or nil, progress = false })
  elseif c == 20 then local r = pick(rels) if r then r:scan(function() chaos("scan") end) r:count() r:get(R(8)) end
  elseif c == 21 then collectgarbage()
  elseif c == 22 then local ok, a = pcall(runnel.attach, dir, names[R(#names)]) if ok then a:count() for _ in a:rows() do end a:close() end
  elseif c == 23 then p:stats() p:seq() p:relations()
  elseif c == 24 then local r = pick(rels) if r then r:sink(function(verb, row) chaos("sink") end, { durable = R(3) == 1, name = "k" .. R(2) }) end
  end
end
local okc = 0
for _ = 1, steps do if pcall(api) then okc = okc + 1 end end
common.finish(p, dir, seed, okc)
