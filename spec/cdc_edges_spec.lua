-- CDC images at their edges (adversarial review, DESIGN §7): no-op
-- updates, rolled-back and carried groups, a cdc over an aggregate and a
-- keyed map whose key changes, a group too big to keep its rows' offsets,
-- and input columns named like the format's own.
local runnel = require "runnel"
local H = require "helper"

-- Log rows as "op id k=v …" over the columns cols (cdc$deleted_ flags as del:c).
local function log_of(rel, cols)
  local out = {}
  rel:sink(function(_, row)
    local parts = { tostring(row["cdc$operation"]), tostring(row["cdc$id"]) }
    for _, c in ipairs(cols) do
      if row[c] ~= nil then parts[#parts + 1] = c .. "=" .. tostring(row[c]) end
      if row["cdc$deleted_" .. c] then parts[#parts + 1] = "del:" .. c end
    end
    out[#out + 1] = table.concat(parts, " ")
  end)
  return out
end

describe("cdc edges", function()
  teardown(H.cleanup)

  it("writes nothing for an update that changes nothing, in any format", function()
    local p = runnel.open()
    local t = p:table("t", { {"pk","int"}, {"v","int", null = true}, key = "pk" })
    t:insert{ pk = 1, v = 5 }
    local log, deb, fl = H.record(t:cdc{ preimage = "full", postimage = true }), H.record(t:cdc{ format = "debezium" }),
                         H.record(t:cdc{ format = "flink" })
    t:update{ pk = 1, v = 5 }
    t:upsert{ pk = 1, v = 5 }
    p:batch(function() t:update{ pk = 1, v = 6 }; t:update{ pk = 1, v = 5 } end)  -- back where it was: two deltas
    assert.equal(4, #log)                                                          -- pre, two updates, post
    assert.equal(2, #deb)
    assert.equal(4, #fl)
    p:close()
  end)

  it("numbers a carried group's rows from 0 and uses no id of a rolled-back group, across a reopen", function()
    local dir = H.tmpdir()
    local seen = {}
    local function open()
      local p = runnel.open{ path = dir, sync = false }
      local t = p:table("t", { {"pk","int"}, {"v","int", null = true}, key = "pk" })
      t:cdc{ preimage = "full", postimage = true }:sink(function(_, row, _, info)
        seen[#seen + 1] = ("%d:%d.%d op%d"):format(info.id, row["cdc$seq"], row["cdc$batch_seq_no"], row["cdc$operation"])
      end)
      return p, t
    end
    local p, t = open()
    t:insert{ pk = 1, v = 1 }
    local ok = pcall(p.batch, p, function() t:update{ pk = 1, v = 2 }; t:insert{ pk = 2 }; error("no") end)
    assert.is_false(ok)
    p:batch(function() t:update{ pk = 1, v = 3 }; t:delete{ pk = 1 } end)
    p:close()
    p, t = open()
    t:insert{ pk = 1 }
    p:close()
    assert.same({ "1:1.0 op0", "2:1.1 op2", "3:1.2 op9",
                  "4:2.0 op0", "5:2.1 op1", "6:2.2 op3",
                  "7:3.0 op0", "8:3.1 op2", "9:3.2 op9" }, seen)
  end)

  it("follows a row moving between aggregate groups: the old group's delete, the new one's insert", function()
    local p = runnel.open()
    local t = p:table("t", { {"pk","int"}, {"g","string"}, {"v","int", null = true}, key = "pk" })
    local agg = t:aggregate{ by = "g", n = runnel.count(), lo = runnel.min("v") }
    t:insert{ pk = 1, g = "a", v = 5 }
    t:insert{ pk = 2, g = "a", v = 3 }
    local log = log_of(agg:cdc{ preimage = true, postimage = true }, { "g", "n", "lo" })
    local fl = H.record(agg:cdc{ format = "flink" })
    t:update{ pk = 2, g = "b" }                          -- a keeps one row, its min goes back to 5
    t:delete{ pk = 1 }                                   -- a empties
    assert.same({ "0 1 g=a n=2 lo=3", "0 2 g=b", "1 1 g=a n=1 lo=5", "2 2 g=b n=1 lo=3",
                  "9 1 g=a n=1 lo=5", "9 2 g=b n=1 lo=3",
                  "0 1 g=a n=1 lo=5", "3 1 g=a" }, log)
    local kinds = {}
    for i, e in ipairs(fl) do kinds[i] = e[3].rowkind .. " " .. e[3].g .. " " .. e[3].n end
    assert.same({ "-U a 2", "+U a 1", "+I b 1", "-D a 1" }, kinds)
    p:close()
  end)

  it("shows a keyed map's change of key as the old key's delete and the new key's insert, in every format", function()
    local p = runnel.open()
    local t = p:table("t", { {"pk","int"}, {"code","string"}, {"n","int"}, key = "pk" })
    local by_code = t:map(function(r) return { code = r.code, pk = r.pk, n = r.n } end,
                          { {"code","string"}, {"pk","int"}, {"n","int"}, key = "code" })
    local log = log_of(by_code:cdc{ preimage = true, postimage = true }, { "code", "pk", "n" })
    local deb, fl = H.record(by_code:cdc{ format = "debezium" }), H.record(by_code:cdc{ format = "flink" })
    t:insert{ pk = 1, code = "x", n = 1 }
    H.clear(log); H.clear(deb); H.clear(fl)
    t:update{ pk = 1, code = "y" }                       -- the map's key moves, under the input's id
    t:update{ pk = 1, n = 2 }                            -- an update in place stays one
    -- a consumer keyed by code never sees an update of a code it does not hold
    -- the map gives the move as a delete and an insert (every column changed):
    -- the preimage has them all, as a table's delete and re-insert would
    assert.same({ "0 1 code=x pk=1 n=1", "3 1 code=x", "2 1 code=y pk=1 n=1", "9 1 code=y pk=1 n=1",
                  "0 1 code=y n=1", "1 1 code=y n=2", "9 1 code=y pk=1 n=2" }, log)
    local ops = {}
    for i, e in ipairs(deb) do
      local r = e[3]
      ops[i] = r.op .. " " .. (r.before and r.before.code or "-") .. " " .. (r.after and r.after.code or "-")
    end
    assert.same({ "d x -", "c - y", "u y y" }, ops)
    local kinds = {}
    for i, e in ipairs(fl) do kinds[i] = e[3].rowkind .. " " .. e[3].code .. " " .. e[3].n end
    assert.same({ "-D x 1", "+I y 1", "-U y 1", "+U y 2" }, kinds)
    p:close()
  end)

  it("gives a group too big to keep its rows' offsets the same images (200 columns, 3000 updates)", function()
    local p = runnel.open{ sync = false }
    local cols = { {"pk","int"}, key = "pk" }
    for i = 1, 200 do cols[#cols + 1] = { "c" .. i, "int", null = true } end
    local t = p:table("t", cols)
    local pre, post, deltas = {}, {}, 0
    t:cdc{ preimage = true, postimage = true }:sink(function(_, r)
      local op = r["cdc$operation"]
      if op == 0 then pre[r.pk] = ("%s %s %s"):format(tostring(r.c1), tostring(r.c2), tostring(r.c200))
      elseif op == 9 then post[r.pk] = ("%s %s %s"):format(tostring(r.c1), tostring(r.c2), tostring(r.c200))
      elseif op == 1 then deltas = deltas + 1 end
    end)
    p:begin()
    for k = 1, 1500 do
      local r = { pk = k }
      for i = 1, 200 do r["c" .. i] = k end
      t:insert(r)
    end
    p:commit()
    pre, post = {}, {}
    p:begin()
    for k = 1, 1500 do t:update{ pk = k, c1 = k + 1 }; t:update{ pk = k, c200 = runnel.null } end
    p:commit()
    assert.equal(3000, deltas)
    for _, k in ipairs{ 1, 750, 1500 } do
      assert.equal(("%d nil %d"):format(k, k), pre[k])               -- only the columns the group changed
      assert.equal(("%d %d nil"):format(k + 1, k), post[k])
    end
    p:close()
  end)

  it("refuses an input column named like a column its format adds, saying so", function()
    local p = runnel.open()
    local t = p:table("t", { {"pk","int"}, {"cdc$seq","int", null = true}, {"rowkind","string", null = true},
                             {"x","int", null = true}, {"cdc$deleted_x","bool", null = true}, key = "pk" })
    assert.equal('t.cdc: column "cdc$seq" of t has the name of a column the log format adds: rename it, or choose another format',
                 H.error_of(t.cdc, t, {}))
    assert.equal('t.cdc: column "rowkind" of t has the name of a column the flink format adds: rename it, or choose another format',
                 H.error_of(t.cdc, t, { format = "flink" }))
    local u = p:table("u", { {"pk","int"}, {"x","int", null = true}, {"cdc$deleted_x","bool", null = true}, key = "pk" })
    assert.equal('u.cdc: column "cdc$deleted_x" of u has the name of a column the log format adds: rename it, or choose another format',
                 H.error_of(u.cdc, u, {}))
    local d = H.record(t:cdc{ format = "debezium" })          -- debezium nests the row: nothing clashes
    t:insert{ pk = 1, ["cdc$seq"] = 7 }
    assert.equal(7, d[1][3].after["cdc$seq"])
    p:close()
  end)
end)
