-- runnel/joiner.lua — recognises a join's Lua functions that only copy
-- columns of their rows, so that the join does it in C (as a joiner given
-- as column references, or `on`, is done) instead of calling Lua for every
-- row: a joiner that copies columns of its two rows, and a mapper that
-- returns one column of its row.
--
-- It reads the function's own bytecode (runnel/bytecode.lua) and accepts exactly
-- these shapes, with no upvalues, no nested functions and nothing else in
-- the body:
--     function(l, r) return { out = l.col, …, out = r and r.col, … } end
--     function(l, r) return l.col, l.col2, …, r and r.col end
-- (two values at least: a single nil value is no result, not a null column)
--     function(l) return l.col end                      (a mapper)
-- A shape it does not know, or a dump of another Lua build than 5.4's, is
-- not recognised and the function runs in Lua as before: recognising less
-- is always safe. Whether the copy gives exactly the declared columns
-- (names, order, types, nullability, key), or the mapper's very key, the
-- core checks (rn_join_spec.copies, rn_join_spec.mapper_column).
-- Loaded by runnel.lua: local joiner_copies, mapper_column = require(…)().
return function()
  local bc = require "runnel.bytecode"
  local GETFIELD, SETFIELD, NEWTABLE, JMP = bc.op.GETFIELD, bc.op.SETFIELD, bc.op.NEWTABLE, bc.op.JMP
  local TESTSET, RETURN, RETURN1, EXTRAARG = bc.op.TESTSET, bc.op.RETURN, bc.op.RETURN1, bc.op.EXTRAARG
  local decode = bc.decode

  -- The function's prototype when it has no upvalues, no nested
  -- functions and no varargs (the shapes above have none), or nil.
  local function prototype(fn)
    local f = bc.prototype(fn)
    if not f or f.nups ~= 0 or f.upvals ~= 0 or #f.protos ~= 0 or f.vararg then return nil end
    return f
  end

  -- The column name a mapper fn returns as it is (function(l) return
  -- l.col end), or nil.
  local function mapper_column(fn)
    local f = prototype(fn)
    if not f or f.nparams ~= 1 then return nil end
    local op, a, _, b, c = decode(f.code[1] or 0)
    local rop, ra, rk = decode(f.code[2] or 0)
    if op ~= GETFIELD or b ~= 0 or type(f.k[c]) ~= "string" or rop ~= RETURN1 or ra ~= a or rk ~= 0 then
      return nil
    end
    return f.k[c]
  end

  -- The columns fn copies, in the order it gives them: a list of
  -- { out = name or nil (values in column order), side = 0 (left) | 1
  -- (right), col = name }, or nil when fn is not such a copy. A right
  -- column read without `r and` is accepted only in an inner join, where
  -- every result has its right row; an outer join's left row may be
  -- missing too, so none is recognised there.
  local function copies(fn, kind)
    if kind == "outer" then return nil end
    local f = prototype(fn)
    if not f or f.nparams < 1 or f.nparams > 2 then return nil end
    local reg, code, k = { [0] = { param = 0 }, [1] = f.nparams == 2 and { param = 1 } or nil }, f.code, f.k
    local function column(b, c, guarded)
      local from = reg[b]
      local name = k[c]
      if not from or not from.param or type(name) ~= "string" then return nil end
      if from.param == 1 and not guarded and kind ~= "inner" then return nil end
      return { side = from.param, col = name }
    end
    local pc = 1
    while code[pc] do
      local op, a, kb, b, c = decode(code[pc])
      if op == NEWTABLE then
        if not code[pc + 1] or decode(code[pc + 1]) ~= EXTRAARG then return nil end
        reg[a] = { fields = {}, n = 0 }
        pc = pc + 2
      elseif op == GETFIELD then
        reg[a] = column(b, c, false)
        if not reg[a] then return nil end
        pc = pc + 1
      elseif op == TESTSET then -- r and r.col: TESTSET a r 0; JMP +1; GETFIELD a r col
        local jop, jarg = code[pc + 1] and code[pc + 1] & 0x7f, code[pc + 1] and bc.sj(code[pc + 1])
        local gop, ga, _, gb, gc = decode(code[pc + 2] or 0)
        if kb ~= 0 or jop ~= JMP or jarg ~= 1 or gop ~= GETFIELD or ga ~= a or gb ~= b then return nil end
        reg[a] = column(b, gc, true)
        if not reg[a] then return nil end
        pc = pc + 3
      elseif op == SETFIELD then
        local t, key, v = reg[a], k[b], reg[c]
        if kb ~= 0 or not t or not t.fields or type(key) ~= "string" or t.fields[key] or not v or not v.col then
          return nil
        end
        t.fields[key] = true
        t.n = t.n + 1
        t[t.n] = { out = key, side = v.side, col = v.col }
        pc = pc + 1
      elseif op == RETURN1 then -- a table: one value alone is no result when nil, so is not a copy
        local v = reg[a]
        return v and v.fields and v.n > 0 and { table.unpack(v, 1, v.n) } or nil
      elseif op == RETURN then
        if b < 3 or kb ~= 0 then return nil end -- two values or more (see RETURN1)
        local out = {}
        for i = 0, b - 2 do
          local v = reg[a + i]
          if not v or not v.col then return nil end
          out[i + 1] = v
        end
        return out
      else
        return nil
      end
    end
    return nil
  end
  return copies, mapper_column
end
