-- Sinks: the function form, the table form, info, consolidate (DESIGN §8, §12).
local runnel = require "runnel"
local H = require "helper"

describe("sinks", function()
  local p, t
  before_each(function()
    p = runnel.open()
    t = p:table("t", { {"k","int"}, {"v","int", null = true}, key = "k" })
  end)
  after_each(function() p:close() end)

  it("get verb, row, old and info = { id, seq, n } after the group", function()
    local calls = {}
    t:sink(function(verb, row, old, info) calls[#calls + 1] = { verb, row, old, info } end)
    p:begin()
    t:insert{ k = 1, v = 1 }
    t:update{ k = 1, v = 2 }
    assert.same({}, calls) -- nothing before commit
    p:commit()
    assert.same({
      { "INSERT", { k = 1, v = 1 }, nil, { id = 1, seq = 1, n = 1 } },
      { "UPDATE", { k = 1, v = 2 }, { k = 1, v = 1 }, { id = 1, seq = 1, n = 2 } },
    }, calls)
  end)

  it("call the table form's functions, then commit(seq) after the group's verbs", function()
    local calls = {}
    t:sink{
      insert = function(row, info) calls[#calls + 1] = "insert " .. row.k .. " #" .. info.n end,
      update = function(row, old, info) calls[#calls + 1] = ("update %d %s->%s"):format(info.id, old.v, row.v) end,
      delete = function(old, info) calls[#calls + 1] = "delete " .. old.k .. " seq " .. info.seq end,
      commit = function(seq) calls[#calls + 1] = "commit " .. seq end,
    }
    p:batch(function()
      t:insert{ k = 1, v = 1 }
      t:update{ k = 1, v = 2 }
      t:delete{ k = 1 }
    end)
    assert.same({ "insert 1 #1", "update 1 1->2", "delete 1 seq 1", "commit 1" }, calls)
  end)

  it("take any subset of the table form", function()
    local n = 0
    t:sink{ delete = function() n = n + 1 end }
    t:insert{ k = 1 }
    t:delete{ k = 1 }
    assert.equal(1, n)
  end)

  it("refuse unknown fields", function()
    assert.equal("sink: unknown field inserted (insert, update, delete, commit, rollback, consolidate, durable, name)",
                 H.error_of(t.sink, t, { inserted = function() end }))
  end)

  describe("with consolidate = true", function()
    local log
    before_each(function()
      t:insert{ k = 1, v = 1 }
      t:insert{ k = 2, v = 2 }
      log = H.record(t, true)
    end)

    it("nets insert+update into one INSERT of the final row", function()
      p:batch(function() t:insert{ k = 3, v = 1 }; t:update{ k = 3, v = 9 } end)
      assert.same({ { "INSERT", 3, { k = 3, v = 9 } } }, log)
    end)

    it("nets update+update into one UPDATE from the row before the group", function()
      p:batch(function() t:update{ k = 1, v = 5 }; t:update{ k = 1, v = 6 } end)
      assert.same({ { "UPDATE", 1, { k = 1, v = 6 }, { k = 1, v = 1 } } }, log)
    end)

    it("drops insert+delete", function()
      p:batch(function() t:insert{ k = 3 }; t:delete{ k = 3 } end)
      assert.same({}, log)
    end)

    it("nets update+delete into a DELETE of the row before the group", function()
      p:batch(function() t:update{ k = 1, v = 5 }; t:delete{ k = 1 } end)
      assert.same({ { "DELETE", 1, nil, { k = 1, v = 1 } } }, log)
    end)

    it("nets delete+re-insert of a key into one UPDATE under the same id", function()
      p:batch(function() t:delete{ k = 2 }; t:insert{ k = 2, v = 20 } end)
      assert.same({ { "UPDATE", 2, { k = 2, v = 20 }, { k = 2, v = 2 } } }, log)
    end)

    it("drops changes that end where they began, and keeps first-touch order", function()
      p:batch(function()
        t:update{ k = 2, v = 7 }
        t:update{ k = 1, v = 7 }
        t:update{ k = 2, v = 2 }
        t:insert{ k = 3 }
      end)
      assert.same({ "UPDATE 1", "INSERT 3" }, H.verbs(log))
    end)
  end)

  it("see only groups committed after they were added, even after a reopen", function()
    local dir = H.tmpdir()
    local q = runnel.open(dir)
    local u = q:table("u", { {"k","int"}, key = "k" })
    u:insert{ k = 1 }
    q:close()
    q = runnel.open(dir)
    u = q:table("u", { {"k","int"}, key = "k" })
    local log = H.record(u)
    u:insert{ k = 2 }
    assert.same({ "INSERT 2" }, H.verbs(log))
    q:close()
    H.cleanup()
  end)
end)
