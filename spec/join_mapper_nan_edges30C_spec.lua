-- A mapper that returns one column of its row (function(l) return l.col
-- end) is read in C (lua/runnel/joiner.lua, core/join.c mapper_column);
-- when that column holds NaN for a float key, the C read said
-- 'l.join: NaN for key column "k" of r', naming neither the mapper nor its
-- line, where calling the same mapper says 'l.join: mapper (file:line)
-- returned a bad key for r: column "k": NaN cannot be part of a key'.
-- Both must give the same error, and roll the group back.
local runnel = require "runnel"
local H = require "helper"
local _, mapper_column = require("runnel.joiner")()

local function pass(v) return v end

local FK = function(row) return row.fk end
local FK_LINE = debug.getinfo(FK, "S").linedefined
local called = function(row) return pass(FK)(row) end
local CALLED_LINE = debug.getinfo(called, "S").linedefined

-- The error of a NaN foreign key given to a join declared with mapper, on
-- a table or a stream left side, a table or a lookup right side, in a
-- group after committed rows; and what was committed is still there.
local function nan_error(mapper, kind, stream, lookup)
  local p = runnel.open()
  local r
  if lookup then
    r = p:lookup("r", { {"k","float"}, {"v","string"}, key = "k", source = function(k) return { k = k, v = "x" } end })
  else
    r = p:table("r", { {"k","float"}, {"v","string"}, key = "k" })
    r:insert{ k = 1.5, v = "one" }
  end
  local l = stream and p:stream("l", { {"id","int"}, {"fk","float", null = true} })
                    or p:table("l", { {"id","int"}, {"fk","float", null = true}, key = "id" })
  local j = l:join(r, { mapper = mapper, kind = kind })
  local seen = {}
  j:sink(function(verb, row) seen[#seen + 1] = verb .. " " .. runnel.format_value(row) end)
  l:insert{ id = 1, fk = 1.5 }
  local before, seq = #seen, p:seq()
  local err = H.message_of(function()
    p:begin()
    l:insert{ id = 2, fk = 1.5 }
    l:insert{ id = 3, fk = 0 / 0 }
    p:commit()
  end)
  assert.equal(seq, p:seq())
  assert.equal(before, #seen) -- the sink saw nothing of the group
  if not stream then
    local ids = {}
    for row in j:rows() do ids[#ids + 1] = row.id end
    assert.same({ 1 }, ids)
  end
  l:insert{ id = 4, fk = 1.5 } -- still usable
  assert.equal(seq + 1, p:seq())
  p:close()
  return err
end

describe("a mapper read in C, given NaN for a float key", function()
  after_each(H.cleanup)

  it("is recognised (the case this is about)", function()
    assert.equal("fk", mapper_column(FK))
    assert.is_nil(mapper_column(called))
  end)

  for _, kind in ipairs{ "inner", "left" } do
    for _, shape in ipairs{ { false, false, "table ⋈ table" }, { true, false, "stream ⋈ table" },
                            { true, true, "stream ⋈ lookup" } } do
      it("fails the group as calling it does, naming the mapper's line (" .. kind .. ", " .. shape[3] .. ")", function()
        local spec = debug.getinfo(1, "S").short_src
        local want = 'l.join: mapper (%s:%d) returned a bad key for r: column "k": NaN cannot be part of a key'
        local got_c = nan_error(FK, kind, shape[1], shape[2])
        local got_lua = nan_error(called, kind, shape[1], shape[2])
        assert.truthy(got_lua:find(want:format(spec, CALLED_LINE), 1, true), got_lua)
        assert.truthy(got_c:find(want:format(spec, FK_LINE), 1, true), got_c)
      end)
    end
  end

  it("refuses a join declared over a NaN row as calling it does", function()
    for _, m in ipairs{ FK, called } do
      local p = runnel.open()
      local r = p:table("r", { {"k","float"}, {"v","string"}, key = "k" })
      local l = p:table("l", { {"id","int"}, {"fk","float", null = true}, key = "id" })
      l:insert{ id = 1, fk = 0 / 0 }
      local err = H.message_of(function() return l:join(r, { mapper = m }) end)
      local line = debug.getinfo(m, "S").linedefined
      assert.truthy(err:find(('mapper (%s:%d) returned a bad key for r: column "k": NaN cannot be part of a key')
        :format(debug.getinfo(1, "S").short_src, line), 1, true), err)
      p:close()
    end
  end)
end)
