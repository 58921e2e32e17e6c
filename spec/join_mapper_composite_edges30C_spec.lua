-- A mapper's key for a right side with a composite key must be a table.
-- Two ways it went wrong:
-- * a scalar (or several values) was refused with 'l.join: mapper: the
--   key of r has 2 columns: return a table, got number', the one mapper
--   error that named no file:line of the mapper;
-- * a table giving one key column twice, by position and by name, with
--   different values ({ 1, "x", a = 2 }) silently took the position's
--   value: the key was not what the mapper meant, and joined another row.
local runnel = require "runnel"
local H = require "helper"

-- The join's rows after a right row (1, "x") and a left row 1, and the
-- error of the left insert (nil when it succeeded); the pipeline must be
-- usable after it.
local function outcome(mapper)
  local p = runnel.open()
  local r = p:table("r", { {"a","int"}, {"b","string"}, {"v","string"}, key = { "a", "b" } })
  local l = p:table("l", { {"id","int"}, key = "id" })
  local j = l:join(r, { mapper = mapper, kind = "left" })
  local seen = 0
  j:sink(function() seen = seen + 1 end)
  r:insert{ a = 1, b = "x", v = "one" }
  r:insert{ a = 2, b = "x", v = "two" }
  local ok, err = pcall(l.insert, l, { id = 1 })
  local rows = {}
  for row in j:rows() do rows[#rows + 1] = runnel.format_value(row) end
  if not ok then
    assert.equal(0, seen)
    assert.equal(2, p:seq())
    assert.same({}, rows)
  end
  p:close()
  return not ok and tostring(err) or nil, rows
end

local SPEC = debug.getinfo(1, "S").short_src

describe("a mapper's key for a composite right key", function()
  after_each(H.cleanup)

  it("refused for not being a table names the mapper's line", function()
    local scalar = function() return 1 end
    local values = function() return 1, "x" end
    for _, m in ipairs{ scalar, values } do
      local err = outcome(m)
      local want = ("l.join: mapper (%s:%d) returned no table: the key of r has 2 columns (a, b), got number")
        :format(SPEC, debug.getinfo(m, "S").linedefined)
      assert.truthy(err and err:find(want, 1, true), err)
    end
  end)

  it("refuses a column given twice with different values, naming it", function()
    local twice = function() return { 1, "x", a = 2 } end
    local err = outcome(twice)
    local want = ('l.join: mapper (%s:%d) returned a key giving column "a" of r twice, as [1] = 1 and by name = 2')
      :format(SPEC, debug.getinfo(twice, "S").linedefined)
    assert.truthy(err and err:find(want, 1, true), err)
    local twice_b = function() return { 1, "x", b = "y" } end
    err = outcome(twice_b)
    assert.truthy(err and err:find('giving column "b" of r twice, as [2] = "x" and by name = "y"', 1, true), err)
  end)

  it("still takes a column given twice with one value, and every documented shape", function()
    local want = { "{a=1, b=x, id=1, v=one}" }
    for _, m in ipairs{ function() return { 1, "x" } end, function() return { a = 1, b = "x" } end,
                        function() return { 1, b = "x" } end, function() return { 1, "x", a = 1.0 } end } do
      local err, rows = outcome(m)
      assert.is_nil(err)
      assert.same(want, rows)
    end
  end)
end)
