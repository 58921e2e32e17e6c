-- Every read a derived relation's function makes of another relation of
-- its pipeline is a dependency (core/evolve_reads.c), whatever method reads
-- it: an index's range, rank and count, a top's or an aggregate's count,
-- late(), changes() and schema() as well as get, rows and scan.
local runnel = require "runnel"
local H = require "helper"

local T = { {"k","int"}, {"g","int"}, key = "k" }
local U = { {"id","int"}, {"name","string"}, key = "id" }
local NM = { {"id","int"}, {"label","string"}, key = "id" }

-- t, u, nm = u mapped by prefix, idx and best over nm, ag = nm counted in
-- windows of ids, and j = t joined with u whose joiner calls read(rels, l).
local function declared(dir, prefix, read)
  local p, lines = H.open_noting(dir)
  local t = p:table("t", T)
  local u = p:table("u", U)
  local nm = u:map(function(r) return { id = r.id, label = prefix .. r.name } end, NM, "nm")
  local rels = {
    idx = nm:index{ "label", name = "idx" },
    best = nm:top{ n = 2, order = "label", name = "best" },
    ag = nm:aggregate{ window = runnel.tumbling(10, "id"), n = runnel.count(), name = "ag" },
  }
  local j = t:join(u, { on = "g", name = "j", columns = { {"k","int"}, {"label","string"}, key = "k" },
    joiner = function(l) return { k = l.k, label = tostring(read(rels, l)) } end })
  return p, t, u, j, lines
end

local READS = {
  { "an index's range", function(r) local f = r.idx:range{ limit = 1 }() return f and f.label end, "A:one", "B:one" },
  { "an index's rank", function(r) return r.idx:rank("B") end, "2", "1" },
  { "an index's count between bounds", function(r) return r.idx:count{ from = "B", to = "C" } end, "0", "1" },
  { "an index's count", function(r) return r.idx:count() end, "1", "1" },
  { "a top's count", function(r) return r.best:count() end, "1", "1" },
  { "a top's rows", function(r) local f = r.best:rows()() return f and f.label end, "A:one", "B:one" },
  { "an aggregate's late count", function(r) return r.ag:late() end, "0", "0" },
  { "a relation's change counts", function(r) return r.idx:changes().inserts end, "1", "0" },
  { "a relation's schema", function(r) return r.idx:schema().kind end, "index", "index" },
}

describe("a joiner that reads another relation through", function()
  after_each(H.cleanup)

  for _, case in ipairs(READS) do
    local what, read, before, after = case[1], case[2], case[3], case[4]
    it(what .. " is rebuilt when that relation changes", function()
      local dir = H.tmpdir()
      local p, t, u, j = declared(dir, "A:", read)
      u:insert{ id = 1, name = "one" }
      t:insert{ k = 1, g = 1 }
      assert.same({ k = 1, label = before }, j:get{ k = 1 })
      p:close()
      local lines
      p, t, u, j, lines = declared(dir, "B:", read)
      local notes = table.concat(lines, "\n")
      assert.truthy(notes:find('j: rebuilt from its inputs ("nm" changed)', 1, true), notes)
      assert.same({ k = 1, label = after }, j:get{ k = 1 })
      p:close()
    end)
  end

  it("nothing it does not read is rebuilt: the same reads, nm unchanged", function()
    local dir = H.tmpdir()
    local read = function(r) return r.idx:count{ from = "A" } end
    local p, t, u = declared(dir, "A:", read)
    u:insert{ id = 1, name = "one" }
    t:insert{ k = 1, g = 1 }
    p:close()
    local lines
    p, t, u, _, lines = declared(dir, "A:", read)
    assert.same({}, lines)
    p:close()
  end)
end)
