-- A durable sink declared again while groups wait for it (OUTBOX-8 in
-- core/outbox.c), round 11: the old images a rebuild tells. Since 0.21 a
-- derived relation's new non-key column is null in the old rows its
-- rebuild tells (RN_ROW_TOLD, spec/evolve_schema_rule10_spec.lua), even
-- where the column is not null: the sink was told no value of it. Such a
-- group, waiting for a failing sink, must not refuse the sink when the
-- relation is declared again with only a default changed: the same
-- declaration that recorded it tells that null. A new row that holds null
-- in a column now not null is still refused, naming the column.
local H = require "helper"

-- Declares the durable sink "d" on rel: it fails every delivery when
-- `fail`, else keeps show(verb, row, old, info) of each change in got.
-- got, and the declaration's error or nil.
local function sink_d(rel, fail, show)
  local got = {}
  local ok, err = pcall(rel.sink, rel, function(verb, row, old, info)
    if fail then error("down") end
    got[#got + 1] = show(verb, row, old, info)
  end, { durable = true, name = "d" })
  return got, not ok and err or nil
end

describe("a durable sink with told groups waiting, its relation declared again", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  -- t, u and the left join j of t and u; t has w (default `w`, of type
  -- `wtype` or int) unless w is nil, and u_id is not null when `strict`.
  -- The sink "d" on j fails when `fail`, else records "seq verb id w old.w".
  local function session(w, fail, wtype, strict)
    local p = H.open_noting(dir .. "/s")
    local cols = { {"id","int"}, {"v","string"}, {"u_id","int", null = not strict}, key = "id" }
    if w then cols[#cols + 1] = {"w", wtype or "int", default = w} end
    local t = p:table("t", cols)
    local u = p:table("u", { {"id","int"}, {"name","string"}, key = "id" })
    local j = t:join(u, { on = "u_id", kind = "left", name = "j" })
    local got, err = sink_d(j, fail, function(verb, row, old, info)
      return ("%d %s %d %s %s"):format(info.seq, verb, (row or old).id, tostring(row and row.w), tostring(old and old.w))
    end)
    return p, { t = t, u = u, j = j }, got, err
  end

  -- Session 1 fills t with its sink working; session 2 adds w (default 5)
  -- with the sink failing: u 1's group, holding the rebuild's told rows
  -- (old w null) and the group's own changes, waits.
  local function leave_told_waiting(more)
    local p, r, _, err = session(nil, false)
    assert.is_nil(err)
    p:begin()
    r.t:insert{ id = 1, v = "a", u_id = 1 }
    r.t:insert{ id = 2, v = "b" }
    p:commit()
    p:close()
    p, r, _, err = session(5, true)
    assert.is_nil(err)
    p:begin()
    r.u:insert{ id = 1, name = "U1" }
    p:commit()
    if more then more(r) end
    assert.equal(more and 2 or 1, p:stats().outbox["j: durable sink d"])
    p:close()
  end

  it("delivers them when only w's default changed (their old images hold w null, as told)", function()
    leave_told_waiting()
    local p, _, got, err = session(6, false)
    assert.is_nil(err)
    table.sort(got)
    -- the rebuild's told rows (w null before), then u 1's own change of row 1
    assert.same({ "2 UPDATE 1 5 5", "2 UPDATE 1 5 nil", "2 UPDATE 2 5 nil" }, got)
    p:close()
  end)

  it("delivers them when declared the same", function()
    leave_told_waiting()
    local p, _, got, err = session(5, false)
    assert.is_nil(err)
    assert.equal(3, #got)
    p:close()
  end)

  -- The told group is committed by a process that exits without closing.
  it("delivers them once after a process left them and was killed, j's input declared with another default", function()
    local p, r = session(nil, false)
    r.t:insert{ id = 1, v = "a", u_id = 1 }
    r.t:insert{ id = 2, v = "b" }
    p:close()
    H.run_script(dir .. "/child.lua", ([[
local runnel = require "runnel"
local p = runnel.open{ path = %q, notes = function() end }
local t = p:table("t", { {"id","int"}, {"v","string"}, {"u_id","int", null = true}, {"w","int", default = 5}, key = "id" })
local u = p:table("u", { {"id","int"}, {"name","string"}, key = "id" })
local j = t:join(u, { on = "u_id", kind = "left", name = "j" })
j:sink(function() error("down") end, { durable = true, name = "d" })
u:insert{ id = 1, name = "U1" }
os.exit(0, false)
]]):format(dir .. "/s"))
    local got, err
    p, r, got, err = session(6, false)
    assert.is_nil(err)
    assert.same({ "3 UPDATE 1 5 nil", "3 UPDATE 2 5 nil", "3 UPDATE 1 5 5" }, got)
    p:close()
    p, r, got, err = session(6, false)   -- taken: not again, and the rebuild is not told again
    assert.is_nil(err)
    r.u:insert{ id = 2, name = "U2" }
    assert.same({}, got)
    p:close()
  end)

  it("as an SQLite mirror of j: holds j's rows once declared again with another default", function()
    local db = dir .. "/j.db"
    local function mirror(w)
      local p, r = session(w, false)
      r.j:sink(require("runnel").sqlite(db, "j"))
      return p, r
    end
    local p, r = mirror(nil)
    r.t:insert{ id = 1, v = "a", u_id = 1 }
    r.t:insert{ id = 2, v = "b" }
    p:close()
    p, r = mirror(5)
    H.sql(db, "create trigger no before update on j begin select raise(abort, 'down'); end")
    r.u:insert{ id = 1, name = "U1" } -- the rebuild's told rows and u 1's change wait
    assert.equal(1, p:stats().outbox['j: durable sink to table "j" in ' .. H.sh("realpath " .. db):gsub("\n$", "")])
    p:close()
    H.sql(db, "drop trigger no")
    p, r = mirror(6)
    assert.equal("1|a|1|5|1|U1\n2|b||5||\n", H.sql(db, "select * from j order by id"))
    p:close()
  end)

  it("still refuses them when a waiting new row holds null in a column made not null, naming it", function()
    -- group 2's told new row 2 holds u_id null; group 3 leaves t no null u_id
    leave_told_waiting(function(r) r.t:update{ id = 2, u_id = 1 } end)
    local p, _, got, err = session(5, false, nil, true)
    assert.matches('j: durable sink d: group 2 waits for it with null in column "u_id", now not null', err, 1, true)
    assert.same({}, got)
    p:close()
    -- declared as it was, the sink gets every waiting group
    p, _, got, err = session(5, false)
    assert.is_nil(err)
    assert.equal(4, #got)
    p:close()
  end)

  it("still refuses them when w's type changed (their rows would read wrong)", function()
    leave_told_waiting()
    local p, _, got, err = session(5.5, false, "float")
    assert.matches("j: durable sink d: group 2 waits for it, recorded for another relation or another declaration of j",
                   err, 1, true)
    assert.same({}, got)
    p:close()
  end)
end)

-- An old image is a row as the sink was told it: null there in a column
-- declared not null since is what the row held, not a row the sink will hold.
describe("a durable sink with groups waiting whose old images hold null in a column made not null", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  local function session(strict, fail)
    local p = H.open_noting(dir .. "/s")
    local t = p:table("t", { {"k","int"}, {"a","string", null = not strict}, key = "k" })
    local got, err = sink_d(t, fail, function(verb, row, old, info)
      return ("%d %s %s %s"):format(info.seq, verb, tostring(row and row.a), tostring(old and old.a))
    end)
    return p, t, got, err
  end

  it("delivers an UPDATE and a DELETE whose old rows hold it", function()
    local p, t = session(false, false)
    t:insert{ k = 1 }            -- group 1, delivered: a null
    t:insert{ k = 2 }            -- group 2, delivered: a null
    p:close()
    p, t = session(false, true)
    t:update{ k = 1, a = "x" }   -- group 3 waits: old a null
    t:delete{ k = 2 }            -- group 4 waits: the deleted row's a null
    p:close()
    local got, err
    p, t, got, err = session(true, false)
    assert.is_nil(err)
    assert.same({ "3 UPDATE x nil", "4 DELETE nil nil" }, got)
    p:close()
  end)
end)
