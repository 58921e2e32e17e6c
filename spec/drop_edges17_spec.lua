-- p:drop of a relation and declaring it again, as a durable sink sees it
-- (round 17). A durable sink is a log keyed by row id (DESIGN §4: every
-- change carries the id of the row it affects): the dropped relation's
-- groups it was given - before the drop, or waiting in the outbox and
-- given after it (OUTBOX-4) - hold ids no row of the state shows any more.
-- The relation declared again goes on numbering after them, as a stream
-- does, so the sink never meets an id twice: an old group's change of row
-- 1 is never read as a change of the new relation's row 1.
local runnel = require "runnel"
local H = require "helper"

describe("a relation dropped and declared again, as a durable sink sees it", function()
  local dir, state
  before_each(function() dir = H.tmpdir(); state = dir .. "/s" end)
  after_each(H.cleanup)

  local function open() return runnel.open{ path = state, notes = false } end

  -- The durable sink d on rel: "seq verb id" of each change into log; it
  -- fails while down[1].
  local function sink(rel, log, down)
    rel:sink(function(verb, _, _, info)
      if down[1] then error("down") end
      log[#log + 1] = ("%d %s %d"):format(info.seq, verb, info.id)
    end, { durable = true, name = "d" })
  end

  local function drop(name)
    local p = open()
    p:drop(name)
    p:close()
  end

  -- What an id-keyed consumer of the log makes of it: an INSERT of an id it
  -- holds, or an UPDATE or DELETE of one it does not, is a row mixed up.
  local function mixups(log)
    local live, bad = {}, {}
    for _, l in ipairs(log) do
      local verb, id = l:match("^%d+ (%u+) (%d+)$")
      if (verb == "INSERT") == (live[id] ~= nil) then bad[#bad + 1] = l end
      live[id] = verb ~= "DELETE" or nil
    end
    return bad
  end

  for _, keyless in ipairs{ false, true } do
    local cols = keyless and { {"k","int"}, {"g","int"} } or { {"k","int"}, {"g","int"}, key = "k" }
    local function update(t, k, g0, g)
      if keyless then t:update({ k = k, g = g0 }, { k = k, g = g }) else t:update{ k = k, g = g } end
    end

    it(("%s table: the waiting groups of the dropped one, then the new one's rows under ids never given before")
       :format(keyless and "a keyless" or "a keyed"), function()
      local log, down = {}, { false }
      local p = open()
      local t = p:table("t", cols)
      sink(t, log, down)
      t:insert{ k = 1, g = 1 }              -- group 1: delivered, row 1
      down[1] = true
      update(t, 1, 1, 2)                    -- group 2: waits
      t:insert{ k = 2, g = 1 }              -- group 3: waits, row 2
      assert.equal(2, p:stats().outbox["t: durable sink d"])
      p:close()
      drop("t")
      down[1] = false
      p = open()
      t = p:table("t", cols)
      sink(t, log, down)                    -- the waiting groups, as their relation gave them
      assert.same({ "1 INSERT 1", "2 UPDATE 1", "3 INSERT 2" }, log)
      t:insert{ k = 1, g = 7 }
      update(t, 1, 7, 8)
      local ids = {}
      for _, id in t:rows() do ids[#ids + 1] = id end
      assert.same({ 3 }, ids)
      assert.same({ "1 INSERT 1", "2 UPDATE 1", "3 INSERT 2", "4 INSERT 3", "5 UPDATE 3" }, log)
      assert.same({}, mixups(log))
      p:close()
      p = open()                            -- and across a reopen
      t = p:table("t", cols)
      sink(t, log, down)
      t:insert{ k = 5, g = 1 }
      assert.same("6 INSERT 4", log[#log])
      p:close()
    end)
  end

  it("an aggregate dropped and declared again numbers its rows after the dropped one's", function()
    local cols = { {"k","int"}, {"g","int"}, key = "k" }
    local log, down = {}, { false }
    local p = open()
    local t = p:table("t", cols)
    local a = t:aggregate{ by = "g", n = runnel.count(), name = "a" }
    sink(a, log, down)
    t:insert{ k = 1, g = 1 }                -- row 1 of a: g 1
    down[1] = true
    t:insert{ k = 2, g = 2 }                -- waits: row 2, g 2
    p:close()
    p = open()
    p:table("t", cols)
    p:drop("a")
    p:close()
    down[1] = false
    p = open()
    t = p:table("t", cols)
    a = t:aggregate{ by = "g", n = runnel.count(), name = "a" }
    sink(a, log, down)                      -- the waiting group, then a built again: nothing said of it
    t:insert{ k = 3, g = 3 }
    local ids = {}
    for _, id in a:rows() do ids[#ids + 1] = id end
    table.sort(ids)
    for _, id in ipairs(ids) do assert.is_true(id > 2, "id " .. id .. " given again") end
    assert.same({}, mixups(log))
    p:close()
  end)
end)

describe("p:drop from inside a callback", function()
  after_each(H.cleanup)

  -- drop_outbox, run and rn_subscribe_durable say "not inside a group or a
  -- callback"; p:drop said "not inside a group" from a durable sink or an
  -- on_durable hook, which run after the group, outside it.
  it("is refused naming the callback case, from where the user called it, and x stays", function()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir .. "/s", notes = false }
    p:table("x", { {"k","int"}, key = "k" }):insert{ k = 1 }
    p:close()
    p = runnel.open{ path = dir .. "/s", notes = false }
    local t = p:table("t", { {"k","int"}, key = "k" })
    local errs = {}
    local function try(where)
      local ok, err = pcall(p.drop, p, "x"); assert(not ok)
      errs[#errs + 1] = where .. ": " .. err
    end
    t:sink(function() try("in-group") end)
    t:sink(function() try("durable") end, { durable = true, name = "d" })
    p:on_durable(function() try("on_durable") end)
    t:insert{ k = 1 }
    p:flush()
    table.sort(errs)
    assert.same({ 'durable: drop "x": not inside a group or a callback',
                  'in-group: drop "x": not inside a group or a callback',
                  'on_durable: drop "x": not inside a group or a callback' }, errs)
    p:begin()
    local ok, err = pcall(function() p:drop("x") end)
    assert.is_false(ok)
    assert.matches("drop_edges17_spec.lua:%d+: drop \"x\": not inside a group or a callback", err)
    p:rollback()
    p:drop("x")                             -- outside, it goes
    assert.same({}, p:undeclared())
    p:close()
  end)
end)

describe("p:drop of a store a sink declared in the pipeline writes", function()
  after_each(H.cleanup)

  -- It was dropped from under the sink: its database handle closed, every
  -- later group failed with "t: Invalid argument" until the pipeline closed.
  it("is refused naming the relation whose sink writes it; the pipeline goes on", function()
    local dir = H.tmpdir()
    local state = dir .. "/s"
    local p = runnel.open{ path = state, notes = false }
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:sink(runnel.store("s"))
    t:insert{ k = 1 }
    local ok, err = pcall(function() p:drop("s") end)
    assert.is_false(ok)
    assert.matches("drop_edges17_spec.lua:%d+: drop \"s\": the store sink of \"t\" declared in this pipeline writes "
                   .. "it; drop it before declaring the sink %(at the start of the new deploy%), or with runnel drop "
                   .. "while no pipeline has the state open", err)
    t:insert{ k = 2 }
    local a = runnel.attach(state, "s")
    assert.equal(2, a:count())
    a:close()
    p:close()
    p = runnel.open{ path = state, notes = false }
    p:drop("s")                             -- before the sink is declared, it goes
    t = p:table("t", { {"k","int"}, key = "k" })
    t:sink(runnel.store("s"))               -- and the sink writes it anew from t
    a = runnel.attach(state, "s")
    assert.equal(2, a:count())
    a:close()
    p:close()
  end)
end)

describe("p:drop of what a lookup declared in the pipeline reads through runnel.attach", function()
  after_each(H.cleanup)

  -- It was taken: every later group whose join asked the lookup failed
  -- ("was dropped from the state since it was attached"). The README
  -- says p:drop is refused while declared relations read it, naming them.
  it("is refused naming the lookup; the joins go on finding its rows", function()
    local dir = H.tmpdir()
    local state = dir .. "/s"
    local p = runnel.open{ path = state, notes = false }
    local u = p:table("u", { {"k","int"}, {"n","string"}, key = "k" })
    u:sink(runnel.store("names"))
    u:insert{ k = 1, n = "one" }
    p:close()
    p = runnel.open{ path = state, notes = false }
    local l = p:lookup("l", { {"k","int"}, {"n","string"}, key = "k", source = runnel.attach(state, "names") })
    local t = p:table("t", { {"id","int"}, {"k","int"}, key = "id" })
    local j = t:join(l, { on = "k", kind = "left" })
    t:insert{ id = 1, k = 1 }
    for _, name in ipairs{ "names", "u" } do -- the store; the table it attaches none of
      local ok, err = pcall(function() p:drop(name) end)
      if name == "names" then
        assert.is_false(ok)
        assert.matches("drop_edges17_spec.lua:%d+: drop \"names\": lookup \"l\" declared in this pipeline reads it "
                       .. "%(its source attaches it%); drop it before declaring the lookup, or with runnel drop while "
                       .. "no pipeline has the state open", err)
      else
        assert.is_true(ok, err)
      end
    end
    t:insert{ id = 2, k = 1 }
    assert.equal("one", j:get(2).n)
    p:close()
  end)
end)

describe("an attach of the pipeline's own state after p:drop of another relation", function()
  after_each(H.cleanup)

  -- p:drop closes the pipeline's database handles, so its attaches open
  -- theirs again at their next read, freeing the schema they had: a
  -- lookup's fetch and att:get read the row with the schema taken before
  -- the read ("l: a stored row could not be read"; ASan: a
  -- heap-use-after-free in attach_fetch).
  it("reads its rows, through a lookup and through att:get", function()
    local dir = H.tmpdir()
    local state = dir .. "/s"
    local p = runnel.open{ path = state, notes = false }
    local u = p:table("u", { {"k","int"}, {"n","string"}, key = "k" })
    u:sink(runnel.store("names"))
    u:insert{ k = 1, n = "one" }
    p:table("w", { {"k","int"}, key = "k" }):insert{ k = 5 }
    p:close()
    p = runnel.open{ path = state, notes = false }
    local att = runnel.attach(state, "names")
    local l = p:lookup("l", { {"k","int"}, {"n","string"}, key = "k", source = runnel.attach(state, "names") })
    local t = p:table("t", { {"id","int"}, {"k","int"}, key = "id" })
    local j = t:join(l, { on = "k", kind = "left" })
    t:insert{ id = 1, k = 1 }
    assert.equal("one", att:get(1).n)
    p:drop("w")
    t:insert{ id = 2, k = 1 }
    assert.equal("one", j:get(2).n)
    assert.same({ k = 1, n = "one" }, att:get(1))
    p:drop("u")
    assert.same({ k = 1, n = "one" }, att:get(1))
    att:close()
    p:close()
  end)
end)
