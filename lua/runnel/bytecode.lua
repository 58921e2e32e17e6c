-- runnel/bytecode.lua — reads a Lua 5.4 function's own bytecode
-- (string.dump, stripped) into its prototype, for the modules that learn
-- from it what a join's Lua functions do: runnel/joiner.lua (which of
-- them only copy columns) and runnel/lent.lua (which can keep a row lent
-- to them). The layout is ldump.c's; a dump of another Lua build than
-- 5.4's, or a C function, gives nil, and whoever reads the code then
-- assumes the least of the function.
--
--     local bc = require "runnel.bytecode"
--     bc.prototype(fn) -> { nparams, vararg, maxstack, nups (the closure's),
--                          code = { [1..n] = instruction }, k = { [0..] = string | false },
--                          upvals = n, upkind = { [0..] = the variable's kind: 0 one that
--                          can be assigned, 1 <const>, 2 <close> },
--                          protos = { nested prototypes } } | nil
--     bc.decode(i) -> op, a, k, b, c        bc.bx(i), bc.sj(i)
--     bc.op.NAME                            Lua 5.4's opcodes (lopcodes.h)
local M = {}

local NAMES = {
  "MOVE", "LOADI", "LOADF", "LOADK", "LOADKX", "LOADFALSE", "LFALSESKIP", "LOADTRUE", "LOADNIL", "GETUPVAL",
  "SETUPVAL", "GETTABUP", "GETTABLE", "GETI", "GETFIELD", "SETTABUP", "SETTABLE", "SETI", "SETFIELD", "NEWTABLE",
  "SELF", "ADDI", "ADDK", "SUBK", "MULK", "MODK", "POWK", "DIVK", "IDIVK", "BANDK", "BORK", "BXORK", "SHRI",
  "SHLI", "ADD", "SUB", "MUL", "MOD", "POW", "DIV", "IDIV", "BAND", "BOR", "BXOR", "SHL", "SHR", "MMBIN",
  "MMBINI", "MMBINK", "UNM", "BNOT", "NOT", "LEN", "CONCAT", "CLOSE", "TBC", "JMP", "EQ", "LT", "LE", "EQK",
  "EQI", "LTI", "LEI", "GTI", "GEI", "TEST", "TESTSET", "CALL", "TAILCALL", "RETURN", "RETURN0", "RETURN1",
  "FORLOOP", "FORPREP", "TFORPREP", "TFORCALL", "TFORLOOP", "SETLIST", "CLOSURE", "VARARG", "VARARGPREP",
  "EXTRAARG",
}
M.op = {}
for i, name in ipairs(NAMES) do M.op[name] = i - 1 end

local HEADER = "\27Lua\x54\0\x19\x93\r\n\x1a\n\4\8\8" .. string.pack("=j", 0x5678) .. string.pack("=n", 370.5)
local STRING_TAGS = { [0x04] = true, [0x14] = true } -- short and long strings

-- A reader of the dump s from at: its bytes, its sizes (7-bit groups,
-- most significant first, the last one marked) and its strings.
local function reader(s, at)
  local r = {}
  function r.byte()
    local b = s:byte(at)
    if not b then error("short dump", 0) end
    at = at + 1
    return b
  end
  function r.size()
    local x = 0
    repeat
      local b = r.byte()
      x = x * 128 + (b & 0x7f)
      if x > 0x7fffffff then error("size out of range", 0) end
    until b & 0x80 ~= 0
    return x
  end
  function r.bytes(n)
    if at + n - 1 > #s then error("short dump", 0) end
    local v = s:sub(at, at + n - 1)
    at = at + n
    return v
  end
  function r.string()
    local n = r.size()
    return n > 0 and r.bytes(n - 1) or nil
  end
  return r
end

-- One function of the dump (dumpFunction): constants keep strings only
-- (other constants are false).
local function read_function(r)
  r.string()                          -- source (stripped)
  r.size(); r.size()                  -- lines defined
  local f = { nparams = r.byte(), vararg = r.byte() ~= 0, maxstack = r.byte() }
  f.code = {}
  for i = 1, r.size() do f.code[i] = string.unpack("=I4", r.bytes(4)) end
  f.k = {}
  for i = 1, r.size() do
    local tag = r.byte()
    if STRING_TAGS[tag] then f.k[i - 1] = r.string() or ""
    elseif tag == 0x03 or tag == 0x13 then r.bytes(8); f.k[i - 1] = false
    elseif tag == 0x00 or tag == 0x01 or tag == 0x11 then f.k[i - 1] = false
    else error("unknown constant", 0) end
  end
  f.upvals = r.size()
  f.upkind = {}                       -- [0..]: 0 a variable, 1 <const>, 2 <close>
  for i = 1, f.upvals do
    r.bytes(2)                        -- in stack, index
    f.upkind[i - 1] = r.byte()
  end
  f.protos = {}
  for i = 1, r.size() do f.protos[i] = read_function(r) end
  r.bytes(r.size())                   -- line info
  for _ = 1, r.size() do r.size(); r.size() end
  for _ = 1, r.size() do r.string(); r.size(); r.size() end
  for _ = 1, r.size() do r.string() end
  return f
end

local dump = string.dump -- the library's, whatever string.dump is later made

function M.prototype(fn)
  local ok, s = pcall(dump, fn, true)
  if not ok or s:sub(1, #HEADER) ~= HEADER then return nil end
  local r = reader(s, #HEADER + 1)
  local ok2, f = pcall(function()
    local nups = r.byte()
    local f = read_function(r)
    f.nups = nups
    return f
  end)
  return ok2 and f or nil
end

function M.decode(i)
  return i & 0x7f, (i >> 7) & 0xff, (i >> 15) & 1, (i >> 16) & 0xff, (i >> 24) & 0xff
end

function M.bx(i) return i >> 15 end
function M.sj(i) return (i >> 7) - 0xffffff end

return M
