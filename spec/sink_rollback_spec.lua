-- A group that rolls back after its sinks saw it leaves nothing in any of
-- them (issue 11 defect 1): every sink that received any part of the group
-- is told, and its output ends equal to the committed groups exactly.
--
-- Each case runs three groups on relation t (a table or a stream):
--   1. commits "good";  2. writes "bad", then something fails;  3. commits "next".
-- What fails in group 2: a sink registered after the one under test
-- ("later"), the commit hook of a sink registered before it ("earlier"), or
-- the commit hook of a sink after it ("commit"); the failing sink listens
-- to t itself or to a second relation u the group also changes.
local runnel = require "runnel"
local H = require "helper"

local sql = H.sql

local function lines_of(path)
  local f = assert(io.open(path))
  local s = f:read("a")
  f:close()
  return s
end

-- A sink that raises in the group writing "bad": in its changes, or in
-- its commit hook after it saw a "bad" row.
local function failing(rel, in_commit)
  local saw_bad = false
  if in_commit then
    rel:sink{ insert = function(row) saw_bad = saw_bad or row.v == "bad" end,
              update = function(row) saw_bad = saw_bad or row.v == "bad" end,
              commit = function() if saw_bad then saw_bad = false; error("commit says no") end end,
              rollback = function() saw_bad = false end }
  else
    rel:sink(function(_, row) if row and row.v == "bad" then error("sink says no") end end)
  end
end

-- The sinks under test: each attaches to rel and returns a function giving
-- its output as a string, and the string the committed groups should give.
local kinds = {}

-- A recording sink: what commit(seq) took, rollback(seq) gives back.
kinds["Lua table sink"] = function(rel, env)
  local pending, committed, notices = {}, {}, {}
  rel:sink{ insert = function(row) pending[#pending + 1] = "+" .. row.k .. "=" .. row.v end,
            update = function(row) pending[#pending + 1] = "~" .. row.k .. "=" .. row.v end,
            delete = function(old) pending[#pending + 1] = "-" .. old.k end,
            commit = function(seq)
              for _, c in ipairs(pending) do committed[#committed + 1] = { seq, c } end
              pending = {}
            end,
            rollback = function(seq)
              notices[#notices + 1] = seq
              pending = {}
              while #committed > 0 and committed[#committed][1] == seq do table.remove(committed) end
            end }
  return function()
    assert.same({ 2 }, notices) -- group 2 rolled back: the sink heard of it, once
    local got = {}
    for i, c in ipairs(committed) do got[i] = c[1] .. c[2] end
    return table.concat(got, " ")
  end, env.stream and "1+1=good 2+3=next" or "1+1=good 2+2=next"
end

kinds["NDJSON"] = function(rel, env)
  local path = env.dir .. "/out.ndjson"
  rel:sink(runnel.ndjson(path))
  local want = env.stream and '{"verb":"INSERT","k":1,"v":"good"}\n{"verb":"INSERT","k":3,"v":"next"}\n'
                          or '{"verb":"INSERT","k":1,"v":"good"}\n{"verb":"INSERT","k":2,"v":"next"}\n'
  return function() return lines_of(path) end, want
end

kinds["SQLite"] = function(rel, env)
  local db = env.dir .. "/out.db"
  rel:sink(runnel.sqlite(db, "t"))
  local want = env.stream and "1|good\n3|next\n" or "1|good\n2|next\n"
  return function() return sql(db, "select k, v from t order by k") end, want
end

kinds["runnel.store"] = function(rel, env)
  rel:sink(runnel.store("kept"))
  return function()
    local att = runnel.attach(env.dir, "kept")
    local got = {}
    for row in att:rows() do got[#got + 1] = row.k .. "=" .. row.v end
    att:close()
    table.sort(got)
    return table.concat(got, " ")
  end, env.stream and "1=good 3=next" or "1=good 2=next"
end

local function declare(p, name, stream)
  local cols = { {"k","int"}, {"v","string"} }
  if stream then return p:stream(name, cols) end
  cols.key = "k"
  return p:table(name, cols)
end

local function run_case(kind, failure, where, stream, sync)
  local dir = H.tmpdir()
  local p = runnel.open{ path = dir, sync = sync }
  local t = declare(p, "t", stream)
  local u = declare(p, "u", stream)
  local fail_on = where == "other" and u or t
  if failure == "earlier" then failing(fail_on, true) end
  local output, want = kinds[kind](t, { dir = dir, stream = stream })
  if failure == "later" then failing(fail_on, false) end
  if failure == "commit" then failing(fail_on, true) end
  t:insert{ k = 1, v = "good" }
  local ok, err = pcall(p.batch, p, function()
    if stream then t:insert{ k = 2, v = "bad" }; t:insert{ k = 4, v = "bad" } else t:update{ k = 1, v = "bad" } end
    u:insert{ k = 1, v = "bad" }
  end)
  assert.is_false(ok)
  assert.matches("says no", err)
  t:insert{ k = stream and 3 or 2, v = "next" }
  assert.equal(2, p:seq())
  p:flush()
  assert.equal(want, output())
  p:close()
end

describe("a group that rolls back after sinks saw it", function()
  after_each(H.cleanup)
  for _, kind in ipairs{ "Lua table sink", "NDJSON", "SQLite", "runnel.store" } do
    for _, failure in ipairs{ "later", "earlier", "commit" } do
      for _, where in ipairs{ "same", "other" } do
        for _, rk in ipairs{ "table", "stream" } do
          it(("leaves nothing in a %s (%s sink fails, on the %s relation, %s)"):format(kind, failure, where, rk),
             function() run_case(kind, failure, where, rk == "stream", true) end)
        end
      end
    end
    it(("leaves nothing in a %s, and keeps the groups carried before (sync = false)"):format(kind),
       function() run_case(kind, "later", "same", false, false) end)
  end
end)

describe("a group rolled back among carried groups (sync = false)", function()
  after_each(H.cleanup)

  it("keeps the carried groups whole: seq, counts, ids and cdc ids, in this run and after reopening", function()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir, sync = false }
    local t, u = declare(p, "t"), declare(p, "u")
    local cdc_ids = {}
    local pending = {}
    t:cdc{}:sink{ insert = function(_, info) pending[#pending + 1] = info.id end,
                  commit = function() for _, id in ipairs(pending) do cdc_ids[#cdc_ids + 1] = id end; pending = {} end,
                  rollback = function() pending = {} end }
    failing(t, false)
    p:begin(); t:insert{ k = 1, v = "good" }; p:commit() -- carried
    p:begin(); p:commit()                                -- carried, and empty
    u:insert{ k = 1, v = "u" }                           -- carried
    assert.is_false(pcall(t.update, t, { k = 1, v = "bad" }))
    t:insert{ k = 2, v = "next" }
    assert.same({ 1, 2 }, cdc_ids) -- not 1, 1: the cdc relation's ids of carried groups stay used
    assert.equal(4, p:seq())
    p:close()
    p = runnel.open{ path = dir, sync = false }
    t, u = declare(p, "t"), declare(p, "u")
    assert.equal(4, p:seq())
    assert.equal(2, t:count())
    assert.equal(1, u:count())
    local ids = {}
    t:sink(function(_, _, _, info) ids[#ids + 1] = info.id end)
    t:insert{ k = 3, v = "later" }
    assert.same({ 3 }, ids)
    p:close()
  end)
end)

describe("a SQLite sink after a rollback among carried groups (sync = false)", function()
  after_each(H.cleanup)

  it("keeps its marks in step: the next declaration rewrites nothing", function()
    local dir = H.tmpdir()
    local db = dir .. "/out.db"
    local p = runnel.open{ path = dir .. "/st", sync = false }
    local t = declare(p, "t")
    t:sink(runnel.sqlite(db, "t"))
    failing(t, false)
    t:insert{ k = 1, v = "good" }
    assert.is_false(pcall(t.update, t, { k = 1, v = "bad" }))
    p:close()
    sql(db, "insert into t values (99, 'the user''s')") -- a rewrite would delete it
    p = runnel.open{ path = dir .. "/st", sync = false }
    t = declare(p, "t")
    t:sink(runnel.sqlite(db, "t"))
    assert.equal("1|good\n99|the user's\n", sql(db, "select k, v from t order by k"))
    p:close()
  end)
end)

describe("runnel.watch", function()
  local function watched(failure)
    local p = runnel.open()
    local t = declare(p, "t")
    if failure == "earlier" then failing(t, true) end
    local printed = {}
    runnel.watch(t, function(s) printed[#printed + 1] = s:gsub("\n.*", function(grid)
      return grid:match("bad") and " [bad]" or grid:match("next") and " [next]" or " [good]" end) end)
    if failure == "later" then failing(t, false) end
    if failure == "commit" then failing(t, true) end
    t:insert{ k = 1, v = "good" }
    assert.is_false(pcall(t.update, t, { k = 1, v = "bad" }))
    t:insert{ k = 2, v = "next" }
    p:close()
    return table.concat(printed, "; ")
  end

  it("never shows a rolled-back group's rows with the next group", function()
    assert.equal("t · group 1 [good]; t · group 2 [next]", watched("later"))
    assert.equal("t · group 1 [good]; t · group 2 [next]", watched("earlier"))
  end)

  it("says so when a group it showed rolled back after all", function()
    assert.equal("t · group 1 [good]; t · group 2 [bad]; t · group 2 rolled back; t · group 2 [next]",
                 watched("commit"))
  end)
end)

describe("a sink table's rollback field", function()
  after_each(H.cleanup)

  it("must be a function", function()
    local p = runnel.open()
    local t = declare(p, "t")
    assert.matches("rollback must be a function", select(2, pcall(t.sink, t, { rollback = 1 })))
    p:close()
  end)

  it("is called once per rolled-back group, with its seq, only for sinks that got part of it", function()
    local p = runnel.open()
    local t, u = declare(p, "t"), declare(p, "u")
    local heard = {}
    t:sink{ insert = function() end, rollback = function(seq) heard[#heard + 1] = "t" .. seq end }
    u:sink{ insert = function() end, rollback = function(seq) heard[#heard + 1] = "u" .. seq end }
    t:sink(function() error("no") end)
    assert.is_false(pcall(t.insert, t, { k = 1, v = "x" }))
    assert.same({ "t1" }, heard) -- u got nothing of the group
    p:close()
  end)
end)

describe("a rollback notice", function()
  after_each(H.cleanup)

  it("does not replace the group's error with what it was refused", function()
    local p = runnel.open()
    local t = declare(p, "t")
    t:sink{ update = function() end, rollback = function() pcall(p.begin, p) end }
    t:sink(function(_, row) if row and row.v == "bad" then error("no bad") end end)
    t:insert{ k = 1, v = "good" }
    local ok, err = pcall(t.update, t, { k = 1, v = "bad" })
    assert.is_false(ok)
    assert.matches("no bad", err)
    p:close()
  end)

  it("sees the state without the group", function()
    local p = runnel.open()
    local t = declare(p, "t")
    local seen
    t:sink{ update = function() end, rollback = function() seen = t:get(1).v end }
    t:sink(function(_, row) if row and row.v == "bad" then error("no bad") end end)
    t:insert{ k = 1, v = "good" }
    assert.is_false(pcall(t.update, t, { k = 1, v = "bad" }))
    assert.equal("good", seen)
    p:close()
  end)
end)

describe("a store sink filling LMDB's map with sync = false", function()
  after_each(H.cleanup)

  it("grows the map and keeps committing every group, the store whole", function()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir, sync = false, map_size = 1024 * 1024 }
    local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
    t:sink(runnel.store("st"))
    local big = ("x"):rep(3000)
    for i = 1, 600 do t:insert{ k = i, v = big } end
    p:close()
    local st = runnel.attach(dir, "st")
    local n = 0
    for _ in st:rows() do n = n + 1 end
    assert.equal(600, n)
  end)
end)

describe("a rollback notice that raises", function()
  after_each(H.cleanup)

  it("is written to stderr naming the relation, and the group keeps its own error", function()
    local script = [[
      local runnel = require "runnel"
      local p = runnel.open()
      local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
      t:sink{ insert = function() end, rollback = function(seq) error("cannot undo " .. seq) end }
      t:sink(function() error("refused") end)
      local ok, err = pcall(t.insert, t, { k = 1, v = "x" })
      print(ok, err:match("refused") ~= nil, t:count())
      p:close()
    ]]
    local dir = H.tmpdir()
    local f = assert(io.open(dir .. "/notice.lua", "w"))
    f:write(script)
    f:close()
    local out, err, code = H.sh(("%s run %s/notice.lua"):format(H.runnel_bin, dir))
    assert.equal(0, code, err)
    assert.equal("false\ttrue\t0\n", out)
    assert.matches("runnel: t: sink rollback: .*cannot undo 1", err)
  end)
end)

describe("a rollback notice calling into the pipeline", function()
  it("is refused changes, begin, commit and close, and the pipeline stays whole", function()
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
    local u = p:table("u", { {"k","int"}, key = "k" })
    local refused = {}
    t:sink{ insert = function() end, rollback = function()
      for _, call in ipairs{ function() p:close() end, function() p:begin() end, function() p:commit() end,
                             function() u:insert{ k = 99 } end } do
        local ok, err = pcall(call)
        refused[#refused + 1] = not ok and tostring(err):match("inside a callback") ~= nil
      end
    end }
    t:sink(function(_, row) if row.v == "bad" then error("no") end end)
    assert.is_false(pcall(t.insert, t, { k = 1, v = "bad" }))
    assert.same({ true, true, true, true }, refused)
    assert.is_false(p:in_group())
    t:insert{ k = 2, v = "good" }
    assert.equal(1, p:seq())
    assert.equal(0, u:count())
    p:close()
  end)
end)
