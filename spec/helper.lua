-- helper.lua — what the specs share: recording sinks and scratch directories.
local H = {}

--- Records every change a sink of rel receives as { verb, id, row, old }.
function H.record(rel, consolidate)
  local log = {}
  if consolidate then
    rel:sink{ consolidate = true,
      insert = function(row, info) log[#log + 1] = { "INSERT", info.id, row } end,
      update = function(row, old, info) log[#log + 1] = { "UPDATE", info.id, row, old } end,
      delete = function(old, info) log[#log + 1] = { "DELETE", info.id, nil, old } end }
  else
    rel:sink(function(verb, row, old, info) log[#log + 1] = { verb, info.id, row, old } end)
  end
  return log
end

--- Verbs and ids only: { "INSERT 1", "DELETE 1", … }.
function H.verbs(log)
  local out = {}
  for i, e in ipairs(log) do out[i] = e[1] .. " " .. e[2] end
  return out
end

function H.clear(t)
  for i = #t, 1, -1 do t[i] = nil end
end

local dirs = {}
--- A fresh empty directory, removed by H.cleanup().
function H.tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p '" .. d .. "'"))
  dirs[#dirs + 1] = d
  return d
end

function H.cleanup()
  for _, d in ipairs(dirs) do os.execute("rm -rf '" .. d .. "'") end
  dirs = {}
end

--- The whole message of the error fn(...) raises, its "file:line: " kept
--- (to assert where it points); fails when fn(...) raises none.
function H.message_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected an error")
  return tostring(err)
end

--- The error message of fn(...) without its "file:line: " prefix.
function H.error_of(fn, ...)
  return (H.message_of(fn, ...):gsub("^[^:]*:%d+: ", ""))
end

--- Writes text to path and runs p over it as NDJSON, which must fail: the
--- message without a leading "file.lua:line: ".
function H.ndjson_run_error(p, path, text)
  H.write(path, text)
  local err = H.message_of(p.run, p, require("runnel").ndjson_source(path))
  return (err:gsub("^[^\n]-%.lua:%d+: ", ""))
end

--- Runs a shell command; returns its stdout, stderr and exit code.
function H.sh(cmd, stdin)
  local out, err = os.tmpname(), os.tmpname()
  local input = os.tmpname()
  local f = io.open(input, "w")
  f:write(stdin or "")
  f:close()
  local ok, _, code = os.execute(("%s <'%s' >'%s' 2>'%s'"):format(cmd, input, out, err))
  local function slurp(p) local h = io.open(p); local s = h:read("a"); h:close(); os.remove(p); return s end
  os.remove(input)
  return slurp(out), slurp(err), ok and 0 or code
end

--- The ids (column id) of rel's rows in its order, joined by commas: "1,2".
function H.ids_text(rel)
  local o = {}
  for r in rel:rows() do o[#o + 1] = r.id end
  return table.concat(o, ",")
end

--- Writes text to path (replacing it).
function H.write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

--- The contents of path, or nil when it does not exist.
function H.read(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

--- The size of the file at path, in bytes.
function H.size_of(path)
  local f = assert(io.open(path))
  local n = f:seek("end")
  f:close()
  return n
end

--- Runs query on the SQLite database db with the sqlite3 shell; its output.
function H.sql(db, query)
  local out, err, code = H.sh(("sqlite3 -separator '|' %s %q"):format(db, query))
  if err ~= "" or code ~= 0 then error(("sqlite3 %s: exit %s: %s"):format(query, tostring(code), err), 2) end
  return out
end

--- One random change to the items and teams tables of the mapper specs
--- (items: id, kind, a, b, note; a mapper reads a or b as kind says): an
--- insert when item id (1..ids) has no row, else a delete, an update of
--- note, a, b or kind, or a team's upsert or delete. step names the change.
function H.random_item_change(items, teams, rng, step, ids)
  local null = require("runnel").null
  local id = rng(1, ids)
  local op = rng(1, 10)
  local function val() local v = rng(0, 8); return v == 0 and null or v end
  if not items:get(id) then
    items:insert{ id = id, kind = rng(1, 2) == 1 and "a" or "b", a = val(), b = val(), note = "n" .. step }
  elseif op <= 2 then
    items:delete{ id = id }
  elseif op <= 4 then
    items:update{ id = id, note = "n" .. step }
  elseif op <= 6 then
    items:update{ id = id, a = val() }
  elseif op <= 8 then
    items:update{ id = id, b = val() }
  elseif op == 9 then
    items:update{ id = id, kind = rng(1, 2) == 1 and "a" or "b" }
  else
    local t = rng(1, 6)
    if rng(1, 3) == 1 and teams:get(t) then teams:delete{ id = t } else teams:upsert{ id = t, name = "t" .. t .. "." .. step } end
  end
end

--- The item of the mapper specs' tables: its team id, as kind says.
function H.item_team(r)
  if r.kind == "a" then return r.a end
  return r.b
end

--- A join of those items with teams (columns id, note, tname) as sorted
--- "id note tname" lines; with items and teams instead, the same worked out
--- from the tables.
function H.item_join_lines(rel, items, teams)
  local out = {}
  if items then
    for r in items:rows() do
      local k = H.item_team(r)
      local t = k and teams:get(k)
      out[#out + 1] = ("%d %s %s"):format(r.id, r.note, tostring(t and t.name))
    end
  else
    for r in rel:rows() do out[#out + 1] = ("%d %s %s"):format(r.id, r.note, tostring(r.tname)) end
  end
  table.sort(out)
  return out
end

--- The k values of an NDJSON file's lines ({"k":N,…}), in order, as one
--- string "1,2,…" ("?" for a line without one).
function H.ndjson_ks(text)
  local got = {}
  for l in text:gmatch("[^\n]+") do got[#got + 1] = l:match('^{"k":(%d+),') or "?" end
  return table.concat(got, ",")
end

--- The join specs' teams (id, name, region null) and players (id, name,
--- team_id null, score = 0), declared on p.
function H.join_tables(p)
  local teams = p:table("teams", { {"id","int"}, {"name","string"}, {"region","string", null = true}, key = "id" })
  local players = p:table("players", { {"id","int"}, {"name","string"}, {"team_id","int", null = true},
                                       {"score","int", default = 0}, key = "id" })
  return teams, players
end

--- The join edge specs' teams (id, name) and players (id, tid null: an int
--- unless tid_type says), declared on p.
function H.join_tables_tid(p, tid_type)
  local teams = p:table("teams", { {"id","int"}, {"name","string"}, key = "id" })
  local players = p:table("players", { {"id","int"}, {"tid", tid_type or "int", null = true}, key = "id" })
  return teams, players
end

--- The SQLite moved-file specs' state (dir/st) whose table t (id, v) is
--- mirrored to dir/o.db, rows 1 to n (v = id) inserted and delivered;
--- sync = false when carried. dir, db, the pipeline and t.
H.SQLITE_COLS = { {"id","int"}, {"v","int"}, key = "id" }
function H.sqlite_mirror(n, carried)
  local runnel = require "runnel"
  local dir = H.tmpdir()
  local db = dir .. "/o.db"
  local p = runnel.open{ path = dir .. "/st", notes = false, sync = not carried }
  local t = p:table("t", H.SQLITE_COLS)
  t:sink(runnel.sqlite(db, "t"))
  local want = {}
  for i = 1, n do
    t:insert{ id = i, v = i }
    want[i] = i .. "|" .. i .. "\n"
  end
  p:deliver()
  local got = H.sql(db, "SELECT id, v FROM t ORDER BY id")
  assert(got == table.concat(want), "the mirror holds " .. got)
  return dir, db, p, t
end

--- That state opened again, its sink declared and delivered: p and t.
function H.sqlite_remirror(dir, db)
  local runnel = require "runnel"
  local p = runnel.open{ path = dir .. "/st", notes = false }
  local t = p:table("t", H.SQLITE_COLS)
  t:sink(runnel.sqlite(db, "t"))
  p:deliver()
  return p, t
end

--- The NDJSON specs' state at state: stream s (k int, pad string) with an
--- NDJSON sink to log given ndjson_opts, opened with sync as given
--- (nil: the default). The pipeline and s.
function H.ndjson_stream(state, log, ndjson_opts, sync)
  local runnel = require "runnel"
  local p = runnel.open{ path = state, sync = sync }
  local s = p:stream("s", { {"k","int"}, {"pad","string"} })
  s:sink(runnel.ndjson(log, ndjson_opts))
  return p, s
end

--- The NDJSON path sink specs' files, fresh for each test (before_each):
--- dir (a new temporary directory), log (dir/out.ndjson), state (dir/st)
--- and open(sync), which opens the state with stream s and its sink to
--- log ({ verb = false }) through H.ndjson_stream: the pipeline and s.
function H.ndjson_case()
  local dir = H.tmpdir()
  local log, state = dir .. "/out.ndjson", dir .. "/st"
  return dir, log, state, function(sync)
    return H.ndjson_stream(state, log, { verb = false }, sync)
  end
end

--- A crash of a log sink's writer with a group waiting: a child process
--- (script) opens the state, declares table t {id int, a string} with an
--- NDJSON sink to log, inserts ids 1 and 2 (a group each) and exits
--- without closing, so group 2's mark is not recorded.
function H.ndjson_table_crash(script, state, log)
  H.run_script(script, ([[
local runnel = require "runnel"
local p = runnel.open{ path = %q }
local t = p:table("t", { {"id","int"}, {"a","string"}, key = "id" })
t:sink(runnel.ndjson(%q))
t:insert{ id = 1, a = "x" }
t:insert{ id = 2, a = "y" }
os.exit(0, false) -- group 2's mark is not recorded: it waits
]]):format(state, log))
end

--- The contents of path, or "" when it does not exist (a sink's file not
--- yet made).
function H.text_of(path)
  return H.read(path) or ""
end

--- The outbox specs' groups: group i inserts k = i and negates k = i - 1.
--- Their NDJSON log for groups 1..n, and their rows as "k|v" lines.
function H.outbox_log(n)
  local out = {}
  for i = 1, n do
    out[#out + 1] = ('{"verb":"INSERT","k":%d,"v":%d}\n'):format(i, i)
    if i > 1 then out[#out + 1] = ('{"verb":"UPDATE","k":%d,"v":%d}\n'):format(i - 1, -(i - 1)) end
  end
  return table.concat(out)
end

function H.outbox_rows(n)
  local out = {}
  for i = 1, n do out[#out + 1] = ("%d|%d\n"):format(i, i == n and i or -i) end
  return table.concat(out)
end

--- Every change a sink of rel receives as one line, "VERB id new <- old",
--- each row its columns' values in order (tostring), for comparing logs.
function H.line_log(rel)
  local log = {}
  rel:sink(function(verb, row, old, info)
    local parts = {}
    for _, r in ipairs{ row or false, old or false } do
      if r then
        local cols = {}
        for _, c in ipairs(rel:schema().columns) do cols[#cols + 1] = tostring(r[c.name]) end
        parts[#parts + 1] = table.concat(cols, ",")
      end
    end
    log[#log + 1] = verb .. " " .. info.id .. " " .. table.concat(parts, " <- ")
  end)
  return log
end

H.runnel_bin = os.getenv("RUNNEL_BIN") or "build/runnel"

--- For the REPL browsing a state another process writes: a directory
--- whose state st holds table alpha (one row, id 1, inserted through
--- `runnel repl`), with more.lua, a script that declares beta beside it
--- and inserts a row into each (`runnel run DIR/more.lua DIR/st`).
function H.browsed_state()
  local dir = H.tmpdir()
  H.write(dir .. "/decl.lua", 'alpha = p:table("alpha", { {"id","int"}, key = "id" })\n')
  H.write(dir .. "/more.lua", table.concat({
    'local runnel = require "runnel"',
    "local p = runnel.open(arg[1])",
    'local alpha = p:table("alpha", { {"id","int"}, key = "id" })',
    'local beta = p:table("beta", { {"id","int"}, key = "id" })',
    "alpha:insert{ id = 2 }",
    "beta:insert{ id = 1 }",
    "p:close()",
  }, "\n") .. "\n")
  local _, err, code = H.sh(("%s repl %s/st %s/decl.lua"):format(H.runnel_bin, dir, dir), "alpha:insert{ id = 1 }\n")
  assert(code == 0, err)
  return dir
end
H.root = (H.sh("pwd"):gsub("\n$", "")) -- specs run from the repository's root

-- Opens the state at dir, collecting the notes of the changes applied
-- (evolution): the pipeline and the list the notes go to.
function H.open_noting(dir)
  local lines = {}
  local p = require("runnel").open{ path = dir, notes = function(line) lines[#lines + 1] = line end }
  return p, lines
end

-- A copy of a relation kept from its change log, by row id: copy, and the
-- sink that keeps it (rel:sink(fn)).
function H.id_applier()
  local copy = {}
  return copy, function(verb, row, _, info)
    if verb == "DELETE" then copy[info.id] = nil else copy[info.id] = row end
  end
end

-- A relation's rows by row id.
function H.rows_by_id(rel)
  local out = {}
  for row, id in rel:rows() do out[id] = row end
  return out
end

-- Writes text to path and runs it as a script (runnel run) in a process
-- of its own, which must exit 0 saying nothing on stderr: its stdout.
function H.run_script(path, text)
  H.write(path, text)
  local out, err, code = H.sh(("%s run %s"):format(H.runnel_bin, path))
  assert(err == "" and code == 0, ("%s: exit %s: %s"):format(path, tostring(code), err))
  return out
end

-- The same with dir as its current directory (so relative paths in the
-- script are dir's), the script written to dir/s.lua: its stdout.
function H.run_script_in(dir, text)
  H.write(dir .. "/s.lua", text)
  local bin = H.runnel_bin:sub(1, 1) == "/" and H.runnel_bin or H.root .. "/" .. H.runnel_bin
  local out, err, code = H.sh(("cd '%s' && '%s' run s.lua"):format(dir, bin))
  assert(err == "" and code == 0, ("exit %s: %s"):format(tostring(code), err))
  return out
end

--- A crash of an NDJSON path sink's writer: a child process (script in
--- dir) opens the state, declares stream s {k, pad} with runnel.ndjson(log,
--- ndjson_opts: Lua source, { verb = false } when nil), inserts k = first
--- .. last (a group each; pad "x", the last one's padlen "x"s when given)
--- and exits without closing, so the last group's mark is not recorded.
function H.ndjson_crash(dir, state, log, first, last, padlen, ndjson_opts)
  H.run_script(dir .. "/crash_child.lua", ([[
local runnel = require "runnel"
local p = runnel.open{ path = %q }
local s = p:stream("s", { {"k","int"}, {"pad","string"} })
s:sink(runnel.ndjson(%q, %s))
for k = %d, %d do s:insert{ k = k, pad = string.rep("x", k == %d and %d or 1) } end
os.exit(0, false)
]]):format(state, log, ndjson_opts or "{ verb = false }", first, last, last, padlen or 1))
end

-- The lent-row specs (lua/lrow.c, lua/runnel/lent.lua): what reading a Row
-- after its call raises; a pipeline with L(id, fk) and R(id, n) holding
-- rows 1 to 3; and what reading row.id gives (its value, or the error
-- without its position).
H.STALE_ROW = "a row given to a callback can be read only during that call (copy what you keep)"

function H.lent_tables()
  local p = require("runnel").open()
  local L = p:table("L", { {"id","int"}, {"fk","int"}, key = "id" })
  local R = p:table("R", { {"id","int"}, {"n","string"}, key = "id" })
  for i, n in ipairs{ "one", "two", "three" } do R:insert{ id = i, n = n } end
  return p, L, R
end

function H.read_id(row)
  local ok, v = pcall(function() return row.id end)
  return ok and v or (tostring(v):gsub("^[^:]*:%d+: ", ""))
end

return H
