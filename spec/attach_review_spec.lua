-- runnel.attach and runnel query under hostile inputs and call sequences
-- (the review of the reading code): an attach kept while its relation is
-- evolved, dropped or declared again by the pipeline that writes it,
-- damaged records, odd keys.
local runnel = require "runnel"
local H = require "helper"

local bin = H.runnel_bin

-- Runs lua text as a script in another process (runnel run), asserting it
-- succeeded.
local function elsewhere(text)
  local script = os.tmpname() .. ".lua"
  H.write(script, "local runnel = require 'runnel'\n" .. text)
  local out, err, code = H.sh(("%s run %s"):format(bin, script))
  os.remove(script)
  assert(code == 0, out .. err)
end

local function rows_of(att)
  local out = {}
  for row in att:rows() do out[#out + 1] = row end
  return out
end

describe("an attach kept while its relation changes", function()
  after_each(H.cleanup)

  local function v1(dir)
    elsewhere(([[
      local p = runnel.open{ path = %q, notes = false }
      local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
      t:insert{ k = 1, v = 10 }
      t:insert{ k = 2, v = 20 }
      p:close()
    ]]):format(dir))
  end

  it("refuses, saying so, once another process added a column (it read rows as empty tables)", function()
    local dir = H.tmpdir()
    v1(dir)
    local att = runnel.attach(dir, "t")
    assert.are.same({ { k = 1, v = 10 }, { k = 2, v = 20 } }, rows_of(att))
    elsewhere(([[
      local p = runnel.open{ path = %q, notes = false }
      local t = p:table("t", { {"k","int"}, {"v","int"}, {"x","string", default = "d"}, key = "k" })
      t:insert{ k = 3, v = 30, x = "new" }
      p:close()
    ]]):format(dir))
    local msg = 'attach t: "t" was declared again with other columns or another kind since it was attached ' ..
                '(attach it again to read it as it is now)'
    assert.are.equal(msg, H.error_of(function() return rows_of(att) end))
    assert.are.equal(msg, H.error_of(att.get, att, 3))
    assert.are.equal(msg, H.error_of(att.count, att))
    local again = runnel.attach(dir, "t")
    assert.are.same({ k = 3, v = 30, x = "new" }, again:get(3))
    assert.are.same({ k = 1, v = 10, x = "d" }, again:get(1))
  end)

  it("refuses once another process dropped it and declared it with other columns (it read them by the old names)",
     function()
    local dir = H.tmpdir()
    v1(dir)
    local att = runnel.attach(dir, "t")
    elsewhere(([[
      local p = runnel.open{ path = %q, notes = false }
      p:drop("t")
      local t = p:table("t", { {"k","string"}, {"w","string"}, key = "k" })
      t:insert{ k = "a", w = "hello" }
      p:close()
    ]]):format(dir))
    assert.matches('"t" was declared again with other columns', H.error_of(function() return rows_of(att) end))
    assert.are.same({ { k = "a", w = "hello" } }, rows_of(runnel.attach(dir, "t")))
  end)

  it("says the relation was dropped when the pipeline it reads through dropped it (it said Invalid argument)",
     function()
    local dir = H.tmpdir()
    v1(dir)
    local p = runnel.open{ path = dir, notes = false }
    local att = runnel.attach(dir, "t")
    assert.are.equal(2, att:count())
    p:drop("t")
    assert.are.equal('attach t: "t" was dropped from the state since it was attached (attach again once it is ' ..
                     'declared again)', H.error_of(att.count, att))
    assert.matches("was dropped from the state", H.error_of(att.get, att, 1))
    local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
    t:insert{ k = 7, v = 70 }
    assert.are.same({ { k = 7, v = 70 } }, rows_of(att)) -- the same columns again: read as they are now
    p:close()
  end)
end)

describe("runnel query's keys", function()
  after_each(H.cleanup)

  local function state()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir, notes = false }
    local codes = p:table("codes", { {"code","string"}, {"n","int"}, key = "code" })
    codes:insert{ code = "42", n = 1 }
    codes:insert{ code = "007", n = 2 }
    local flags = p:table("flags", { {"on","bool"}, {"n","int"}, key = "on" })
    flags:insert{ on = true, n = 3 }
    p:close()
    return dir
  end

  it("are read as the key column's type: a string key that looks like a number stays a string", function()
    local dir = state()
    local out, err, code = H.sh(("%s query %s codes 42 007 --format ndjson"):format(bin, dir))
    assert.are.equal("", err)
    assert.are.equal(0, code)
    assert.are.equal('{"code":"42","n":1}\n{"code":"007","n":2}\n', out)
    out, err = H.sh(("%s query %s flags true --format csv"):format(bin, dir))
    assert.are.equal("", err)
    assert.are.equal("on,n\ntrue,3\n", out)
  end)

  it("of the wrong type name the relation, the read and the column", function()
    local dir = state()
    local _, err, code = H.sh(("%s query %s flags maybe"):format(bin, dir))
    assert.are_not.equal(0, code)
    assert.are.equal('runnel: attach flags: get: column "on": expected bool, got string\n', err)
    local att = runnel.attach(dir, "codes")
    assert.are.equal('attach codes: get: column "code": expected string, got number', H.error_of(att.get, att, 42))
    assert.are.equal('attach codes: get: key column "code" is missing', H.error_of(att.get, att, {}))
    -- a key table names columns, as t:get's does (a misspelt one was ignored)
    assert.are.equal('attach codes: get: unknown column "cod"', H.error_of(att.get, att, { code = "42", cod = "x" }))
    assert.are.equal('attach codes: get: a key table is keyed by column names, got a number key',
                     H.error_of(att.get, att, { "42" }))
    assert.are.same({ code = "42", n = 1 }, att:get{ code = "42", n = 5 }) -- a row as its key: other columns unread
  end)
end)

describe("runnel query of several keys while another process writes", function()
  after_each(H.cleanup)

  -- Each group of the writer moves i from key 1 to key 2 (v = i and -i):
  -- rows of one group sum to 0. A get per key read each key in its own
  -- read transaction, and about one query in seven showed two groups.
  it("reads them in one read transaction: whole groups only", function()
    local dir = H.tmpdir()
    local ready, stop = dir .. ".ready", dir .. ".stop"
    local writer = os.tmpname() .. ".lua"
    H.write(writer, ([[
      local runnel = require "runnel"
      local p = runnel.open{ path = %q, notes = false }
      local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
      t:insert{ k = 1, v = 0 }
      t:insert{ k = 2, v = 0 }
      io.open(%q, "w"):close()
      for i = 1, 200000 do
        p:begin()
        t:update{ k = 1, v = i }
        t:update{ k = 2, v = -i }
        p:commit()
        if i %% 50 == 0 and io.open(%q) then break end
      end
      p:close()
    ]]):format(dir, ready, stop))
    local proc = io.popen(("%s run %s 2>&1"):format(bin, writer))
    local deadline = os.time() + 20
    while not io.open(ready) and os.time() < deadline do os.execute("sleep 0.05") end
    local torn, queries = 0, 0
    for _ = 1, 60 do
      local out, err = H.sh(("%s query %s t 1 2 --format ndjson"):format(bin, dir))
      assert.are.equal("", err)
      local sum, rows = 0, 0
      for v in out:gmatch('"v":(%-?%d+)') do sum, rows = sum + tonumber(v), rows + 1 end
      assert.are.equal(2, rows)
      if sum ~= 0 then torn = torn + 1 end
      queries = queries + 1
    end
    io.open(stop, "w"):close()
    local said = proc:read("a")
    proc:close()
    os.remove(writer)
    os.remove(ready)
    os.remove(stop)
    assert.are.equal("", said)
    assert.are.equal(0, torn, ("%d of %d queries showed two groups"):format(torn, queries))
  end)
end)

describe("an attach reading through its owner's environment", function()
  after_each(H.cleanup)

  it("reads its own relation after the owner dropped it and another relation took its handle (it read that one)",
     function()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir, notes = false }
    local t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
    t:insert{ k = 1, v = 10 }
    p:close()
    p = runnel.open{ path = dir, notes = false }
    local att = runnel.attach(dir, "t")
    assert.are.same({ { k = 1, v = 10 } }, rows_of(att))
    p:drop("t")
    local z = p:table("z", { {"k","int"}, {"v","int"}, key = "k" })
    z:insert{ k = 9, v = 90 }
    t = p:table("t", { {"k","int"}, {"v","int"}, key = "k" })
    t:insert{ k = 7, v = 70 }
    assert.are.same({ { k = 7, v = 70 } }, rows_of(att))
    assert.is_nil(att:get(9))
    assert.are.same({ k = 7, v = 70 }, att:get(7))
    assert.are.equal(1, att:count())
    p:close()
  end)
end)

describe("runnel query of a relation without a key", function()
  after_each(H.cleanup)

  it("given a KEY says there is no key to read by (it said the key is 0 columns ())", function()
    local dir = H.tmpdir()
    local p = runnel.open{ path = dir, notes = false }
    p:table("ev", { {"a","int"} }):insert{ a = 1 }
    p:close()
    local _, err, code = H.sh(("%s query %s ev 1"):format(bin, dir))
    assert.are_not.equal(0, code)
    assert.are.equal("runnel: query: ev has no key to read by: leave out KEY to print its rows (--limit N for the " ..
                     "first N)\n", err)
  end)
end)
