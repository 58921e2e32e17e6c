-- join_edges_helper.lua — what the join edge specs share: rows as canonical
-- lines, a follower that replays a relation's committed events (checking
-- each is a valid transition), and players ⋈ teams joins of every shape
-- with their plain-Lua recomputation.
local runnel = require "runnel"

local E = {}
local null = runnel.null

--- A value as text that tells 1 from 1.0, nil from "nil" and shows NULs.
function E.val(v)
  local t = type(v)
  if t == "string" then return '"' .. v .. '"' end
  if t == "number" then return math.type(v) == "float" and ("f%.17g"):format(v) or tostring(v) end
  if v == nil or v == null then return "~" end
  return tostring(v)
end

function E.names_of(rel)
  local t = {}
  for i, c in ipairs(rel:schema().columns) do t[i] = c.name end
  return t
end

--- A row as one line of its columns' values, in names' order.
function E.line(row, names)
  local parts = {}
  for i, n in ipairs(names) do parts[i] = E.val(row[n]) end
  return table.concat(parts, "|")
end

local function sorted(t)
  table.sort(t)
  return t
end

--- rel:rows() as sorted lines.
function E.rows_lines(rel, names)
  names = names or E.names_of(rel)
  local out = {}
  for r in rel:rows() do out[#out + 1] = E.line(r, names) end
  return sorted(out)
end

--- Values of a map (anything -> row) as sorted lines.
function E.map_lines(map, names)
  local out = {}
  for _, r in pairs(map) do out[#out + 1] = E.line(r, names) end
  return sorted(out)
end

--- Follows rel's events: a group's changes are kept at its commit (its
--- rollback drops them); settle() applies the kept ones to an id -> line
--- map, asserting each is a valid transition (INSERT of an absent id,
--- UPDATE and DELETE whose old image is the line held, no UPDATE that
--- changes nothing), and returns how many it applied.
function E.follow(rel)
  local names = E.names_of(rel)
  local f = { names = names, rows = {}, pending = {}, done = {}, rollbacks = 0 }
  local function push(verb, id, row, old)
    f.pending[#f.pending + 1] = { verb, id, row and E.line(row, names), old and E.line(old, names) }
  end
  rel:sink{
    insert = function(row, info) push("INSERT", info.id, row, nil) end,
    update = function(row, old, info) push("UPDATE", info.id, row, old) end,
    delete = function(old, info) push("DELETE", info.id, nil, old) end,
    commit = function(seq) f.done[#f.done + 1] = { seq, f.pending }; f.pending = {} end,
    rollback = function(seq)
      f.pending = {}
      f.rollbacks = f.rollbacks + 1
      while #f.done > 0 and f.done[#f.done][1] == seq do table.remove(f.done) end
    end,
  }
  function f.settle(label)
    local n = 0
    for _, batch in ipairs(f.done) do
      for _, e in ipairs(batch[2]) do
        local verb, id, row, old = e[1], e[2], e[3], e[4]
        local held = f.rows[id]
        local where = ("%s: %s %d"):format(label or rel:schema().name or "?", verb, id)
        if verb == "INSERT" then
          assert(held == nil, where .. ": inserts an id that holds " .. tostring(held))
        else
          assert(held == old, ("%s: old image %s, but the id holds %s"):format(where, tostring(old), tostring(held)))
        end
        assert(verb ~= "UPDATE" or row ~= old, where .. ": an UPDATE that changes nothing: " .. tostring(row))
        f.rows[id] = row
        n = n + 1
      end
    end
    f.done = {}
    return n
  end
  function f.lines()
    local out = {}
    for _, l in pairs(f.rows) do out[#out + 1] = l end
    return sorted(out)
  end
  return f
end

--- A sink on rel that raises at its at-th change once armed (trap.arm(at)).
function E.trap(rel)
  local t = { at = nil, seen = 0 }
  rel:sink(function()
    if not t.at then return end
    t.seen = t.seen + 1
    if t.seen == t.at then t.at = nil; error("trap sprung", 0) end
  end)
  function t.arm(at) t.at, t.seen = at, 0 end
  return t
end

--- The tables of the fan-out specs: the join specs' teams and players.
E.tables = require("helper").join_tables

-- players ⋈ teams as the default result row (right columns nil without a team).
local function joined(pl, t)
  return { id = pl.id, name = pl.name, team_id = pl.team_id, score = pl.score,
           ["teams.id"] = t and t.id, ["teams.name"] = t and t.name, region = t and t.region }
end

local function project(row, spec)
  local out = {}
  for _, s in ipairs(spec) do
    if type(s) == "table" then out[s[1]] = row[s[2]] else out[s] = row[s] end
  end
  return out
end

local team_of = function(r) return r.team_id end

--- Every shape of players ⋈ teams: { name, rel, expect(pl, t) -> row or
--- nil, exact }: exact is false where one logical change may be two events
--- (a selector that moves the key). Each relation here has one reader:
--- its follower (a select is then done by its join).
function E.shapes(p, players, teams, only)
  local s = {}
  local function add(name, rel, expect, exact)
    if only and not only[name] then return end
    s[#s + 1] = { name = name, rel = rel, expect = expect, exact = exact ~= false }
  end
  local function on(kind, name) return players:join(teams, { on = "team_id", kind = kind, name = name }) end
  add("inner", on("inner", "inner"), function(pl, t) return t and joined(pl, t) end)
  add("left", on("left", "left"), function(pl, t) return joined(pl, t) end)
  add("mapped_inner", players:join(teams, { mapper = team_of, kind = "inner", name = "mapped_inner",
      joiner = function(l, t) return { pid = l.id, pname = l.name, tname = t and t.name, reg = t and t.region } end,
      columns = { {"pid","int"}, {"pname","string"}, {"tname","string", null = true},
                  {"reg","string", null = true}, key = "pid" } }),
    function(pl, t) return t and { pid = pl.id, pname = pl.name, tname = t.name, reg = t.region } end)
  add("mapped_vals", players:join(teams, { mapper = team_of, kind = "left", name = "mapped_vals",
      joiner = function(l, t) return l.id, l.score, t and t.name end,
      columns = { {"pid","int"}, {"score","int"}, {"tname","string", null = true}, key = "pid" } }),
    function(pl, t) return { pid = pl.id, score = pl.score, tname = t and t.name } end)
  add("refs", players:join(teams, { on = "team_id", kind = "left", name = "refs",
      joiner = { pid = "id", tname = "teams.name", reg = "region" } }),
    function(pl, t) return { pid = pl.id, tname = t and t.name, reg = t and t.region } end)
  local selects = {
    sel_rename = { "left", { {"tname","teams.name"}, {"pid","id"}, "score" } },
    sel_nokey = { "inner", { "name", {"tn","teams.name"} } },
    sel_right = { "left", { {"tn","teams.name"}, "region" } },
    sel_keys = { "inner", { "region", "teams.id", "team_id", "id" } },
  }
  for _, name in ipairs{ "sel_rename", "sel_nokey", "sel_right", "sel_keys" } do
    local kind, spec = selects[name][1], selects[name][2]
    if not only or only[name] then
      add(name, on(kind, "j_" .. name):select(spec, name), function(pl, t)
        if kind == "inner" and not t then return nil end
        return project(joined(pl, t), spec)
      end)
    end
  end
  if not only or only.mapped_sel then
    local spec = { "id", {"tn","teams.name"}, "team_id" }
    add("mapped_sel", players:join(teams, { mapper = team_of, kind = "left", name = "j_mapped_sel" })
      :select(spec, "mapped_sel"), function(pl, t) return project(joined(pl, t), spec) end)
  end
  add("selected", players:join(teams, { on = "team_id", kind = "left", name = "selected",
      selector = function(lk, rk) return lk * 1000 + (rk or 0) end }),
    function(pl, t) return joined(pl, t) end, false)
  if not only or only.selected_sel then
    local spec = { {"tn","teams.name"}, "id", "score" }
    add("selected_sel", players:join(teams, { on = "team_id", kind = "inner", name = "j_selected_sel",
        selector = function(lk, rk) return { rk, lk } end }):select(spec, "selected_sel"),
      function(pl, t) return t and project(joined(pl, t), spec) end, false)
  end
  return s
end

--- The rows each shape should hold, from the source tables: name -> pid -> row.
function E.expected(shapes, players, teams)
  local tmap = {}
  for t in teams:rows() do tmap[t.id] = t end
  local out = {}
  for _, sh in ipairs(shapes) do out[sh.name] = {} end
  for pl in players:rows() do
    local t = pl.team_id and tmap[pl.team_id]
    for _, sh in ipairs(shapes) do out[sh.name][pl.id] = sh.expect(pl, t) end
  end
  return out
end

--- How many pids' rows differ between two expectations of one shape.
function E.differing(before, after, names)
  local n, seen = 0, {}
  for pid, r in pairs(before) do
    seen[pid] = true
    local a = after[pid]
    if not a or E.line(a, names) ~= E.line(r, names) then n = n + 1 end
  end
  for pid in pairs(after) do if not seen[pid] then n = n + 1 end end
  return n
end

return E
