-- runnel/lent.lua — whether a join's mapper or joiner can keep a row lent
-- to it past the call. A Row (lua/lrow.c) is valid only during its call;
-- a Row kept (in an upvalue, a table, a closure) and read during a later
-- call must raise, not read that call's row, which takes a new Row per
-- call (lua/lcallback.c). A function that cannot keep its rows reuses one
-- Row, which costs nothing; this module tells which functions those are,
-- from their bytecode (runnel/bytecode.lua), when the join is declared.
--
-- It follows, instruction by instruction and along every path, which
-- registers may hold a lent row, and calls a row kept when one may be
--   stored anywhere (an upvalue, a table's key or value, a list);
--   passed to a function, except a helper held in the function's own
--   read-only upvalue (a local declared <const>) that itself cannot keep
--   rows (checked the same way, one level deep), whose identity the call
--   then checks each time (a guard: only the debug library can assign
--   it). An upvalue that can be assigned is not trusted: the guard is
--   checked when the call starts, and the function itself, the helper or
--   anything either calls (a metamethod, a finalizer) could assign it
--   another function before the function reads it in that call, which
--   would then get the one Row reused call after call;
--   an operand of ==, <, <=, .. or an arithmetic metamethod beside another
--   value (whose metamethod could receive it), a to-be-closed variable,
--   or a generic for's state;
--   returned from such a helper;
-- and takes any function with varargs, nested functions, or bytecode it
-- cannot read (a C function, another Lua build) to keep rows. Reading a
-- row's columns, testing it, and returning it from the mapper or joiner
-- itself (the join copies what is returned) keep nothing. A debug hook or
-- the debug library can always reach a row; that is not guarded against.
--
--     local guards = require("runnel.lent")(fn, nrows)   (rows: its first nrows arguments)
--     -> nil: fn may keep its rows (a new Row per call)
--     -> { up1, fn1, up2, fn2, … }: fn keeps none while its upvalue up_i
--        (1-based) still holds fn_i; {} when nothing needs checking
local bc = require "runnel.bytecode"
local op, decode = bc.op, bc.decode
local getupvalue = debug.getupvalue
local pairs, ipairs, next, type, remove = pairs, ipairs, next, type, table.remove

local MAX_GUARDS = 4 -- lua/lcallback.c checks at most this many per call

-- The kinds of upvalue no Lua code can assign (<const>, <close>).
local READ_ONLY = { [1] = true, [2] = true }

-- Opcodes that write R[A] with a value that is never a lent row (and go on
-- to the next instruction).
local WRITES_A = {}
for _, name in ipairs{ "LOADI", "LOADF", "LOADK", "LOADKX", "LOADFALSE", "LOADTRUE", "GETTABUP",
                       "GETTABLE", "GETI", "GETFIELD", "NEWTABLE", "UNM", "BNOT", "NOT", "LEN", "CONCAT" } do
  WRITES_A[op[name]] = true
end
for o = op.ADDI, op.SHR do WRITES_A[o] = true end

-- A state: the registers that may hold a row (rows) and those that surely
-- hold the value of an upvalue (ups: register -> upvalue index, 0-based).
local function copy(st)
  local n = { rows = {}, ups = {} }
  for r in pairs(st.rows) do n.rows[r] = true end
  for r, u in pairs(st.ups) do n.ups[r] = u end
  return n
end

-- Merges st into the state at pc; true when that state grew.
local function merge(states, pc, st)
  local at = states[pc]
  if not at then states[pc] = copy(st); return true end
  local grew = false
  for r in pairs(st.rows) do
    if not at.rows[r] then at.rows[r] = true; grew = true end
  end
  for r, u in pairs(at.ups) do
    if st.ups[r] ~= u then at.ups[r] = nil; grew = true end
  end
  return grew
end

local function clear(st, from, to)
  for r = from, to do st.rows[r] = nil; st.ups[r] = nil end
end

-- Whether any register in from..to may hold a row.
local function any_row(st, from, to)
  for r in pairs(st.rows) do
    if r >= from and r <= to then return true end
  end
  return false
end

-- The guards under which the prototype f (of the function fn, whose
-- parameters numbered in rows, from 0, may be rows) keeps no row, or nil.
-- A helper (helper = true) may not return a row, nor call anything with one.
local function analyse(f, fn, rows, helper)
  if not f or f.vararg or #f.protos > 0 then return nil end
  local code, top = f.code, f.maxstack + 1
  local states, work, guards, guarded = {}, { 1 }, {}, {}
  local start = { rows = {}, ups = {} }
  for r in pairs(rows) do
    if r < f.nparams then start.rows[r] = true end
  end
  states[1] = start
  while #work > 0 do
    local pc = remove(work)
    local i = code[pc]
    if not i then return nil end -- ran off the code: bytecode this does not read
    local o, a, k, b, c = decode(i)
    local st = copy(states[pc])
    local R = st.rows
    local succ = { pc + 1 }
    if o == op.MOVE then
      R[a], st.ups[a] = R[b], st.ups[b]
    elseif o == op.GETUPVAL then
      R[a], st.ups[a] = nil, b
    elseif o == op.LOADNIL then
      clear(st, a, a + b)
    elseif WRITES_A[o] then
      if (o == op.GETTABLE and R[c]) or (o == op.CONCAT and any_row(st, a, a + b - 1)) then return nil end
      clear(st, a, a)
    elseif o == op.SETUPVAL or o == op.TBC then
      if R[a] then return nil end
    elseif o == op.SETTABUP or o == op.SETI or o == op.SETFIELD or o == op.SETTABLE then
      if (k == 0 and R[c]) or (o == op.SETTABLE and R[b]) then return nil end
    elseif o == op.SELF then
      if k == 0 and R[c] then return nil end
      R[a + 1], st.ups[a + 1] = R[b], nil
      clear(st, a, a)
    elseif o == op.MMBIN or o == op.EQ or o == op.LT or o == op.LE then
      if R[a] or R[b] then return nil end
      if o ~= op.MMBIN then succ[2] = pc + 2 end
    elseif o >= op.EQK and o <= op.TEST then
      succ[2] = pc + 2
    elseif o == op.TESTSET then -- copies R[b] when its truth is k (and jumps): false is never a row
      R[a] = R[a] or (k == 1 and R[b]) or nil
      if st.ups[a] ~= st.ups[b] then st.ups[a] = nil end
      succ[2] = pc + 2
    elseif o == op.LFALSESKIP then
      clear(st, a, a)
      succ[1] = pc + 2
    elseif o == op.JMP then
      succ[1] = pc + 1 + bc.sj(i)
    elseif o == op.CALL or o == op.TAILCALL then
      local passed = {} -- the callee's parameters given a row
      for r in pairs(R) do
        if r > a and (b == 0 or r < a + b) then passed[r - a - 1] = true end
      end
      if next(passed) then
        local u = st.ups[a]
        if helper or not u or not READ_ONLY[f.upkind[u]] then return nil end
        local _, g = getupvalue(fn, u + 1)
        local gf = type(g) == "function" and bc.prototype(g)
        local inner = gf and analyse(gf, g, passed, true)
        if not inner then return nil end
        if not guarded[u] then
          if #guards >= 2 * MAX_GUARDS then return nil end
          guarded[u] = true
          guards[#guards + 1] = u + 1
          guards[#guards + 1] = g
        end
      end
      clear(st, a, c == 0 and top or a + c - 2)
    elseif o == op.RETURN or o == op.RETURN1 then
      if helper and any_row(st, a, o == op.RETURN1 and a or (b == 0 and top or a + b - 2)) then return nil end
      succ = {}
    elseif o == op.RETURN0 then
      succ = {}
    elseif o == op.SETLIST then
      if any_row(st, a + 1, b == 0 and top or a + b) then return nil end
    elseif o == op.FORPREP then
      clear(st, a, a + 3)
      succ[2] = pc + bc.bx(i) + 2
    elseif o == op.FORLOOP then
      clear(st, a, a + 3)
      succ[2] = pc + 1 - bc.bx(i)
    elseif o == op.TFORPREP then
      if any_row(st, a, a + 3) then return nil end
      succ[1] = pc + 1 + bc.bx(i)
    elseif o == op.TFORCALL then
      if any_row(st, a, a + 3) then return nil end
      clear(st, a + 4, a + 3 + c)
    elseif o == op.TFORLOOP then
      clear(st, a + 2, a + 2)
      succ[2] = pc + 1 - bc.bx(i)
    elseif o == op.CLOSURE or o == op.VARARG then
      return nil
    elseif not (o == op.MMBINI or o == op.MMBINK or o == op.CLOSE or o == op.VARARGPREP or o == op.EXTRAARG) then
      return nil -- an opcode this does not know
    end
    for _, to in ipairs(succ) do
      if merge(states, to, st) then work[#work + 1] = to end
    end
  end
  return guards
end

-- fn's guards when it is given nrows rows as its first arguments.
return function(fn, nrows)
  if type(fn) ~= "function" then return nil end
  local rows = {}
  for r = 0, nrows - 1 do rows[r] = true end
  return analyse(bc.prototype(fn), fn, rows, false)
end
