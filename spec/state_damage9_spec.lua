-- What runnel reads back from a damaged state: a filter's or map's kept
-- function ("fc:", core/evolve_code.h) is Lua bytecode, which Lua 5.4 does
-- not verify; a flipped byte in it ran garbage or killed the process at
-- the next change of the function. The state keeps a check of it now, and
-- a copy that does not match is not run (a note says its sinks were not
-- told). The damaged cases run in another process (runnel run), so that
-- a crash fails the test, not the spec.
local H = require "helper"

local bin = H.runnel_bin

-- Runs text as a script in another process: stdout, stderr, exit code.
local function elsewhere(text)
  local script = os.tmpname() .. ".lua"
  H.write(script, "local runnel = require 'runnel'\n" .. text)
  local out, err, code = H.sh(("%s run %s"):format(bin, script))
  os.remove(script)
  return out, err, code
end

-- The script opening dir with t and f, a filter of t by fn (Lua source),
-- printing the notes and the verbs f's sink gets for a new row.
local function declare_script(dir, fn)
  return ([[
    local p = runnel.open{ path = %q, notes = function(line) print("note: " .. line) end }
    local t = p:table("t", { {"k","int"}, {"v","int"}, {"g","int"}, key = "k" })
    local f = t:filter(%s, "f")
    f:sink(function(verb, row, _, info) print(verb .. " " .. info.id) end)
    if t:count() == 0 then for k = 1, 4 do t:insert{ k = k, v = 10 * k, g = k %% 2 } end
    else t:insert{ k = 5, v = 50, g = 0 } end
    p:close()
  ]]):format(dir, fn)
end

-- A varint of Lua 5.4's bytecode at s[at]: its value and the next position.
local function varint(s, at)
  local n = 0
  repeat
    local b = s:byte(at)
    n, at = n << 7 | (b & 0x7f), at + 1
  until b >= 0x80
  return n, at
end

-- Rewrites, in every copy of a function's bytecode in dir's data.mdb, byte
-- i (0: its opcode … 3: its operand C) of its first instruction as b (LMDB
-- has no checksums: the damage a disk or a stray write leaves). The number
-- of copies damaged.
local function damage_first_instruction(dir, i, b)
  local path = dir .. "/data.mdb"
  local data = assert(H.read(path))
  local signature = "\27LuaT\0\25\147\r\n\26\n"
  local parts, from, copies = {}, 1, 0
  for at in data:gmatch("()" .. signature:gsub("%p", "%%%0")) do
    local pos = at + 31 + 1 -- the header, then the number of upvalues
    _, pos = varint(data, pos) -- its source (stripped: none)
    _, pos = varint(data, pos) -- linedefined
    _, pos = varint(data, pos) -- lastlinedefined
    _, pos = varint(data, pos + 3) -- numparams, is_vararg, maxstacksize; the code's size
    parts[#parts + 1] = data:sub(from, pos + i - 1)
    parts[#parts + 1] = string.char(b)
    from, copies = pos + i + 1, copies + 1
  end
  parts[#parts + 1] = data:sub(from)
  H.write(path, table.concat(parts))
  return copies
end

describe("a filter's kept function damaged in the state", function()
  after_each(H.cleanup)

  it("is not run when its filter's function changes: a note says its sinks were not told (it crashed)", function()
    local dir = H.tmpdir()
    local out, err, code = elsewhere(declare_script(dir, "function(r) return r.g == 1 end"))
    assert.are.same({ "INSERT 1", "INSERT 3", "" }, { out:match("^(.-)\n(.-)\n(.*)$") }, err)
    assert.are.equal(0, code)
    assert.is_true(damage_first_instruction(dir, 3, 255) >= 1) -- r.g read as r[its constant 255]: it has one
    out, err, code = elsewhere(declare_script(dir, "function(r) return r.k >= 3 end"))
    assert.are.equal(0, code, err)
    assert.are.equal("note: f: its function changed\n" ..
                     "note: f: its sinks were not told what its new function changed " ..
                     "(the state's copy of its old function is damaged: it was not run)\n" ..
                     "INSERT 5\n", out)
  end)
end)

describe("a filter's kept function of another shape", function()
  after_each(H.cleanup)

  -- The filter kept with code as its function's copy (the copy runnel.lua
  -- makes, code_again's table.concat, replaced while it is declared): what
  -- runnel.lua makes of copies it did not write, for a filter the state
  -- holds (one it never held tells nothing, whatever its copy).
  local function told_over(code)
    local dir = H.tmpdir()
    local p = H.open_noting(dir)
    local t = p:table("t", { {"k","int"}, key = "k" })
    local first = function(r) return r.k > 0 end
    local dumped, concat = string.pack("<s4", string.dump(first, true)), table.concat
    table.concat = function(parts, ...)
      if parts[1] == dumped then return code end
      return concat(parts, ...)
    end
    local ok, err = pcall(t.filter, t, first, "f")
    table.concat = concat
    assert(ok, err)
    t:insert{ k = 1 }
    p:close()
    local notes
    p, notes = H.open_noting(dir)
    t = p:table("t", { {"k","int"}, key = "k" })
    local f = t:filter(function(r) return r.k > 1 end, "f")
    assert.are.equal(0, f:count())
    p:close()
    return notes[#notes]
  end

  local dump = string.pack("<s4", string.dump(function(r) return r.k > 0 end, true))
  local untold = "f: its sinks were not told what its new function changed (its old function could not be read)"

  it("is not run when an upvalue's value is cut short (string.unpack raised from the declaration)", function()
    assert.are.equal(untold, told_over(dump .. "I\1\2"))
    assert.are.equal(untold, told_over(dump .. "S\9\0\0\0abc"))
  end)

  it("is not run when it holds more or fewer upvalues than its function", function()
    assert.are.equal(untold, told_over(dump .. "N"))
    local up = 7
    local with_one = string.pack("<s4", string.dump(function(r) return r.k > up end, true))
    assert.are.equal(untold, told_over(with_one))
  end)

  it("is run when whole", function()
    assert.are.equal("f: its function changed", told_over(dump))
  end)
end)
