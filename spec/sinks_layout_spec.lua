-- A durable sink declared again while groups wait for it (OUTBOX-8 in
-- core/outbox.c): a declaration of its relation that reads the waiting
-- rows the same (nullability made looser, defaults changed) delivers
-- them; one that would read them wrong (another type, another column
-- order, a column made not null while a waiting row holds null there) is
-- refused, naming the column.
local runnel = require "runnel"
local H = require "helper"

describe("a durable sink with groups waiting, its relation declared again", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  -- A session whose durable sink "d" on t refuses every group: `fill(t)`'s groups wait.
  local function leave_waiting(cols, fill)
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", cols)
    t:sink(function() error("down") end, { durable = true, name = "d" })
    fill(t)
    p:close()
  end

  local function reopen(cols)
    local p = runnel.open(dir .. "/s")
    local t = p:table("t", cols)
    local got = {}
    local ok, err = pcall(t.sink, t, function(verb, row, _, info)
      got[#got + 1] = ("%d %s %s %s"):format(info.seq, verb, row.k, tostring(row.a))
    end, { durable = true, name = "d" })
    return p, t, got, not ok and err or nil
  end

  it("delivers them when a column was made nullable", function()
    leave_waiting({ {"k","int"}, {"a","string"}, key = "k" }, function(t) t:insert{ k = 1, a = "x" } end)
    local p, t, got, err = reopen({ {"k","int"}, {"a","string", null = true}, key = "k" })
    assert.is_nil(err)
    assert.same({ "1 INSERT 1 x" }, got)
    t:insert{ k = 2 }
    assert.same({ "1 INSERT 1 x", "2 INSERT 2 nil" }, got)
    p:close()
  end)

  it("delivers them when a column's default changed or was added", function()
    leave_waiting({ {"k","int"}, {"a","string", default = "old"}, {"b","int"}, key = "k" },
                  function(t) t:insert{ k = 1, b = 0 } end)
    local p, _, got, err = reopen({ {"k","int"}, {"a","string", default = "new"}, {"b","int", default = 7}, key = "k" })
    assert.is_nil(err)
    assert.same({ "1 INSERT 1 old" }, got)
    p:close()
  end)

  it("delivers them when a column was made not null and no waiting row holds null there", function()
    leave_waiting({ {"k","int"}, {"a","string", null = true}, key = "k" }, function(t) t:insert{ k = 1, a = "x" } end)
    local p, _, got, err = reopen({ {"k","int"}, {"a","string"}, key = "k" })
    assert.is_nil(err)
    assert.same({ "1 INSERT 1 x" }, got)
    p:close()
  end)

  it("refuses when a column was made not null and a waiting row holds null there, naming it", function()
    leave_waiting({ {"k","int"}, {"a","string", null = true}, key = "k" }, function(t)
      t:insert{ k = 1 }          -- group 1: a is null
      t:update{ k = 1, a = "x" } -- group 2: the table holds no null any more
    end)
    local p, t, got, err = reopen({ {"k","int"}, {"a","string"}, key = "k" })
    assert.matches('t: durable sink d: group 1 waits for it with null in column "a", now not null', err, 1, true)
    assert.same({}, got)
    -- declared as it was, it gets them
    p:close()
    p, t, got, err = reopen({ {"k","int"}, {"a","string", null = true}, key = "k" })
    assert.is_nil(err)
    assert.same({ "1 INSERT 1 nil", "2 UPDATE 1 x" }, got)
    p:close()
  end)

  it("still refuses a column whose type changed (its waiting ints would read as floats)", function()
    leave_waiting({ {"k","int"}, {"a","int"}, key = "k" }, function(t) t:insert{ k = 1, a = 3 } end)
    local p, _, got, err = reopen({ {"k","int"}, {"a","float"}, key = "k" })
    assert.matches("another declaration of t", err, 1, true)
    assert.same({}, got)
    p:close()
  end)
end)
