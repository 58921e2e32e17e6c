-- A state that lives through deploys (issue 14): dropping relations,
-- listing the undeclared ones, reading a state from outside (runnel query,
-- runnel.attach of tables), runnel inspect listing every relation.
local runnel = require "runnel"
local H = require "helper"

local bin = H.runnel_bin

local function quiet(dir) return runnel.open{ path = dir, notes = false } end

local function v1(dir)
  local p = quiet(dir)
  local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
  local players = p:table("players", { {"id","int"}, {"name","string"}, {"team","int", null = true}, key = "id" })
  local roster = players:join(teams, { on = "team", kind = "left", name = "roster" })
  local per_team = players:aggregate{ by = "team", n = runnel.count(), name = "per_team" }
  teams:insert{ id = 7, name = "red" }
  players:insert{ id = 1, name = "ann", team = 7 }
  players:insert{ id = 2, name = "bob" }
  return p, teams, players, roster, per_team
end

describe("p:drop", function()
  after_each(H.cleanup)

  it("refuses a relation other declared relations read, naming them", function()
    local dir = H.tmpdir()
    local p = v1(dir)
    assert.equal('drop "players": these declared relations read it: "roster", "per_team" (drop them first)',
                 H.error_of(p.drop, p, "players"))
    assert.equal('drop "teams": a declared relation reads it: "roster" (drop it first)',
                 H.error_of(p.drop, p, "teams"))
    assert.equal('drop "roster": it is declared in this pipeline; drop it before declaring it (at the start of the '
                 .. 'new deploy), or with runnel drop while no pipeline has the state open',
                 H.error_of(p.drop, p, "roster"))
    p:close()
  end)

  it("removes an undeclared relation and its state; the next declaration starts it empty", function()
    local dir = H.tmpdir()
    local p = v1(dir)
    p:close()
    p = quiet(dir)
    p:drop("per_team")
    p:drop("roster")
    assert.equal(('drop: the state at %s holds no relation or store "roster"'):format(dir), H.error_of(p.drop, p, "roster"))
    local players = p:table("players", { {"id","int"}, {"name","string"}, {"team","int", null = true}, key = "id" })
    -- declared again, even as another kind: nothing of the old one is left
    local per_team = players:aggregate{ by = "name", n = runnel.count(), name = "per_team" }
    assert.same({ name = "ann", n = 1 }, per_team:get("ann"))
    assert.same({ "teams" }, p:undeclared())
    p:close()
    local out = H.sh(("%s inspect %s"):format(bin, dir))
    assert.is_nil(out:find("roster", 1, true))
  end)

  it("drops a store of the name only when no relation has it (they are named apart)", function()
    local dir = H.tmpdir()
    local p = quiet(dir)
    local t = p:table("totals", { {"k","string"}, {"v","int"}, key = "k" })
    t:sink(runnel.store("totals"))
    t:insert{ k = "a", v = 1 }
    p:close()
    p = quiet(dir)
    p:drop("totals") -- the relation
    local att = runnel.attach(dir, "totals") -- the store is still there
    assert.same({ k = "a", v = 1 }, att:get("a"))
    att:close()
    p:drop("totals") -- now the store
    assert.matches('no relation or store "totals"', select(2, pcall(runnel.attach, dir, "totals")), 1, true)
    p:close()
  end)

  it("runnel drop STATE NAME does the same from the shell", function()
    local dir = H.tmpdir()
    local p = v1(dir)
    p:close()
    local out, err, code = H.sh(("%s drop %s roster"):format(bin, dir))
    assert.same({ ("dropped roster from %s\n"):format(dir), "", 0 }, { out, err, code })
    out, err, code = H.sh(("%s drop %s roster"):format(bin, dir))
    assert.same({ "", ('runnel: drop: the state at %s holds no relation or store "roster"\n'):format(dir), 1 },
                { out, err, code })
    out, err, code = H.sh(("%s drop %s/nowhere roster"):format(bin, dir))
    assert.same({ "", ("runnel: %s/nowhere: not a runnel state (no data.mdb)\n"):format(dir), 1 }, { out, err, code })
  end)
end)

describe("p:undeclared", function()
  after_each(H.cleanup)

  it("lists the stored relations not declared so far, and close says so in a line", function()
    local dir = H.tmpdir()
    local p = v1(dir)
    p:close()
    local lines = {}
    p = runnel.open{ path = dir, notes = function(line) lines[#lines + 1] = line end }
    assert.same({ "per_team", "players", "roster", "teams" }, p:undeclared())
    p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
    assert.same({ "per_team", "players", "roster" }, p:undeclared())
    p:close()
    assert.same({ "stored in the state but not declared: per_team, players, roster (p:drop(name) or runnel drop "
                  .. "STATE NAME removes one)" }, lines)
  end)
end)

describe("runnel.attach of a source table", function()
  after_each(H.cleanup)

  it("reads get, rows (an iterator with ids, and a list) and count", function()
    local dir = H.tmpdir()
    local p = v1(dir)
    p:table("notes", { {"text","string"} }):insert{ text = "x" }
    p:close()
    local att = runnel.attach(dir, "players")
    assert.same({ id = 1, name = "ann", team = 7 }, att:get(1))
    assert.is_nil(att:get(3))
    local seen = {}
    for row, id in att:rows() do seen[#seen + 1] = id .. ":" .. row.name end
    assert.same({ "1:ann", "2:bob" }, seen)
    assert.equal(2, #att:rows())
    assert.equal(2, att:count())
    att:close()
    local notes = runnel.attach(dir, "notes")
    assert.equal(1, notes:count())
    assert.matches("a keyless table has no key to read by", select(2, pcall(notes.get, notes, "x")), 1, true)
    notes:close()
    local roster = runnel.attach(dir, "roster") -- a join: its rows made from the state
    assert.same({ id = 2, name = "bob" }, roster:get(2))
    assert.equal(2, roster:count())
    assert.equal("join", select(2, roster:columns()))
    roster:close()
  end)
end)

describe("runnel query", function()
  after_each(H.cleanup)

  local function state()
    local dir = H.tmpdir()
    local p = v1(dir)
    p:close()
    return dir
  end

  it("prints a table as a grid, ndjson or csv, by key and with a limit", function()
    local dir = state()
    local out, err, code = H.sh(("%s query %s players"):format(bin, dir))
    assert.same({ " id | name | team\n----+------+------\n  1 | ann  |    7\n  2 | bob  |\n(2 rows)\n", "", 0 },
                { out, err, code })
    out = H.sh(("%s query %s players 2 1 5 --format ndjson"):format(bin, dir))
    assert.equal('{"id":2,"name":"bob","team":null}\n{"id":1,"name":"ann","team":7}\n', out)
    out = H.sh(("%s query %s players --format csv --limit 1"):format(bin, dir))
    assert.equal("id,name,team\n1,ann,7\n", out)
  end)

  it("says what it cannot read", function()
    local dir = state()
    local out, err, code = H.sh(("%s query %s nope"):format(bin, dir))
    assert.same({ "", ('runnel: attach %s: no relation or store "nope" there\n'):format(dir), 1 }, { out, err, code })
    out, err, code = H.sh(("%s query %s players --format xml"):format(bin, dir))
    assert.same({ "", "runnel: query: --format takes grid, ndjson or csv\n", 2 }, { out, err, code }) -- a usage error
  end)

  -- Runs a writer of table "pairs" (and what derive, Lua source declaring
  -- more relations of t) in another process; read(dir) is called 6 times
  -- while it writes. Each group inserts +i and -i: any whole group leaves
  -- the sum at 0.
  local function while_writing(derive, read)
    local dir = H.tmpdir()
    local stop, ready = dir .. "/../" .. dir:match("[^/]+$") .. ".stop", dir .. "/../" .. dir:match("[^/]+$") .. ".ready"
    local writer = os.tmpname() .. ".lua"
    local f = assert(io.open(writer, "w"))
    f:write(([[
      local runnel = require "runnel"
      local p = runnel.open{ path = %q, notes = false }
      local t = p:table("pairs", { {"id","int"}, {"v","int"}, key = "id" })
      %s
      io.open(%q, "w"):close()
      for i = 1, 20000 do
        p:begin()
        t:insert{ id = 2 * i, v = i }
        t:insert{ id = 2 * i + 1, v = -i }
        p:commit()
        if i %% 50 == 0 and io.open(%q) then break end
      end
      p:close()
    ]]):format(dir, derive, ready, stop))
    f:close()
    local proc = io.popen(("%s run %s 2>&1"):format(bin, writer))
    local deadline = os.time() + 20
    while not io.open(ready) and os.time() < deadline do os.execute("sleep 0.05") end
    local reads, most = 0, 0
    for _ = 1, 6 do
      most = math.max(most, read(dir))
      reads = reads + 1
    end
    io.open(stop, "w"):close()
    local said = proc:read("a")
    proc:close()
    os.remove(writer)
    os.remove(stop)
    os.remove(ready)
    assert.equal("", said)
    assert.equal(6, reads)
    assert.is_true(most > 0) -- it read while the writer wrote
  end

  -- The query's csv of rel: the sum of its last column and the rows.
  local function csv_sum(dir, rel)
    local out, err, code = H.sh(("%s query %s %s --format csv"):format(bin, dir, rel))
    assert.same({ "", 0 }, { err, code })
    local sum, rows = 0, 0
    for v in out:gmatch("\n[^\n]-(%-?%d+)%f[\n]") do sum, rows = sum + tonumber(v), rows + 1 end
    return sum, rows
  end

  it("reads whole groups of a state another process is writing", function()
    while_writing("", function(dir)
      local sum, rows = csv_sum(dir, "pairs")
      assert.equal(0, sum)
      assert.equal(0, rows % 2)
      return rows
    end)
  end)

  it("reads an aggregate's rows, computed from its groups, whole groups only, by query and by attach", function()
    local derive = [[
      t:aggregate{ n = runnel.count(), lo = runnel.min("v"), s = runnel.sum("v"), name = "total" }
      t:map(function(r) return { id = r.id, sign = r.v < 0 and "-" or "+", v = r.v, f = r.v / 2 } end,
            { {"id","int"}, {"sign","string"}, {"v","int"}, {"f","float"}, key = "id" })
       :aggregate{ by = "sign", n = runnel.count(), s = runnel.sum("v"), hi = runnel.max("v"), avg = runnel.avg("f"),
                   key = "sign", name = "by_sign" }
    ]]
    while_writing(derive, function(dir)
      local sum, rows = csv_sum(dir, "total") -- its last column: s
      assert.equal(0, sum)
      assert.equal(1, rows)
      local total = runnel.attach(dir, "total")
      local row = total:rows()[1]
      assert.equal(0, row.s)
      assert.equal(0, row.n % 2)
      assert.equal(-row.n // 2, row.lo)
      assert.matches("a keyless aggregate has no key to read by", select(2, pcall(total.get, total, 1)), 1, true)
      total:close()
      local by_sign = runnel.attach(dir, "by_sign")
      local sign = {} -- from one read transaction (each get reads its own)
      for r in by_sign:rows() do sign[r.sign] = r end
      local plus, minus = sign["+"], sign["-"]
      assert.equal("+", by_sign:get("+").sign)
      assert.equal("aggregate", select(2, by_sign:columns()))
      assert.equal(plus.n, minus.n)
      assert.equal(0, plus.s + minus.s)
      assert.equal(plus.n, plus.hi)
      assert.equal(plus.s / plus.n / 2, plus.avg)
      assert.equal(2, by_sign:count())
      by_sign:close()
      return row.n
    end)
  end)

  it("reads a join, its fused select and a top, whole groups only, by query and by attach", function()
    local derive = [[
      local signs = p:table("signs", { {"s","int"}, {"name","string"}, key = "s" })
      if signs:count() == 0 then signs:insert{ s = 1, name = "plus" }; signs:insert{ s = -1, name = "minus" } end
      local sign = function(r) return r.v < 0 and -1 or 1 end
      t:join(signs, { mapper = sign, name = "signed", kind = "left",
                      joiner = function(l, r) return { id = l.id, sign = r.name, v = l.v } end,
                      columns = { {"id","int"}, {"sign","string"}, {"v","int"}, key = "id" } })
      t:join(signs, { mapper = sign, name = "plain" }):select({ "id", "name", "v" }, "plain_v")
      t:top{ n = 3, order = { {"v", "desc"} }, name = "high" }
    ]]
    while_writing(derive, function(dir)
      local sum, rows = csv_sum(dir, "signed") -- its last column: v
      assert.equal(0, sum)
      assert.equal(0, rows % 2)
      local fused_sum, fused_rows = csv_sum(dir, "plain_v")
      assert.equal(0, fused_sum)
      assert.equal(0, fused_rows % 2)
      local plain = runnel.attach(dir, "plain") -- the join under the fused select
      local n, total, last = 0, 0, -1
      for row in plain:rows() do
        n, total = n + 1, total + row.v
        assert.equal(row.v < 0 and "minus" or "plus", row.name)
        assert.is_true(row.id > last) -- in key order
        last = row.id
      end
      assert.equal(0, total)
      assert.equal(0, n % 2)
      if n > 0 then assert.equal("plus", plain:get(2).name) end
      plain:close()
      local high = runnel.attach(dir, "high")
      local top = high:rows() -- the three highest: i, i - 1, i - 2 after group i
      assert.is_true(#top <= 3 and #top >= math.min(3, n // 2)) -- read after plain: as many groups or more
      for i, row in ipairs(top) do
        assert.same({ i, top[1].v - (i - 1) }, { row.rank, row.v })
        local now = high:get(row.id) -- another read: later groups may have pushed it out since
        if now then assert.equal(row.v, now.v) end
      end
      high:close()
      return rows
    end)
  end)

  it("refuses an aggregate computed by Lua functions, naming the column", function()
    local dir = H.tmpdir()
    local p = quiet(dir)
    p:table("t", { {"k","int"}, key = "k" }):aggregate{ u = runnel.agg{ init = function() return 0 end,
      add = function(s) return s + 1 end, remove = function(s) return s - 1 end, result = function(s) return s end },
      name = "u" }
    p:close()
    local out, err, code = H.sh(("%s query %s u"):format(bin, dir))
    assert.same({ "", ('runnel: attach %s: aggregate "u": column "u" is a runnel.agg: its values are computed by Lua '
                       .. 'functions in the pipeline that declares it (keep them with rel:sink(runnel.store(name)) '
                       .. 'and read that store)\n'):format(dir), 1 }, { out, err, code })
  end)

  it("reads a distinct's rows, whole groups only, by query and by attach", function()
    while_writing('t:select{ "v" }:distinct("vs")', function(dir)
      local sum, rows = csv_sum(dir, "vs")
      assert.equal(0, sum)
      assert.equal(0, rows % 2)
      local att = runnel.attach(dir, "vs")
      local n, total = 0, 0
      for row, id in att:rows() do n, total = n + 1, total + row.v; assert.is_true(id > 0) end
      assert.equal(0, total)
      assert.equal(0, n % 2)
      assert.equal(0, att:count() % 2)
      assert.equal("distinct", select(2, att:columns()))
      assert.matches("a keyless distinct has no key to read by", select(2, pcall(att.get, att, 1)), 1, true)
      att:close()
      return rows
    end)
  end)
end)

describe("runnel inspect", function()
  after_each(H.cleanup)

  it("lists every relation: filters, maps and lookups too", function()
    local dir = H.tmpdir()
    local p = v1(dir)
    local players = p:relation("players")
    players:filter(function(r) return r.team ~= nil end, "in_team")
    players:map(function(r) return { id = r.id } end, { {"id","int"}, key = "id" }, "ids")
    p:lookup("prices", { {"sku","string"}, {"price","float"}, key = "sku", source = function() return nil end })
    p:close()
    local out = H.sh(("%s inspect %s"):format(bin, dir))
    for _, name in ipairs{ "in_team", "ids", "prices", "roster", "per_team" } do
      assert.truthy(out:find("\n " .. name .. " ", 1, true), name .. " in:\n" .. out)
    end
    assert.truthy(out:find("(7 relations)", 1, true))
  end)
end)
