-- A derived relation's function that reads through runnel.attach
-- (lua/llookup.c, read_attached): an attach of its own pipeline's state
-- reads a relation of that pipeline, a dependency as other:get's; an
-- attach of another state is taken at declaration, in the function's
-- fingerprint: another relation attached, the same declared again
-- otherwise, or rebuilt there since, rebuilds the reader. The attached rows' own changes are not
-- observed (as a lookup's source's).
local runnel = require "runnel"
local H = require "helper"

local T = { {"k","int"}, {"g","int"}, key = "k" }
local U = { {"id","int"}, {"name","string"}, key = "id" }
local NM = { {"id","int"}, {"label","string"}, key = "id" }
local J = { {"k","int"}, {"label","string"}, key = "k" }

describe("a joiner that reads its own state through runnel.attach", function()
  after_each(H.cleanup)

  -- t, u, nm = u mapped by prefix, idx over nm, and j = t joined with u
  -- whose joiner reads idx through an attach of the pipeline's own state.
  local function declared(dir, prefix)
    local p, lines = H.open_noting(dir)
    local t = p:table("t", T)
    local u = p:table("u", U)
    local nm = u:map(function(r) return { id = r.id, label = prefix .. r.name } end, NM, "nm")
    nm:index{ "label", name = "idx" }
    local att = runnel.attach(dir, "idx")
    local j = t:join(u, { on = "g", name = "j", columns = J, joiner = function(l)
      local first = att:range{ limit = 1 }()
      return { k = l.k, label = first and first.label or "none" }
    end })
    return p, t, u, j, lines, att
  end

  it("is rebuilt when the relation it attached changes", function()
    local dir = H.tmpdir()
    local p, t, u, j, _, att = declared(dir, "A:")
    u:insert{ id = 1, name = "one" }
    t:insert{ k = 1, g = 1 }
    assert.same({ k = 1, label = "A:one" }, j:get{ k = 1 })
    att:close()
    p:close()
    local lines
    p, t, u, j, lines, att = declared(dir, "B:")
    local notes = table.concat(lines, "\n")
    assert.truthy(notes:find('j: rebuilt from its inputs ("nm" changed)', 1, true), notes)
    assert.same({ k = 1, label = "B:one" }, j:get{ k = 1 })
    att:close()
    p:close()
  end)

  it("is not rebuilt when nothing it reads changed", function()
    local dir = H.tmpdir()
    local p, t, u, _, _, att = declared(dir, "A:")
    u:insert{ id = 1, name = "one" }
    t:insert{ k = 1, g = 1 }
    att:close()
    p:close()
    local lines
    p, t, u, _, lines, att = declared(dir, "A:")
    assert.same({}, lines)
    att:close()
    p:close()
  end)
end)

describe("a joiner that reads another state through runnel.attach", function()
  after_each(H.cleanup)

  -- The other state: tables names and names2 ({ id, name [, extra] }), and
  -- sums = names counted by id, summing column `of`.
  local function other(dir, rows, extra, of)
    local q = runnel.open{ path = dir, notes = function() end }
    local cols = { {"id","int"}, {"name","string"}, {"a","int", default = 1}, {"b","int", default = 2}, key = "id" }
    if extra then table.insert(cols, {"extra","int", default = 0}) end
    local names = q:table("names", cols)
    local names2 = q:table("names2", cols)
    names:aggregate{ by = "id", s = runnel.sum(of or "a"), name = "sums" }
    for id, name in pairs(rows) do
      names:upsert{ id = id, name = name }
      names2:upsert{ id = id, name = name .. "2" }
    end
    q:close()
  end

  local function declared(dir, odir, name, read)
    local p, lines = H.open_noting(dir)
    local t = p:table("t", T)
    local u = p:table("u", U)
    local att = runnel.attach(odir, name)
    local j = t:join(u, { on = "g", name = "j", columns = J, joiner = function(l)
      return { k = l.k, label = tostring(read(att, l.g)) }
    end })
    return p, t, u, j, lines, att
  end

  local function name_of(att, id) local r = att:get(id) return r and r.name end
  local function sum_of(att, id) local r = att:get(id) return r and r.s end

  -- The first session: j's row 1 reads id 1 of what is attached.
  local function first(dir, odir, name, read, want)
    local p, t, u, j, _, att = declared(dir, odir, name, read)
    u:insert{ id = 1, name = "x" }
    t:insert{ k = 1, g = 1 }
    assert.same({ k = 1, label = want }, j:get{ k = 1 })
    att:close()
    p:close()
  end

  -- The second session: rebuilt (its note) and reading rows as they are now.
  local function rebuilt(dir, odir, name, read, want)
    local p, _, _, j, lines, att = declared(dir, odir, name, read)
    local notes = table.concat(lines, "\n")
    assert.truthy(notes:find("j: its function changed", 1, true), notes)
    assert.truthy(notes:find("j: rebuilt from its inputs", 1, true), notes)
    assert.same({ k = 1, label = want }, j:get{ k = 1 })
    att:close()
    p:close()
  end

  it("is rebuilt when the attached relation's columns changed", function()
    local dir, odir = H.tmpdir(), H.tmpdir()
    other(odir, { "one" })
    first(dir, odir, "names", name_of, "one")
    other(odir, { "uno" }, true)
    rebuilt(dir, odir, "names", name_of, "uno")
  end)

  it("is rebuilt when the attached relation's declaration changed, its columns not", function()
    local dir, odir = H.tmpdir(), H.tmpdir()
    other(odir, { "one" })
    first(dir, odir, "sums", sum_of, "1")
    other(odir, { "one" }, false, "b")
    rebuilt(dir, odir, "sums", sum_of, "2")
  end)

  it("is rebuilt when another relation is attached", function()
    local dir, odir = H.tmpdir(), H.tmpdir()
    other(odir, { "one" })
    first(dir, odir, "names", name_of, "one")
    rebuilt(dir, odir, "names2", name_of, "one2")
  end)

  it("is rebuilt when another state is attached", function()
    local dir, odir, odir2 = H.tmpdir(), H.tmpdir(), H.tmpdir()
    other(odir, { "one" })
    other(odir2, { "eins" })
    first(dir, odir, "names", name_of, "one")
    rebuilt(dir, odir2, "names", name_of, "eins")
  end)

  it("is rebuilt when the attached relation was rebuilt because what it is built over changed", function()
    local dir, odir = H.tmpdir(), H.tmpdir()
    local function labels(prefix) -- the other state: idx, an index over a map of u's rows
      local q = runnel.open{ path = odir, notes = function() end }
      local u = q:table("u", U)
      local nm = u:map(function(r) return { id = r.id, label = prefix .. r.name } end, NM, "nm")
      nm:index{ "label", name = "idx" }
      u:upsert{ id = 1, name = "one" }
      q:close()
    end
    local function first_label(att) local f = att:range{ limit = 1 }() return f and f.label end
    labels("A:")
    first(dir, odir, "idx", first_label, "A:one")
    labels("B:") -- idx's own records stay; its rows were rebuilt
    rebuilt(dir, odir, "idx", first_label, "B:one")
  end)

  it("keeps what it made when only the attached rows changed (they are not observed)", function()
    local dir, odir = H.tmpdir(), H.tmpdir()
    other(odir, { "one" })
    first(dir, odir, "names", name_of, "one")
    other(odir, { "uno" })
    local p, _, _, j, lines, att = declared(dir, odir, "names", name_of)
    assert.same({}, lines)
    assert.same({ k = 1, label = "one" }, j:get{ k = 1 })
    att:close()
    p:close()
  end)
end)
