-- p:batch(fn) when fn catches the error of one of its changes (DESIGN §5,
-- §12; docs/api.md, p:batch). The failing change rolled the batch's group
-- back at once, and fn went on: each later change found no group open and
-- was committed as a group of its own (sinks saw them, p:seq() moved),
-- then the batch raised "commit: no group is open" — fn's changes were
-- committed in part although the batch raised. A p:begin() in fn after it
-- opened a group the batch then committed: the batch returned a seq and
-- the changes before the caught error were silently gone. Now a change,
-- p:begin() or p:run() inside fn after its group is gone raises, and the
-- batch raises saying why; nothing fn did is committed.
local runnel = require "runnel"
local H = require "helper"

describe("p:batch whose fn caught a change's error", function()
  local p, t, seen
  local function ids() return H.ids_text(t) end
  before_each(function()
    p = runnel.open()
    t = p:table("t", { {"id","int"}, key = "id" })
    t:insert{ id = 1 }
    seen = {}
    t:sink(function(verb, row, old, info) seen[#seen + 1] = verb .. " " .. (row or old).id .. " @" .. info.seq end)
  end)
  after_each(function() p:close() H.cleanup() end)

  it("commits none of fn's later changes: each raises, naming the relation and the method", function()
    local errs = {}
    local err = H.error_of(p.batch, p, function()
      t:insert{ id = 2 }
      assert.is_false(pcall(t.insert, t, { id = 1 })) -- a duplicate: the batch's group is rolled back
      for _, call in ipairs{ function() t:insert{ id = 3 } end, function() t:upsert{ id = 4 } end,
                             function() t:update{ id = 1 } end, function() t:delete{ id = 1 } end } do
        local ok, e = pcall(call)
        errs[#errs + 1] = ok and "committed" or e:gsub("^[^:]*:%d+: ", "")
      end
    end)
    local lost = ": the group of p:batch(fn) was rolled back by an error fn caught; "
                 .. "let that error raise out of fn (this change would be committed on its own)"
    assert.same({ "t: insert" .. lost, "t: upsert" .. lost, "t: update" .. lost, "t: delete" .. lost }, errs)
    assert.equal("batch: the group was rolled back by an error fn caught; nothing fn did is committed", err)
    assert.equal("1", ids())
    assert.equal(1, p:seq())
    assert.same({}, seen)
    assert.is_false(p:in_group())
  end)

  it("refuses a p:begin() or a p:run() in fn after it, and the batch raises", function()
    local path = H.tmpdir() .. "/in.ndjson"
    H.write(path, '{"rel":"t","op":"insert","row":{"id":7}}\n')
    local begun, ran
    local err = H.error_of(p.batch, p, function()
      t:insert{ id = 2 }
      pcall(t.insert, t, { id = 1 })
      begun = select(2, pcall(p.begin, p))
      ran = select(2, pcall(p.run, p, runnel.ndjson_source(path)))
      pcall(t.insert, t, { id = 3 })
    end)
    assert.equal("begin: inside p:batch(fn) the group is the batch's: it commits when fn returns; raise an error "
                 .. "in fn to roll it back", (begun:gsub("^[^:]*:%d+: ", "")))
    assert.equal("run: inside p:batch(fn) the group is the batch's: it commits when fn returns; raise an error "
                 .. "in fn to roll it back", (ran:gsub("^[^:]*:%d+: ", "")))
    assert.equal("batch: the group was rolled back by an error fn caught; nothing fn did is committed", err)
    assert.equal("1", ids())
    assert.equal(1, p:seq())
    assert.same({}, seen)
  end)

  it("leaves changes after the batch, and the next batch, as before", function()
    assert.is_false(pcall(p.batch, p, function() pcall(t.insert, t, { id = 1 }) end))
    t:insert{ id = 5 }
    assert.equal(3, p:batch(function() t:insert{ id = 6 } end))
    p:begin(); t:insert{ id = 8 }; p:commit()
    assert.equal("1,5,6,8", ids())
    assert.same({ "INSERT 5 @2", "INSERT 6 @3", "INSERT 8 @4" }, seen)
  end)
end)
