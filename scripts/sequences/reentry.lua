-- reentry.lua SEED STEPS — one run of the API-sequence campaign (make
-- sequences): a random sequence of calls on a pipeline (declarations,
-- changes, groups, batches, drops, closes and reopens, iterators kept
-- across them, coroutines) whose callbacks (filters, maps, mappers,
-- joiners, sinks) call the API again, raise, collect or yield. Every call
-- is protected: what counts is that nothing crashes (run under ASan and
-- UBSan by scripts/sequences/run.sh) and that the state verifies at the
-- end. The state goes to $RUNNEL_SEQ_DIR/s<SEED>.
local runnel = require "runnel"
local common = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")
local seed, steps, R, base = common.start()
local dir = base .. "/st"
local p, rels, iters, cos = nil, {}, {}, {}
local names = { "t1", "t2", "s1", "j1", "a1", "d1", "f1", "m1", "tp", "ix" }
local function pick(t) return common.pick(R, t) end
local function randval()
  local c = R(12)
  if c == 1 then return nil elseif c == 2 then return "x" .. R(5) elseif c == 3 then return R(-3, 3) + 0.5
  elseif c == 4 then return runnel.null elseif c == 5 then return {1,2} elseif c == 6 then return 0/0
  elseif c == 7 then return math.maxinteger else return R(1, 6) end
end
local api -- forward
local depth = 0
local function chaos(where)
  if depth > 2 then return end
  depth = depth + 1
  local n = R(0, 2)
  for _ = 1, n do pcall(api) end
  depth = depth - 1
  local c = R(30)
  if c == 1 then error("boom in " .. where) end
  if c == 2 then error({ obj = true }) end
  if c == 3 and coroutine.isyieldable() then coroutine.yield() end
end
local function declare()
  local c = R(17)
  if c == 1 then rels.t1 = p:table("t1", { {"id","int"}, {"v","int", null=true}, {"s","string", null=true}, key="id" })
  elseif c == 2 then rels.t2 = p:table("t2", { {"id","int"}, {"name","string", null=true}, key="id" })
  elseif c == 3 then rels.s1 = p:stream("s1", { {"id","int"}, {"v","int", null=true} })
  elseif c == 4 and rels.t1 and rels.t2 then rels.j1 = rels.t1:join(rels.t2, { kind = R(2)==1 and "left" or "inner",
      mapper = function(l) chaos("mapper") return l.v end,
      joiner = function(l, r) chaos("joiner") return { id = l.id, name = r and r.name } end,
      columns = { {"id","int"}, {"name","string", null=true}, key = "id" } }, "j1")
  elseif c == 5 and rels.t1 then rels.a1 = rels.t1:aggregate{ by = "v", n = runnel.count(), s = runnel.sum("id"), name = "a1" }
  elseif c == 6 and rels.t1 then rels.d1 = rels.t1:distinct("d1")
  elseif c == 7 and rels.t1 then rels.f1 = rels.t1:filter(function(r) chaos("filter") return (r.v or 0) % 2 == 0 end, "f1")
  elseif c == 8 and rels.t1 then rels.m1 = rels.t1:map(function(r) chaos("map") return { id = r.id, w = (r.v or 0) * 2 } end,
      { {"id","int"}, {"w","int"}, key = "id" }, "m1")
  elseif c == 9 and rels.t1 then rels.tp = rels.t1:top{ by = "v", order = "v", n = 2, name = "tp" }
  elseif c == 11 and rels.t1 then rels.c1 = rels.t1:cdc{ preimage = R(2) == 1 and "full" or nil, postimage = R(2) == 1, name = "c1" }
  elseif c == 12 then rels.t1 = p:table("t1", { {"id","int"}, {"v","int", null=true}, {"s","string", null=true}, {"x","float", null=true}, key="id" })
  elseif c == 13 then rels.t1 = p:table("t1", { {"id","int"}, {"v","string", null=true}, key="id" })
  elseif c == 14 and rels.t1 and rels.t2 then rels.j2 = rels.t1:join(rels.t2, { on = "v", kind = "left" }):select{ "id", {"nm", "t2.name"} }
  elseif c == 15 then p:alter(R(2) == 1 and "t1" or "t2", { rename = { v = "w", name = "nm" } })
  elseif c == 16 then local ok, a = pcall(runnel.attach, dir, names[R(#names)]) if ok and a then a:count() for r in a:rows() do end if R(2)==1 then a:close() end end
  elseif c == 17 then p:drop_outbox("k" .. R(3))
  elseif c == 10 then local r = pick(rels) if r then local d = R(2) == 1
      r:sink(function(verb, row, old) chaos("sink") end, { durable = d, name = d and ("k" .. R(3)) or nil }) end
  end
end
api = function()
  local c = R(26)
  if not p then
    p = runnel.open{ path = R(4) == 1 and nil or dir, sync = R(2) == 1, notes = false }
    rels = {}
    return
  end
  if c <= 3 then declare()
  elseif c <= 10 then
    local r = pick(rels)
    if r then
      local m = ({ "insert", "update", "upsert", "delete" })[R(4)]
      local row = { id = R(8) == 1 and randval() or R(1, 6) }
      local schema = r:schema()
      for _, col in ipairs(schema.columns or schema) do local nm = col.name or col[1] if nm ~= "id" and R(4) > 1 then row[nm] = R(3) == 1 and randval() or R(1, 6) end end
      if R(10) == 1 then row.bogus = 1 end
      if m == "delete" then r:delete(R(1, 6)) else r[m](r, row) end
    end
  elseif c == 11 then p:begin()
  elseif c == 12 then p:commit()
  elseif c == 13 then p:rollback()
  elseif c == 14 then p:batch(function() for _ = 1, R(3) do pcall(api) end if R(3) == 1 then error("batch boom") end end)
  elseif c == 15 then local n = names[R(#names)] p:drop(n) rels[n] = nil
  elseif c == 16 and R(4) == 1 then p:close() p = nil iters = {}
  elseif c == 17 then local r = pick(rels) if r then iters[#iters+1] = table.pack(r:rows()) end
  elseif c == 18 then local it = iters[R(math.max(1,#iters))] if it then it[3] = it[1](it[2], it[3]) end
  elseif c == 19 then local r = pick(rels) if r then r:get(R(1,6)) r:count() end
  elseif c == 20 then local r = pick(rels) if r then r:scan(function(row) chaos("scan") end) end
  elseif c == 21 then
    local co = coroutine.create(function() for _ = 1, 3 do pcall(api) coroutine.yield() end end)
    cos[#cos+1] = co
  elseif c == 22 then local co = cos[R(math.max(1,#cos))] if co then coroutine.resume(co) end
  elseif c == 23 then p:seq() p:in_group() p:relations() p:undeclared()
  elseif c == 24 then local r = pick(rels) if r then r:changes() r:schema() end
  elseif c == 25 then collectgarbage()
  elseif c == 26 and R(6) == 1 then local co = cos[R(math.max(1,#cos))] if co then coroutine.close(co) end
  end
end
local okc = 0
for _ = 1, steps do
  local ok, err = pcall(api)
  if ok then okc = okc + 1 end
end
common.finish(p, dir, seed, okc)
