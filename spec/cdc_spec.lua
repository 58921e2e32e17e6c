-- CDC images (DESIGN §7; cdc.h). Seed: cdc-pre-post-images.txt.
local runnel = require "runnel"
local H = require "helper"

-- Log rows as compact strings: "op id pk=… v1=… v2=… [del:v1]".
local function rows_of(rel)
  local out = {}
  rel:sink(function(_, row)
    local parts = { tostring(row["cdc$operation"]), tostring(row["cdc$id"]) }
    for _, c in ipairs{ "pk", "v1", "v2" } do
      if row[c] ~= nil then parts[#parts + 1] = c .. "=" .. tostring(row[c]) end
    end
    for _, c in ipairs{ "v1", "v2" } do
      if row["cdc$deleted_" .. c] then parts[#parts + 1] = "del:" .. c end
    end
    out[#out + 1] = table.concat(parts, " ")
  end)
  return out
end

describe("cdc{ format = 'log' }", function()
  local p, t
  before_each(function()
    p = runnel.open()
    t = p:table("t", { {"pk","int"}, {"v1","int", null = true}, {"v2","int", null = true}, key = "pk" })
  end)
  after_each(function() p:close() end)

  it("gives the seed's batch one preimage, two deltas and one postimage with both applied", function()
    local log = rows_of(t:cdc{ preimage = true, postimage = true })
    t:insert{ pk = 0, v1 = 0, v2 = 0 }
    H.clear(log)
    p:batch(function() t:update{ pk = 0, v1 = 1 }; t:update{ pk = 0, v2 = 2 } end)
    assert.same({ "0 1 pk=0 v1=0 v2=0", "1 1 pk=0 v1=1", "1 1 pk=0 v2=2", "9 1 pk=0 v1=1 v2=2" }, log)
  end)

  it("numbers log rows with the group's seq and batch positions 0, 1, 2", function()
    local seen = {}
    t:cdc{ preimage = true, postimage = true }:sink(function(_, row, _, info)
      seen[#seen + 1] = { row["cdc$seq"], row["cdc$batch_seq_no"], info.id }
    end)
    t:insert{ pk = 1 }
    t:insert{ pk = 2 }
    assert.same({ { 1, 0, 1 }, { 1, 1, 2 }, { 1, 2, 3 }, { 2, 0, 4 }, { 2, 1, 5 }, { 2, 2, 6 } }, seen)
  end)

  it("gives a row absent before the group a preimage of its key and nulls", function()
    local log = rows_of(t:cdc{ preimage = true })
    t:insert{ pk = 3, v1 = 1, v2 = 2 }
    assert.same({ "0 1 pk=3", "2 1 pk=3 v1=1 v2=2" }, log)
  end)

  it("shows only modified columns with preimage = true and every column with 'full'", function()
    t:insert{ pk = 0, v1 = 10, v2 = 20 }
    local some, full = rows_of(t:cdc{ preimage = true }), rows_of(t:cdc{ preimage = "full" })
    t:update{ pk = 0, v2 = 21 }
    assert.same({ "0 1 pk=0 v2=20", "1 1 pk=0 v2=21" }, some)
    assert.same({ "0 1 pk=0 v1=10 v2=20", "1 1 pk=0 v2=21" }, full)
  end)

  it("gives insert-then-delete in one group no postimage", function()
    local log = rows_of(t:cdc{ preimage = true, postimage = true })
    p:batch(function() t:insert{ pk = 5, v1 = 1 }; t:delete{ pk = 5 } end)
    assert.same({ "0 1 pk=5", "2 1 pk=5 v1=1", "3 1 pk=5" }, log)
  end)

  it("gives delete-then-insert of one key one preimage, two deltas and one postimage under one id", function()
    t:insert{ pk = 0, v1 = 1, v2 = 2 }
    local log = rows_of(t:cdc{ preimage = true, postimage = true })
    p:batch(function() t:delete{ pk = 0 }; t:insert{ pk = 0, v1 = 9 } end)
    assert.same({ "0 1 pk=0 v1=1 v2=2", "3 1 pk=0", "2 1 pk=0 v1=9", "9 1 pk=0 v1=9" }, log)
  end)

  it("marks a column an update set to null", function()
    t:insert{ pk = 0, v1 = 1, v2 = 2 }
    local log = rows_of(t:cdc{})
    t:update{ pk = 0, v1 = runnel.null, v2 = 3 }
    assert.same({ "1 1 pk=0 v2=3 del:v1" }, log)
  end)

  it("reflects the previous group in the next group's preimage", function()
    local log = rows_of(t:cdc{ preimage = "full" })
    t:insert{ pk = 0, v1 = 1 }
    t:update{ pk = 0, v1 = 2 }
    assert.same({ "0 1 pk=0", "2 1 pk=0 v1=1", "0 1 pk=0 v1=1", "1 1 pk=0 v1=2" }, log)
  end)

  it("orders preimages of every touched row first, deltas in order, postimages last", function()
    local log = rows_of(t:cdc{ preimage = true, postimage = true })
    p:batch(function() t:insert{ pk = 1 }; t:insert{ pk = 2 }; t:update{ pk = 1, v1 = 5 } end)
    assert.same({ "0 1 pk=1", "0 2 pk=2", "2 1 pk=1", "2 2 pk=2", "1 1 pk=1 v1=5", "9 1 pk=1 v1=5", "9 2 pk=2" }, log)
  end)

  it("keys a keyless table's images by row id", function()
    local k = p:table("k", { {"msg","string"}, {"n","int", null = true} })
    local seen = {}
    k:cdc{ preimage = true, postimage = true }:sink(function(_, row)
      seen[#seen + 1] = ("%d %d %s %s"):format(row["cdc$operation"], row["cdc$id"], tostring(row.msg), tostring(row.n))
    end)
    k:insert{ msg = "a" }
    p:batch(function() k:update({ msg = "a" }, { msg = "a", n = 1 }); k:delete{ msg = "a", n = 1 } end)
    assert.same({ "0 1 nil nil", "2 1 a nil", "9 1 a nil",
                  "0 1 a nil", "1 1 nil 1", "3 1 nil nil" }, seen)
  end)

  it("works on a filtered relation: a row leaving the filter is a delete there", function()
    local big = t:filter(function(r) return (r.v1 or 0) >= 10 end, "big")
    local log = rows_of(big:cdc{ postimage = true })
    t:insert{ pk = 1, v1 = 10 }
    t:update{ pk = 1, v1 = 5 }
    t:update{ pk = 1, v1 = 50 }
    assert.same({ "2 1 pk=1 v1=10", "9 1 pk=1 v1=10", "3 1 pk=1", "2 1 pk=1 v1=50", "9 1 pk=1 v1=50" }, log)
  end)

  it("is a stream that can be filtered and mapped, keeping its cdc$ names", function()
    local deltas = t:cdc{ preimage = true, postimage = true }
                    :filter(function(r) return r["cdc$operation"] ~= 0 and r["cdc$operation"] ~= 9 end)
                    :map(function(r) return { op = r["cdc$operation"], pk = r.pk } end, { {"op","int"}, {"pk","int"} })
    local log = H.record(deltas)
    t:insert{ pk = 1 }
    t:delete{ pk = 1 }
    assert.same({ { "INSERT", 2, { op = 2, pk = 1 } }, { "INSERT", 5, { op = 3, pk = 1 } } }, log)
    assert.equal("cdc", t:cdc{}:schema().kind)
  end)

  it("refuses a stream as its input and bad options", function()
    local s = p:stream("s", { {"x","int"} })
    assert.equal("s.cdc: cdc needs a table-like relation (a table, or a filter or map of one); s is a stream",
                 H.error_of(s.cdc, s, {}))
    assert.equal('cdc: preimage must be false, true or "full", got yes', H.error_of(t.cdc, t, { preimage = "yes" }))
    assert.equal('cdc: format must be "log", "debezium" or "flink", got avro', H.error_of(t.cdc, t, { format = "avro" }))
  end)

  it("emits nothing for a rolled-back group and numbers events across groups and reopens", function()
    local dir = H.tmpdir()
    local q = runnel.open(dir)
    local u = q:table("u", { {"k","int"}, key = "k" })
    local ids = {}
    u:cdc{}:sink(function(_, _, _, info) ids[#ids + 1] = info.id end)
    u:insert{ k = 1 }
    pcall(q.batch, q, function() u:insert{ k = 2 }; error("no") end)
    u:insert{ k = 3 }
    q:close()
    q = runnel.open(dir)
    u = q:table("u", { {"k","int"}, key = "k" })
    u:cdc{}:sink(function(_, _, _, info) ids[#ids + 1] = info.id end)
    u:insert{ k = 4 }
    assert.same({ 1, 2, 3 }, ids)
    q:close()
    H.cleanup()
  end)
end)

describe("cdc{ format = 'debezium' }", function()
  it("gives one event per change with before and after around that change", function()
    local p = runnel.open()
    local t = p:table("t", { {"pk","int"}, {"v","int", null = true}, key = "pk" })
    local log = H.record(t:cdc{ format = "debezium" })
    p:batch(function() t:insert{ pk = 1, v = 1 }; t:update{ pk = 1, v = 2 }; t:update{ pk = 1, v = 3 } end)
    t:delete{ pk = 1 }
    local events = {}
    for i, e in ipairs(log) do events[i] = e[3] end
    assert.same({
      { op = "c", after = { pk = 1, v = 1 }, source = { relation = "t", seq = 1, id = 1 } },
      { op = "u", before = { pk = 1, v = 1 }, after = { pk = 1, v = 2 }, source = { relation = "t", seq = 1, id = 1 } },
      { op = "u", before = { pk = 1, v = 2 }, after = { pk = 1, v = 3 }, source = { relation = "t", seq = 1, id = 1 } },
      { op = "d", before = { pk = 1, v = 3 }, source = { relation = "t", seq = 2, id = 1 } },
    }, events)
    p:close()
  end)
end)

describe("cdc{ format = 'flink' }", function()
  it("gives +I, -U/+U pairs and -D", function()
    local p = runnel.open()
    local t = p:table("t", { {"pk","int"}, {"v","int"}, key = "pk" })
    local log = H.record(t:cdc{ format = "flink" })
    t:insert{ pk = 1, v = 1 }
    t:update{ pk = 1, v = 2 }
    t:delete{ pk = 1 }
    local rows = {}
    for i, e in ipairs(log) do rows[i] = e[3].rowkind .. " " .. e[3].pk .. " " .. e[3].v end
    assert.same({ "+I 1 1", "-U 1 1", "+U 1 2", "-D 1 2" }, rows)
    p:close()
  end)
end)

describe("cdc under random groups", function()
  it("replays its deltas onto an empty map into the table, and its postimages equal the rows", function()
    local p = runnel.open{ sync = false }
    local t = p:table("t", { {"pk","int"}, {"v1","int", null = true}, {"v2","string", null = true},
                             {"n","int", default = 0}, key = "pk" })
    local cdc = t:cdc{ preimage = "full", postimage = true }
    local replay, posts = {}, {}
    local cols = { "pk", "v1", "v2", "n" }
    cdc:sink(function(_, row)
      local op, pk = row["cdc$operation"], row.pk
      if op == 2 then
        replay[pk] = {}
        for _, c in ipairs(cols) do replay[pk][c] = row[c] end
      elseif op == 1 then
        for _, c in ipairs(cols) do
          if row[c] ~= nil then replay[pk][c] = row[c] end
          if row["cdc$deleted_" .. c] then replay[pk][c] = nil end
        end
      elseif op == 3 then
        replay[pk] = nil
      elseif op == 9 then
        posts[#posts + 1] = { pk = pk, row = { pk = row.pk, v1 = row.v1, v2 = row.v2, n = row.n } }
      end
    end)
    math.randomseed(20261129)
    local function maybe(v) if math.random() < 0.3 then return runnel.null end return v end
    for _ = 1, 300 do
      posts = {}
      p:begin()
      for _ = 1, math.random(1, 12) do
        local pk = math.random(1, 15)
        local r = math.random()
        local exists = t:get(pk) ~= nil
        if not exists then
          t:insert{ pk = pk, v1 = maybe(math.random(0, 5)), v2 = maybe(("s%d"):format(math.random(0, 3))) }
        elseif r < 0.5 then
          t:update{ pk = pk, v1 = maybe(math.random(0, 5)), n = math.random(0, 2) }
        elseif r < 0.7 then
          t:upsert{ pk = pk, v2 = maybe("u" .. math.random(0, 3)) }
        else
          t:delete{ pk = pk }
        end
      end
      p:commit()
      for _, post in ipairs(posts) do assert.same(post.row, t:get(post.pk)) end
      local current = {}
      for row in t:rows() do current[row.pk] = row end
      assert.same(current, replay)
    end
    p:close()
  end)
end)
