-- repl.lua — the runnel REPL (compiled into the runnel binary: it needs the
-- binary's runnel.readline, so it is not installed as a Lua module).
--
-- As lua.c does: a line is first tried as an expression so it prints;
-- input that ends in the middle of a statement (the parser reports <eof>)
-- continues on the next line. Each chunk runs with SIGINT raising an error;
-- Ctrl-C at the prompt drops the line (or the pending multi-line input) and
-- never ends the REPL. Errors print without a traceback unless .traceback
-- is on. `p` is the current pipeline: a temporary one at first, the state
-- of `runnel repl STATE_DIR`, `.open DIR`, a script that returns or sets
-- one, or a read-only view of a state (browse below). .tables, .schema,
-- change grids and completion follow whatever `p` is.
-- The globals as they were when the REPL started: a user's line may set
-- any of them (print = nil, pcall = nil), and the REPL's own code reached
-- them through _G, so the next line ended the session ("lua/repl.lua:471:
-- attempt to call a nil value (global 'print')"). _G itself is the
-- user's: p and the relations' names are set there.
local _ENV = setmetatable({}, { __index = (function()
  local at_start = {}
  for name, v in pairs(_G) do at_start[name] = v end
  return at_start
end)() })

local runnel = require "runnel"
local rl = require "runnel.readline"
local visible = require("runnel.core")._visible -- control characters escaped, as grids show them

local M = {}

local HELP = [[
  p                     the current pipeline (the banner says which)
  p:table(name, cols)   declare a table;  p:stream(name, cols) a stream
  t:insert{…} t:update{…} t:upsert{…} t:delete{…}   changes (each its own group)
  p:begin() … p:commit()                            several changes in one group
  t                     print a relation's rows as a grid (runnel.show(t, limit) too)
  .tables               relations and their row counts
  .schema NAME          a relation's columns and key
  .open DIR [FILE.lua]  make the state at DIR `p`: FILE declares its relations
                        on `p`; without FILE an existing state is browsed read-only
  .load FILE.lua        run a script on the current `p`
  .watch [on|off|REL…]  which relations print each group's changes (on: all)
  .limit [N]            rows shown per grid and changes per group (default 20)
  .traceback            toggle tracebacks on errors
  .quit                 leave (Ctrl-D too; Ctrl-C clears the line)
  A leading `local` is dropped, so `local t = …` stays visible on later lines.]]

local function quote(s)
  return (("%q"):format(s):gsub("\\\n", "\\n"))
end

-- Rows the REPL has seen come from a relation remember its column order,
-- so they print in schema order (weak: the REPL keeps no row alive).
local row_columns = setmetatable({}, { __mode = "k" })

local function sorted_keys(v, n)
  local keys, order = {}, row_columns[v]
  for k in pairs(v) do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  local rank = {}
  for i, name in ipairs(order or {}) do rank[name] = i end
  table.sort(keys, function(a, b)
    local ra, rb = rank[a] or math.huge, rank[b] or math.huge
    if ra ~= rb then return ra < rb end
    return tostring(a) < tostring(b)
  end)
  return keys
end

local WIDTH = 100 -- a table longer than this prints one field per line

-- Lua values as Lua-like text; rows print as {id = 1, name = "ann"}.
local function pretty(v, indent, seen)
  local t = type(v)
  if v == runnel.null then return "runnel.null" end
  if t == "string" then return quote(v) end
  if t ~= "table" then return tostring(v) end
  indent, seen = indent or "", seen or {}
  if seen[v] then return "<cycle>" end
  seen[v] = true
  local inner = indent .. "  "
  local parts, n = {}, #v
  for i = 1, n do parts[i] = pretty(v[i], inner, seen) end
  for _, k in ipairs(sorted_keys(v, n)) do
    local key = type(k) == "string" and k:match("^[%a_][%w_]*$") and k or "[" .. pretty(k, inner, seen) .. "]"
    parts[#parts + 1] = key .. " = " .. pretty(v[k], inner, seen)
  end
  seen[v] = nil
  local line = "{" .. table.concat(parts, ", ") .. "}"
  if #indent + #line <= WIDTH and not line:find("\n", 1, true) then return line end
  return "{\n" .. inner .. table.concat(parts, ",\n" .. inner) .. "\n" .. indent .. "}"
end
M.pretty = pretty

local function is_relation(v)
  local s = tostring(v)
  return s:match("^runnel%.Relation ") or s:match("^runnel%.Browsed ")
end

-- ---- read-only browsing of a state: its catalogue and runnel.attach ----

-- "id int key, name string null, score int = 0" (rn_inspect) -> columns
local function parse_columns(text)
  local cols, key = {}, {}
  for part in (text .. ", "):gmatch("(.-), ") do
    local name, rest = part:match("^(%S+)%s+(.*)$")
    if name then
      local ty = rest:match("^(%S+)")
      local col = { name = name, type = ty, null = rest:find(" null", 1, true) ~= nil }
      local default = rest:match(" = (.*)$")
      if default then col.default = default end
      if rest:find(" key", 1, true) then col.key = true; key[#key + 1] = name end
      cols[#cols + 1] = col
    end
  end
  return cols, #key > 0 and key or nil
end

local Browsed = {}
Browsed.__index = Browsed
Browsed.__tostring = function(r) return ("runnel.Browsed %s (%s, read-only)"):format(r._entry.name, r._entry.kind) end

function Browsed:name() return self._entry.name end

-- The columns of text (rn_inspect's, as above) when their names and types
-- are known (attach's columns(), in the same order): a name may hold a
-- space or ", " ("a b", "x, y"), which parse_columns took for the end of a
-- name or of a column. nil when the text does not hold them.
local function columns_known(text, known)
  local cols, key, pos = {}, {}, 1
  for i, c in ipairs(known) do
    local head = c.name .. " " .. c.type
    if text:sub(pos, pos + #head - 1) ~= head then return nil end
    local after = known[i + 1] and text:find(", " .. known[i + 1].name .. " " .. known[i + 1].type, pos + #head, true)
    if known[i + 1] and not after then return nil end
    local rest = text:sub(pos + #head, (after or #text + 1) - 1) -- " key null = default", each part optional
    pos = after and after + 2 or #text + 1
    local col = { name = c.name, type = c.type, null = false }
    if rest:sub(1, 4) == " key" then rest = rest:sub(5) end
    if rest:sub(1, 5) == " null" then col.null, rest = true, rest:sub(6) end
    if rest:sub(1, 3) == " = " then col.default = rest:sub(4) elseif rest ~= "" then return nil end
    if c.key then col.key = true; key[#key + 1] = c.name end
    cols[#cols + 1] = col
  end
  return cols, #key > 0 and key or nil
end

function Browsed:schema()
  local ok, known = pcall(function() return self:_attached():columns() end) -- a stream has no attach: its text alone
  local cols, key
  if ok then cols, key = columns_known(self._entry.columns, known) end
  if not cols then cols, key = parse_columns(self._entry.columns) end
  return { name = self._entry.name, kind = self._entry.kind, columns = cols, key = key,
           tablelike = self._entry.kind ~= "stream" }
end

function Browsed:_attached()
  if not self._handle then self._handle = runnel.attach(self._path, self._entry.name) end
  return self._handle
end

function Browsed:rows() return self:_attached():rows() end
function Browsed:get(key) return self:_attached():get(key) end

function Browsed:count()
  if self._entry.rows then return self._entry.rows end -- the catalogue keeps a table's count
  local h = self:_attached()
  if h.count then return h:count() end
  local n = 0
  for _ in h:rows() do n = n + 1 end
  return n
end

local Browse = {}
Browse.__index = Browse
Browse.__tostring = function(b) return ("runnel.State (%s, read-only)"):format(b._path) end

-- A method a pipeline or relation has and a read-only view lacks
-- (insert, begin, table …) says why it is not there, rather than Lua's
-- "attempt to call a nil value (method 'insert')"; other names, and the
-- binding's own (_declare …), stay nil. Only a method that changes the
-- state or declares a relation is called read-only: one that reads
-- (players:id_of, p:stats) says what the view offers instead, not that
-- the state could not be changed.
local CHANGES = {
  Relation = { insert = true, update = true, upsert = true, delete = true, join = true, filter = true, map = true,
               aggregate = true, cdc = true, sink = true, top = true, index = true, distinct = true, select = true },
  Pipeline = { begin = true, commit = true, rollback = true, batch = true, table = true, stream = true, lookup = true,
               alter = true, drop = true, drop_outbox = true, run = true, deliver = true, flush = true },
}
local OFFERS = { Relation = "name, schema, rows, get and count", Pipeline = "relations, relation, path, seq and close" }

local function read_only(view, kind)
  setmetatable(view, { __index = function(_, name)
    local core = require "runnel.core"
    if type(name) ~= "string" or name:sub(1, 1) == "_" or core[kind][name] == nil then return nil end
    return function(self)
      local path = type(self) == "table" and rawget(self, "_path") or "?"
      local typed = path:find("[%s\"']") and ('"%s"'):format(path) or path -- as .open takes it
      local rel = kind == "Relation" and type(self) == "table" and rawget(self, "_entry")
      if not CHANGES[kind][name] then
        error(("%s: %s offers %s: the REPL browses the state at %s read-only (for every method, open it with a "
          .. "script that declares its relations: .open %s FILE.lua)")
          :format(name, rel and ("browsed relation %q"):format(rel.name) or "the browsed state", OFFERS[kind], path,
                  typed), 2)
      end
      local what = rel and ("relation %q is read-only"):format(rel.name) or "the state is read-only"
      error(("%s: %s: the REPL browses the state at %s (to change it, open it with a script that declares its "
        .. "relations: .open %s FILE.lua)"):format(name, what, path, typed), 2)
    end
  end })
end
read_only(Browsed, "Relation")
read_only(Browse, "Pipeline")

-- A read-only view of the state at path: relations() and relation(name)
-- as a pipeline has them, read through runnel.attach.
local function browse(path)
  local b = setmetatable({ _path = path, _rels = {} }, Browse)
  b._version = runnel.state_version(path) -- before the read: a commit between them reads again
  for _, entry in ipairs(runnel.inspect(path).relations) do
    b._rels[#b._rels + 1] = setmetatable({ _entry = entry, _path = path }, Browsed)
  end
  return b
end

function Browse:relations() return self._rels end
function Browse:relation(name)
  for _, r in ipairs(self._rels) do if r:name() == name then return r end end
end
function Browse:path() return self._path, false end
function Browse:seq() return runnel.inspect(self._path).seq end
function Browse:in_group() return false end
function Browse:close()
  for _, r in ipairs(self._rels) do
    if r._handle then r._handle:close(); r._handle = nil end
  end
end

-- ---- the session: the current pipeline and what prints ----

local session = {
  opened = {},                 -- pipelines and views the REPL opened: closed when it ends
  watched = setmetatable({}, { __mode = "k" }), -- pipeline -> { [relation name] = true }
  watch = "on",                -- "on", "off" or a set of relation names
  limit = 20,                  -- rows per grid, changes per group
  group_start = setmetatable({}, { __mode = "k" }), -- pipeline -> stats().changes at begin
}
local watch_opts = setmetatable({}, { __mode = "k" }) -- runnel.watch's options: .limit updates them

local function watching(name)
  if session.watch == "on" then return true end
  if session.watch == "off" then return false end
  return session.watch[name] == true
end

-- Prints a relation's rows as a grid; a relation that cannot be read says why.
local function show_relation(rel)
  local ok, text = pcall(runnel.format, rel, session.limit)
  return ok and text or "error: " .. tostring(text)
end

local function show(v)
  if is_relation(v) then return show_relation(v) end
  if getmetatable(v) == Browse then return tostring(v) end
  return pretty(v)
end

local function watch_relation(p, rel)
  local set = session.watched[p]
  if set[rel:name()] or rel:schema().kind == "lookup" then return end
  set[rel:name()] = true
  local name = rel:name()
  local opts = { print = function(text) if watching(name) then print(text) end end, limit = session.limit }
  watch_opts[opts] = true
  pcall(runnel.watch, rel, opts)
end

-- p:begin records where the group starts, so an error that rolls it back
-- can say how many earlier changes went with it.
-- Both ask p protected, whatever it holds: the user may set p to anything
-- (p = 5), and `p.stats` on a number raised outside any pcall, ending the
-- REPL at the next line ("lua/repl.lua:207: attempt to index a number value").
local function changes_of(p)
  local ok, n = pcall(function() return p:stats().changes end)
  return ok and math.type(n) == "integer" and n or 0
end

local function in_group(p)
  local ok, open = pcall(function() return p:in_group() end)
  return ok and open == true
end

-- A browsed state's relations become globals (those whose names are free
-- Lua names), so typing one prints its rows.
local function bind_relations(b)
  for _, rel in ipairs(b:relations()) do
    local name = rel:name()
    if name:match("^[%a_][%w_]*$") and _G[name] == nil then _G[name] = rel end
  end
end

-- Reads a browsed state's catalogue again (another process may have
-- declared, dropped or written since): each relation keeps its value, so
-- its global goes on naming it; one that left the catalogue leaves its
-- global too, and one declared since gets one. Only when the state
-- committed since the last read (its LMDB transaction id, a read of the
-- lock and meta pages): the catalogue's walk is left for when it changed.
local function refresh(b)
  local known, version = pcall(runnel.state_version, b._path)
  if known and version == b._version then return end
  local ok, seen = pcall(runnel.inspect, b._path)
  if not ok then return end -- the state went away: what was read stays
  b._version = known and version or nil -- taken before the read: a commit between them reads again
  local before = {}
  for _, r in ipairs(b._rels) do before[r._entry.name] = r end
  b._rels = {}
  for _, entry in ipairs(seen.relations) do
    local r = before[entry.name] or setmetatable({ _path = b._path }, Browsed)
    before[entry.name] = nil
    if r._handle and (r._entry.kind ~= entry.kind or r._entry.columns ~= entry.columns) then
      r._handle:close(); r._handle = nil -- declared again otherwise: attach again
    end
    r._entry = entry
    b._rels[#b._rels + 1] = r
  end
  for name, r in pairs(before) do
    if r._handle then r._handle:close() end
    if _G[name] == r then _G[name] = nil end
  end
  bind_relations(b)
end

local function adopt(p)
  if _G.p ~= p then _G.p = p end
  if getmetatable(p) == Browse then
    if not session.watched[p] then session.watched[p] = {}; bind_relations(p) end
    return
  end
  if session.watched[p] then return end
  session.watched[p] = {}
  for _, rel in ipairs(p:relations()) do watch_relation(p, rel) end
  p:on_declare(function(rel) watch_relation(p, rel) end)
end

local function describe(p)
  if getmetatable(p) == Browse then
    return ("`p` is a read-only view of the state at %s"):format(p:path())
  end
  local ok, path, temp = pcall(p.path, p)
  if not ok then return "`p` is closed" end
  return temp and "`p` is a temporary pipeline" or ("`p` is the state at %s"):format(path)
end

-- Closes what the REPL opened, and forgets the globals that named its
-- relations (a browsed state's, a script's): they would read a state left
-- behind, or a closed pipeline. Relations are the same values each time.
local function close_opened()
  local closed = {}
  for _, opened in ipairs(session.opened) do
    local ok, rels = pcall(opened.relations, opened)
    for _, rel in ipairs(ok and rels or {}) do closed[rel] = true end
  end
  for i = #session.opened, 1, -1 do
    local opened = session.opened[i]
    local ok, path, temp = pcall(function() return opened:path() end)
    local start = session.group_start[opened]
    local n = start and changes_of(opened) - start
    if getmetatable(opened) ~= Browse and ok and not temp and in_group(opened) and n ~= 0 then -- the state stays, its group not
      print(("note: the group open on the state at %s was rolled back%s (p:commit() keeps a group)"):format(path,
        n and (": %d change%s discarded"):format(n, n == 1 and "" or "s") or ""))
    end
    pcall(opened.close, opened)
  end
  session.opened = {}
  for name, v in pairs(_G) do
    if closed[v] then _G[name] = nil end
  end
end

-- ---- commands ----

-- "known: a, b" or "none declared": p's relations, named as grids name them.
local function known(p, what)
  local names = {}
  for _, r in ipairs(p:relations()) do names[#names + 1] = visible(r:name()) end
  return #names > 0 and (what or "known: ") .. table.concat(names, ", ") or "none declared"
end

local function tables(p)
  local rows = {}
  for _, rel in ipairs(p:relations()) do
    local s = rel:schema()
    local ok, n = true, ""
    if s.kind == "table" or getmetatable(rel) == Browsed then ok, n = pcall(rel.count, rel) end
    rows[#rows + 1] = { rel:name(), s.kind, ok and tostring(n) or "?" }
  end
  print(runnel.grid({ "relation", "kind", "rows" }, rows, { false, false, true }))
end

local function schema(p, name)
  local rel = name ~= "" and p:relation(name)
  if not rel then
    if name == "" then -- not a relation named "": the name was left out
      print(("error: .schema takes NAME (%s)"):format(known(p, "a relation: ")))
      return
    end
    print(("no relation %s (%s)"):format(quote(name), known(p)))
    return
  end
  local s, rows = rel:schema(), {}
  local keys = {}
  for _, k in ipairs(s.key or {}) do keys[k] = true end
  for _, c in ipairs(s.columns) do
    rows[#rows + 1] = { c.name, c.type, c.null and "null" or "", keys[c.name] and "key" or "",
                        c.default ~= nil and runnel.format_value(c.default) or "" }
  end
  print(("%s %s"):format(s.kind, quote(s.name)))
  print(runnel.grid({ "column", "type", "null", "key", "default" }, rows))
end

-- The words of a command's argument: "…" or '…' quote one with spaces.
-- nil and a message for an unclosed quote.
local function words(argument, what)
  local out, rest = {}, argument
  while true do
    rest = rest:match("^%s*(.*)$")
    if rest == "" then return out end
    local q = rest:sub(1, 1)
    local word, after
    if q == '"' or q == "'" then
      word, after = rest:match("^" .. q .. "(.-)" .. q .. "(.*)$")
      if not word then return nil, ("error: a %s opened with %s is not closed"):format(what or "path", q) end
    else
      word, after = rest:match("^(%S+)(.*)$")
    end
    out[#out + 1], rest = word, after
  end
end

-- A watched name as .watch takes it (words): in quotes when it holds a
-- space or a quote, or is "on" or "off", else the echo "watch a b u" of
-- the names "a b" and u read as three, "watch on" of the relation on as
-- the mode.
local function typed_name(name)
  local shown = visible(name)
  if name ~= "" and name ~= "on" and name ~= "off" and not name:find("[%s\"']") then return shown end
  return name:find('"', 1, true) and "'" .. shown .. "'" or '"' .. shown .. '"'
end

-- .watch REL…: a name that is no relation of p is refused, the watch kept
-- (taken, it silenced every relation for one that never prints).
local function set_watch(p, arg)
  if arg == "" then
  elseif arg == "on" or arg == "off" then session.watch = arg
  else
    local set, names, err = {}, words(arg, "name") -- "a b" in quotes: a name with a space, as .open takes a path
    if not names then print(err) return end
    for _, name in ipairs(names) do
      if not p:relation(name) then
        print(("error: no relation %s to watch (%s)"):format(quote(name), known(p)))
        return
      end
      set[name] = true
    end
    session.watch = set
  end
  if type(session.watch) == "string" then print("watch " .. session.watch) return end
  local names = {}
  for name in pairs(session.watch) do names[#names + 1] = typed_name(name) end
  table.sort(names)
  print("watch " .. table.concat(names, " "))
end

local function set_limit(arg)
  if arg ~= "" then
    local n = math.tointeger(tonumber(arg))
    if not n or n < 0 then print("error: .limit takes a number of rows >= 0") return end
    session.limit = n
    for opts in pairs(watch_opts) do opts.limit = n end
  end
  print("limit " .. session.limit)
end

-- Completion candidates for readline: relation names after ".schema " or
-- inside a string; otherwise globals, or the fields and methods of the
-- value before a "." or ":" (relations and pipelines list their methods).
-- Names that start with "_" are private: offered only once "_" is typed.
function M.complete(line, start)
  local before = line:sub(1, start)
  local word = line:sub(start + 1)
  local out = {}
  local function add(name, prefix)
    if type(name) ~= "string" or name:sub(1, #word) ~= word then return end
    if name:sub(1, 1) == "_" and word:sub(1, 1) ~= "_" then return end
    out[#out + 1] = (prefix or "") .. name
  end
  local in_string = select(2, before:gsub('"', "")) % 2 == 1 or select(2, before:gsub("'", "")) % 2 == 1
  if before:match("^%s*%.schema%s+$") or before:match("^%s*%.watch%s+") or in_string then
    local ok, rels = pcall(function() return _G.p:relations() end)
    for _, rel in ipairs(ok and rels or {}) do add(rel:name()) end
  elseif before:match("^%s*%.$") then
    for _, c in ipairs{ "help", "tables", "schema", "open", "load", "watch", "limit", "traceback", "quit" } do add(c) end
  else
    local path = before:match("([%w_%.:]+)[%.:]$")
    local seen = {}
    local function fields(t)
      for k in pairs(t) do if not seen[k] then seen[k] = true; add(k) end end
    end
    if path then
      local v = _G
      for part in path:gmatch("[^%.:]+") do v = type(v) == "table" and v[part] or (pcall(function() return v[part] end) and v[part]) end
      if type(v) == "table" then fields(v) end
      local mt = getmetatable(v)
      if type(mt) == "table" and type(mt.__index) == "table" then fields(mt.__index) end
    else
      fields(_G)
      for _, kw in ipairs{ "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "if",
                           "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while" } do
        add(kw)
      end
    end
  end
  table.sort(out)
  return out
end

-- The error text, with what happened to a group that was open: runnel
-- rolls back the whole group when a change in it fails.
local function error_text(msg, p, before)
  local start = session.group_start[p]
  if start and not in_group(p) then
    session.group_start[p] = nil
    local n = before - start
    return ("error: %s  (group rolled back: %d earlier change%s discarded)"):format(msg, n, n == 1 and "" or "s")
  end
  return "error: " .. msg
end

-- Runs fn; prints its results (or its error). Returns the results' table.
local function run_chunk(fn, traceback, ...)
  local p = _G.p
  local results = table.pack(rl.call(function(e)
    local ok, msg = true, e
    if type(e) ~= "string" then ok, msg = pcall(pretty, e) end -- its metamethods may raise too
    if not ok then msg = "(error object is a " .. type(e) .. " value)" end
    return traceback and debug.traceback(msg, 2) or msg
  end, fn, ...))
  local before = p and getmetatable(p) ~= Browse and changes_of(p) or 0
  if not results[1] then
    -- the terminal echoed "^C" where the cursor was
    if rl.isatty() and tostring(results[2]):match("interrupted!$") then io.write("\n") end
    print(p and getmetatable(p) ~= Browse and error_text(tostring(results[2]), p, before) or "error: " .. tostring(results[2]))
    return nil
  end
  -- p == p: p = 0/0 is no table key ("table index is NaN" ended the session)
  if p and p == p and not (getmetatable(p) ~= Browse and in_group(p)) then session.group_start[p] = nil end
  return results
end

-- A value whose metamethods (__tostring, __index, __pairs …) raise prints
-- as the error they raised: the session goes on.
local function print_results(results)
  if not results then return end
  for i = 2, results.n do
    local ok, text = pcall(show, results[i])
    print(ok and text or "error: printing the value: " .. (type(text) == "string" and text or type(text)))
  end
end

-- After a chunk or script: a pipeline it returned, or a new global p,
-- becomes the current one.
local function follow(results)
  local function pipeline(v) local ok, s = pcall(tostring, v) return ok and type(s) == "string" and s:match("^runnel%.Pipeline ") end
  if results and results.n >= 2 and pipeline(results[2]) then adopt(results[2]) end
  local p = _G.p
  if p ~= nil and (pipeline(p) or getmetatable(p) == Browse) then adopt(p) end
end

-- Runs a script: true, or nil and why it could not be loaded (an error
-- it raises prints, and the session goes on).
local function run_file(file, ...)
  local fn, err = loadfile(file)
  if not fn then return nil, err end
  follow(run_chunk(fn, false, ...))
  return true
end

local function file_exists(path)
  return require("runnel.core")._exists(path) -- not opened: a FIFO named data.mdb would block the REPL
end

-- .open DIR [FILE]: with FILE, the state at DIR opens as `p` and FILE
-- declares its relations on it (as rn_run_lua gives a script `p`); without
-- one, an existing state is browsed read-only and a new one opened empty.
-- Whether path names a file, not a directory (reading it fails EISDIR).
local function is_file(path)
  local f = io.open(path)
  if not f then return false end
  local _, _, code = f:read(1)
  f:close()
  return code ~= 21
end

-- Returns true, or nil and why (p unchanged).
local function open_state(dir, file, quiet)
  if dir == nil or dir == "" then return nil, ".open needs a state directory" end
  if is_file(dir) then return nil, ("%s is a file; a state is a directory (.load runs a script)"):format(dir) end
  if file then -- a script that cannot be read opens no state
    local fn, err = loadfile(file)
    if not fn then return nil, err end
  end
  local ok, p
  if not file and file_exists(dir .. "/data.mdb") then
    ok, p = pcall(browse, dir)
    if ok then close_opened() end
  else
    -- The current p stays until the new one opens: a failed .open keeps
    -- the work (a temporary state is removed when closed). Only a state
    -- the REPL itself holds (one writer per state) closes its own first.
    ok, p = pcall(runnel.open, dir)
    if not ok and tostring(p):find(" in this process", 1, true) then
      close_opened()
      ok, p = pcall(runnel.open, dir)
    end
    if ok then close_opened() end
  end
  if not ok then return nil, tostring(p) end
  session.opened[#session.opened + 1] = p
  adopt(p)
  if not quiet then print(describe(p)) end
  if file then return run_file(file, p) end
  return true
end

-- Whether src's last line ends inside a short string that goes on over
-- the newline: after an odd number of "\\" (an escaped newline), or a
-- "\\z" and spaces (skipped, newlines too).
local function continues_string(src)
  local slashes = src:match("(\\+)$") or src:match("(\\+)z%s*$")
  return slashes ~= nil and #slashes % 2 == 1
end

-- A leading `local` is dropped so the names outlive their line; a
-- <const> goes with it (the name becomes a global), while a line with a
-- <close> stays as typed: its value closes at the end of the line, as in
-- lua5.4 (a global would never be closed).
local function drop_local(src)
  src = src:gsub("^%s*local%s+function%s", "function ")
  local names, rest = src:match("^%s*local%s+([%a_][%w_%s,<>]*)(.*)$")
  if not names then return src end
  local plain = names:gsub("%s*<%s*const%s*>", "")
  if plain:find("<", 1, true) then return src end -- <close>, or an attribute Lua names as unknown
  return plain .. rest
end

-- Expressions are compiled as `return pack(<line>)`, so the last call is
-- not a tail call and an error in it still names stdin's line.
local function compile(src)
  src = drop_local(src)
  local fn = load("return (...)(" .. src .. "\n)", "=stdin", "t")
  if fn then return function() return fn(table.pack) end, true end
  local err
  fn, err = load(src, "=stdin", "t")
  if fn then return fn end
  if err:match("unfinished string near <eof>$") and not continues_string(src) then
    return nil, select(2, load(src .. "\n", "=stdin", "t")) -- a short string ends on its line: Lua names it
  end
  if err:match("<eof>$") then return nil, "incomplete" end
  return nil, err
end

local function unpacked(results)
  if not results then return nil end
  local packed = results[2]
  local out = { true, n = packed.n + 1 }
  for i = 1, packed.n do out[i + 1] = packed[i] end
  return out
end

-- In the REPL, runnel.watch of a relation the REPL already prints adds it
-- to .watch instead of printing each group twice; os.exit closes the
-- REPL's pipelines first (a temporary state is removed on every exit).
local function patch_globals()
  local watch = runnel.watch
  function runnel.watch(rel, opts)
    local ok, p = pcall(rel.pipeline, rel)
    if opts == nil and ok and session.watched[p] and session.watched[p][rel:name()] then
      if type(session.watch) == "table" then session.watch[rel:name()] = true
      elseif session.watch == "off" then session.watch = { [rel:name()] = true } end
      return rel
    end
    return watch(rel, opts)
  end
  local exit = os.exit
  function os.exit(...)
    close_opened()
    return exit(...)
  end
end

-- Rows that get() and rows() return are tagged with their column order,
-- and p:begin() notes where its group starts (see error_text).
local function patch_methods()
  local core = require "runnel.core"
  core._dsl(patch_methods) -- the wrappers' frames are skipped: errors name the user's line
  local Pipeline, Relation = core.Pipeline, core.Relation
  local begin, get, rows = Pipeline.begin, Relation.get, Relation.rows
  function Pipeline.begin(p, ...)
    local r = table.pack(begin(p, ...))
    session.group_start[p] = changes_of(p)
    return table.unpack(r, 1, r.n)
  end
  local function columns_of(r)
    local ok, s = pcall(r.schema, r)
    if not ok then return nil end
    local names = {}
    for i, c in ipairs(s.columns) do names[i] = c.name end
    return names
  end
  function Relation.get(r, ...)
    local row = get(r, ...)
    if type(row) == "table" then row_columns[row] = columns_of(r) end
    return row
  end
  function Relation.rows(r, ...)
    local it, st, ctl = rows(r, ...)
    local names = columns_of(r)
    return function(...)
      local row, id = it(...)
      if type(row) == "table" then row_columns[row] = names end
      return row, id
    end, st, ctl
  end
end

local function banner(p)
  print(("%s — a stream processor in your program. %s; .help for help."):format(runnel._VERSION, describe(p)))
end

-- .open DIR [FILE] and .load FILE: their paths, or nil after saying why.
local function paths(cmd, argument, most)
  local list, err = words(argument)
  if list and #list >= 1 and #list <= most then return list end
  print(err or ("error: .%s takes %s (quote a path with spaces)"):format(cmd, most == 2 and "DIR [FILE]" or "FILE"))
end

-- Whether p is a pipeline or a browsed state, which .tables, .schema and
-- .watch read; else says what p holds (the user may have set p = nil, and
-- the command raised inside the REPL's own code: "lua/repl.lua:319:
-- attempt to index a nil value (local 'p')").
local function usable(p, cmd)
  local ok, text = pcall(tostring, p)
  if getmetatable(p) == Browse or ok and type(text) == "string" and text:match("^runnel%.Pipeline ") then return true end
  print(("error: .%s reads the pipeline p, and p is %s (.open DIR makes the state at DIR p; p = runnel.open() a "
    .. "temporary one)"):format(cmd, p == nil and "nil" or "a " .. type(p) .. " value"))
  return false
end

local function command(cmd, argument, state)
  local p = _G.p
  if getmetatable(p) == Browse then refresh(p) end
  if cmd == "quit" or cmd == "exit" then return "quit"
  elseif cmd == "help" then print(HELP)
  elseif (cmd == "tables" or cmd == "schema" or cmd == "watch" and not ({ [""] = 1, on = 1, off = 1 })[argument])
    and not usable(p, cmd) then
    return
  elseif cmd == "tables" then tables(p)
  elseif cmd == "schema" then
    local q, list, err = argument:sub(1, 1), { argument }, nil -- unquoted, the whole argument is the name, as .load's path
    if q == '"' or q == "'" then list, err = words(argument, "name") end
    if not list or #list > 1 then print(err or "error: .schema takes one NAME (quote a name with spaces)")
    else schema(p, list[1] or "") end
  elseif cmd == "open" then
    local list = paths("open", argument, 2)
    local ok, err = true, nil
    if list then ok, err = open_state(list[1], list[2]) end
    if not ok then print("error: " .. err) end
  elseif cmd == "load" then
    local q, list = argument:sub(1, 1), { argument } -- unquoted, the whole argument is the path
    if q == '"' or q == "'" or argument == "" then list = paths("load", argument, 1) end
    local ok, err = true, nil
    if list then ok, err = run_file(list[1], p) end
    if not ok then print("error: " .. err) end
  elseif cmd == "watch" then set_watch(p, argument)
  elseif cmd == "limit" then set_limit(argument)
  elseif cmd == "traceback" then
    state.traceback = not state.traceback
    print("tracebacks " .. (state.traceback and "on" or "off"))
  else print(("unknown command .%s (.help lists them)"):format(cmd)) end
end

local function loop(tty, history)
  local state, buffer = { traceback = false }, nil
  while not rl.terminated() do
    local line = rl.readline(buffer and ">> " or "> ")
    if line == nil then
      if tty then io.write("\n") end -- Ctrl-D: the shell's prompt on a line of its own
      if buffer then -- input ended inside a statement: it is not run, and the user is told
        print("error: " .. tostring(select(2, load(buffer, "=stdin", "t"))) .. " (input ended inside a statement)")
      end
      break
    end
    if line == false then -- Ctrl-C: the line and any pending input are dropped
      buffer = nil
    else
      if tty and line:match("%S") then rl.add_history(line, history) end
      local cmd, argument = line:match("^%s*%.(%a+)%s*(.-)%s*$")
      if not buffer and cmd then
        local ok, result = pcall(command, cmd, argument, state)
        if not ok then print("error: " .. tostring(result))
        elseif result == "quit" then break end
      elseif buffer or line:match("%S") then
        local src = buffer and buffer .. "\n" .. line or line
        local fn, err = compile(src)
        if fn then
          buffer = nil
          if getmetatable(_G.p) == Browse then refresh(_G.p) end -- a cheap test when nothing changed
          local results = run_chunk(fn, state.traceback)
          if err == true then results = unpacked(results) end
          print_results(results)
          follow(nil)
        elseif err == "incomplete" then
          buffer = src
        else
          buffer = nil
          print("error: " .. err)
        end
      end
    end
  end
end

-- main(state_dir, file): state_dir (or nil) opens as `p` (see open_state);
-- file runs first. Returns the exit code.
function M.main(first, second)
  local tty = rl.isatty()
  rl.catch_signals()
  patch_globals()
  patch_methods()
  _G.runnel = runnel
  local dir, file = first, second
  if first and not second and first:match("%.lua$") and not file_exists(first .. "/data.mdb") then dir, file = nil, first end
  local ok, err = pcall(function()
    local p = runnel.open()
    session.opened[1] = p
    adopt(p)
    local history = os.getenv("HOME") and os.getenv("HOME") .. "/.runnel_history"
    if tty and history then rl.history_file(history, false) end
    -- A state or script the command line names that cannot be opened
    -- ends the REPL, exit 1: the session would be on another `p`.
    local opened, why = true, nil
    if dir then
      opened, why = open_state(dir, file, true)
    elseif file then
      opened, why = run_file(file, p)
    end
    if not opened then error(why, 0) end
    if tty then banner(_G.p) end
    loop(tty, history)
    if tty and history then rl.history_file(history, true) end
  end)
  close_opened()
  if not ok then
    io.stderr:write("runnel: ", tostring(err), "\n")
    return 1
  end
  return 0
end

return M
