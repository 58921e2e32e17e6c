-- Groups: begin/commit/rollback/batch, sequence numbers, all-or-nothing
-- (DESIGN §5, §12; group.c invariants GROUP-1..4).
local runnel = require "runnel"
local H = require "helper"

describe("groups", function()
  local p, t
  before_each(function()
    p = runnel.open()
    t = p:table("t", { {"k","int"}, {"v","string", null = true}, key = "k" })
  end)
  after_each(function() p:close() end)

  it("number commits 1, 2, 3 and start at 0", function()
    assert.equal(0, p:seq())
    t:insert{ k = 1 }
    assert.equal(1, p:seq())
    p:begin()
    t:insert{ k = 2 }
    t:insert{ k = 3 }
    assert.equal(1, p:seq())
    assert.equal(2, p:commit())
    assert.equal(2, p:seq())
  end)

  it("let reads inside the group see its own changes, and others only after commit (GROUP-1)", function()
    local dir = H.tmpdir()
    local q = runnel.open(dir)
    local u = q:table("u", { {"k","int"}, key = "k" })
    q:begin()
    u:insert{ k = 1 }
    assert.equal(1, u:count())
    assert.same({ k = 1 }, u:get(1))
    local seen = {}
    for row in u:rows() do seen[#seen + 1] = row.k end
    assert.same({ 1 }, seen)
    q:rollback()
    assert.equal(0, u:count())
    assert.is_nil(u:get(1))
    q:close()
    H.cleanup()
  end)

  it("roll the whole group back when a change fails, leaving no group open (GROUP-2)", function()
    t:insert{ k = 1, v = "kept" }
    local log = H.record(t)
    p:begin()
    t:update{ k = 1, v = "changed" }
    t:insert{ k = 2 }
    assert.equal("t: insert: a row with key (k = 2) already exists", H.error_of(t.insert, t, { k = 2 }))
    assert.is_false(p:in_group())
    assert.equal("kept", t:get(1).v)
    assert.is_nil(t:get(2))
    assert.same({}, log)
    assert.equal("commit: no group is open", H.error_of(p.commit, p))
    t:insert{ k = 2 } -- the pipeline stays usable
    assert.same({ "INSERT 2" }, H.verbs(log))
  end)

  it("roll back on bad input caught before the core runs", function()
    p:begin()
    t:insert{ k = 1 }
    assert.equal("t: a row is a table keyed by column names, got string", H.error_of(t.insert, t, "oops"))
    assert.is_false(p:in_group())
    assert.equal(0, t:count())
  end)

  it("roll back when a sink raises, and raise its message (GROUP-4)", function()
    t:sink(function(verb, row) if row and row.v == "bad" then error("sink refused") end end)
    t:insert{ k = 1 }
    p:begin()
    t:insert{ k = 2 }
    t:insert{ k = 3, v = "bad" }
    local err = H.error_of(p.commit, p)
    assert.matches("t: sink: .*sink refused", err)
    assert.equal(1, t:count())
    assert.equal(1, p:seq())
    assert.is_false(p:in_group())
  end)

  it("roll back when a filter raises", function()
    local f = t:filter(function(row) if row.v == "boom" then error("boom!") end return true end)
    t:insert{ k = 1 }
    assert.matches("t.filter: filter: .*boom!", H.error_of(t.insert, t, { k = 2, v = "boom" }))
    assert.equal(1, t:count())
    assert.is_not_nil(f)
  end)

  it("run p:batch as one group and roll it back on error", function()
    local log = H.record(t)
    assert.equal(1, p:batch(function() t:insert{ k = 1 }; t:insert{ k = 2 } end))
    assert.same({ 1, 1 }, { log[1] and 1, log[2] and 1 })
    local ok, err = pcall(p.batch, p, function() t:insert{ k = 3 }; error("changed my mind") end)
    assert.is_false(ok)
    assert.matches("changed my mind", err)
    assert.is_nil(t:get(3))
    assert.is_false(p:in_group())
    assert.equal(1, p:seq())
  end)

  it("refuse nested begin, and changes from inside callbacks", function()
    p:begin()
    assert.equal("begin: a group is already open; it stays open", H.error_of(p.begin, p))
    p:rollback()
    t:sink(function() t:insert{ k = 99 } end)
    assert.matches("tables cannot be changed from inside a callback", H.error_of(t.insert, t, { k = 1 }))
    assert.equal(0, t:count())
  end)

  it("allow reads from inside callbacks", function()
    local other = p:table("o", { {"k","int"}, {"label","string"}, key = "k" })
    other:insert{ k = 1, label = "one" }
    local seen
    t:sink(function(_, row) seen = other:get(row.k).label end)
    t:insert{ k = 1 }
    assert.equal("one", seen)
  end)

  it("keep ids and counts consistent after a rollback", function()
    t:insert{ k = 1 }
    p:begin()
    t:delete{ k = 1 }
    t:insert{ k = 5 }
    assert.equal(1, t:count())
    p:rollback()
    assert.equal(1, t:count())
    t:insert{ k = 6 }
    assert.equal(2, t:id_of(6))
  end)

  it("grow the map by themselves when a group fills it (GROUP-5)", function()
    local q = runnel.open{ map_size = 1024 * 1024 }
    local big = q:table("big", { {"k","int"}, {"blob","string"}, key = "k" })
    local evens = big:filter(function(r) return r.k % 2 == 0 end)
    local log = H.record(evens)
    local blob = ("x"):rep(1000)
    q:begin()
    for k = 1, 5000 do big:insert{ k = k, blob = blob } end -- ~5 MB into a 1 MiB map
    big:update{ k = 2, blob = "short" }
    big:delete{ k = 4 }
    q:commit()
    assert.is_true(q:stats().map_size >= 8 * 1024 * 1024)
    assert.equal(0, q:stats().rollbacks)
    assert.equal(4999, big:count())
    assert.equal(2502, #log) -- 2500 inserts, one update, one delete: each once
    assert.same({ "INSERT 2", "INSERT 4" }, { H.verbs(log)[1], H.verbs(log)[2] })
    assert.same({ "UPDATE 2", "DELETE 4" }, { H.verbs(log)[2501], H.verbs(log)[2502] })
    assert.equal("short", big:get(2).blob)
    assert.equal(5000, big:id_of(5000))
    q:close()
  end)
  it("grow the map when a join's write fills it after its source row was written, and apply the change once", function()
    for _, sync in ipairs{ true, false } do
      for _, wb in ipairs{ false, true } do
        local q = runnel.open{ map_size = 1024 * 1024, sync = sync, write_back = wb }
        local players = q:table("players", { {"id","int"}, {"name","string"}, {"team","int"}, key = "id" })
        local teams = q:table("teams", { {"id","int"}, {"tname","string"}, key = "id" })
        local j = players:join(teams, { on = "team" })
        local log = H.record(j)
        q:begin()
        teams:insert{ id = 1, tname = "red" }
        for i = 1, 4000 do players:insert{ id = i, name = ("x"):rep(599), team = 1 } end -- ~5 MB
        q:commit()
        local what = ("sync = %s, write_back = %s"):format(sync, wb)
        assert.equal(4000, players:count(), what)
        assert.equal(4000, j:count(), what)
        assert.equal(4000, #log, what) -- each result once
        assert.equal(0, q:stats().rollbacks, what)
        q:close()
      end
    end
  end)

  describe("with sync = false (GROUP-6)", function()
    it("roll a failing group back alone among groups carried in one LMDB transaction", function()
      local q = runnel.open{ sync = false }
      local u = q:table("u", { {"k","int"}, {"v","int"}, key = "k" })
      local big = u:filter(function(r) return r.v > 5 end)
      local seen, fseen = H.record(u), H.record(big)
      local commits = q:stats().lmdb_commits
      for k = 1, 5 do u:insert{ k = k, v = k * 2 } end -- five carried groups
      assert.equal(commits, q:stats().lmdb_commits)
      q:begin()
      u:update{ k = 1, v = 100 }
      u:insert{ k = 6, v = 6 }
      assert.matches("already exists", H.error_of(u.insert, u, { k = 6, v = 7 }))
      assert.equal(5, q:seq())
      assert.equal(5, u:count())
      assert.equal(2, u:get(1).v)
      assert.is_nil(u:id_of(6))
      u:insert{ k = 6, v = 60 }
      assert.equal(6, u:id_of(6)) -- the failed group used up no id
      assert.same({ "INSERT 1", "INSERT 2", "INSERT 3", "INSERT 4", "INSERT 5", "INSERT 6" }, H.verbs(seen))
      assert.same({ "INSERT 3", "INSERT 4", "INSERT 5", "INSERT 6" }, H.verbs(fseen)) -- no replay reached a sink
      q:close()
    end)

    it("says so when carried groups cannot be replayed, and goes back to what LMDB holds", function()
      local q = runnel.open{ sync = false }
      local u = q:table("u", { {"k","int"}, key = "k" })
      local refuse = false
      u:filter(function() if refuse then error("refused now") end return true end)
      u:insert{ k = 1 }
      q:flush() -- group 1 is in LMDB
      u:insert{ k = 2 }
      u:insert{ k = 3 } -- groups 2 and 3 are carried
      refuse = true
      local err = H.error_of(u.insert, u, { k = 4 }) -- fails, and the replay of 2 and 3 fails too
      assert.matches("refused now", err, 1, true)
      assert.matches("(and 2 groups not yet flushed to LMDB were lost:", err, 1, true)
      refuse = false
      assert.equal(1, q:seq()) -- as after a crash: LMDB's last group
      assert.equal(1, u:count())
      assert.is_nil(u:get(2))
      u:insert{ k = 5 }
      assert.equal(2, q:seq())
      assert.equal(2, u:id_of(5)) -- ids of the lost groups are given again, as after a crash
      q:close()
    end)

    it("carries as many groups as carry.groups allows, then commits LMDB", function()
      local q = runnel.open{ sync = false, carry = { groups = 3, seconds = 60 } }
      local u = q:table("u", { {"k","int"}, key = "k" })
      local before = q:stats().lmdb_commits
      for k = 1, 7 do u:insert{ k = k } end
      assert.equal(before + 2, q:stats().lmdb_commits) -- after groups 3 and 6; 7 is carried
      q:flush()
      assert.equal(before + 3, q:stats().lmdb_commits)
      q:close()
      local each = runnel.open{ sync = false, carry = { groups = 1 } } -- one LMDB commit per group
      u = each:table("u", { {"k","int"}, key = "k" })
      before = each:stats().lmdb_commits
      for k = 1, 4 do u:insert{ k = k } end
      assert.equal(before + 4, each:stats().lmdb_commits)
      each:close()
      local by_changes = runnel.open{ sync = false, carry = { changes = 5 } }
      u = by_changes:table("u", { {"k","int"}, key = "k" })
      before = by_changes:stats().lmdb_commits
      by_changes:batch(function() for k = 1, 5 do u:insert{ k = k } end end) -- 5 changes: the bound
      assert.equal(before + 1, by_changes:stats().lmdb_commits)
      by_changes:close()
    end)

    it("refuses carry bounds that are not positive numbers of the right kind", function()
      assert.matches("open: carry.groups must be an integer above 0",
                     H.error_of(runnel.open, { sync = false, carry = { groups = 0 } }), 1, true)
      assert.matches("open: carry.seconds must be a number above 0",
                     H.error_of(runnel.open, { sync = false, carry = { seconds = "1" } }), 1, true)
      assert.matches("open: carry: unknown field group (groups, changes, seconds, page_share)",
                     H.error_of(runnel.open, { carry = { group = 2 } }), 1, true)
      for _, bad in ipairs{ -1, 1.5, "3" } do
        assert.matches("open: carry.page_share must be an integer, 0 (off) or above",
                       H.error_of(runnel.open, { sync = false, carry = { page_share = bad } }), 1, true)
      end
      assert.matches("open: carry must be a table", H.error_of(runnel.open, { carry = 3 }), 1, true)
    end)

    it("commits carried groups at flush and at close, so a reopen sees them all", function()
      local dir = H.tmpdir()
      local q = runnel.open{ path = dir, sync = false }
      local u = q:table("u", { {"k","int"}, key = "k" })
      local before = q:stats().lmdb_commits
      u:insert{ k = 1 }
      u:insert{ k = 2 }
      q:flush()
      assert.equal(before + 1, q:stats().lmdb_commits)
      u:insert{ k = 3 }
      local ks = {}
      for row in u:rows() do ks[#ks + 1] = row.k end -- a snapshot read sees carried groups
      assert.same({ 1, 2, 3 }, ks)
      u:insert{ k = 4 }
      q:close()
      q = runnel.open(dir)
      u = q:table("u", { {"k","int"}, key = "k" })
      assert.equal(4, u:count())
      assert.equal(4, q:seq())
      q:close()
      H.cleanup()
    end)
  end)
end)
