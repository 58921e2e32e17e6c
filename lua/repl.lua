-- repl.lua — the runnel REPL.
--
-- As lua.c does: a line is first tried as `return <line>` so expressions
-- print; input that ends in the middle of a statement (the parser reports
-- <eof>) continues on the next line. Each chunk runs with SIGINT raising an
-- error; errors print without a traceback unless .traceback is on. A
-- temporary pipeline `p` is open; every relation declared on it is watched,
-- so each committed group's changes print as grids.
local runnel = require "runnel"
local rl = require "runnel.readline"

local M = {}

local HELP = [[
  p                     a temporary pipeline, removed when the REPL ends
  p:table(name, cols)   declare a table;  p:stream(name, cols) a stream
  t:insert{…} t:update{…} t:upsert{…} t:delete{…}   changes (each its own group)
  p:begin() … p:commit()                            several changes in one group
  t                     print a table as a grid (runnel.show(t, limit) too)
  .tables               relations and their row counts
  .schema NAME          a relation's columns and key
  .traceback            toggle tracebacks on errors
  .quit                 leave (Ctrl-D too)
  A leading `local` is dropped, so `local t = …` stays visible on later lines.]]

local function quote(s)
  return (("%q"):format(s):gsub("\\\n", "\\n"))
end

-- Lua values as Lua-like text; rows print as {id = 1, name = "ann"}.
local function pretty(v, seen)
  local t = type(v)
  if v == runnel.null then return "runnel.null" end
  if t == "string" then return quote(v) end
  if t ~= "table" then return tostring(v) end
  seen = seen or {}
  if seen[v] then return "<cycle>" end
  seen[v] = true
  local parts, n = {}, #v
  for i = 1, n do parts[i] = pretty(v[i], seen) end
  local keys = {}
  for k in pairs(v) do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    local key = type(k) == "string" and k:match("^[%a_][%w_]*$") and k or "[" .. pretty(k, seen) .. "]"
    parts[#parts + 1] = key .. " = " .. pretty(v[k], seen)
  end
  seen[v] = nil
  return "{" .. table.concat(parts, ", ") .. "}"
end
M.pretty = pretty

local function show(v)
  if tostring(v):match("^runnel%.Relation ") and v:schema().kind == "table" then
    return runnel.show(v)
  end
  return pretty(v)
end

local function tables(p)
  local rows = {}
  for _, rel in ipairs(p:relations()) do
    local s = rel:schema()
    local count = s.kind == "table" and tostring(rel:count()) or ""
    rows[#rows + 1] = { rel:name(), s.kind, count }
  end
  print(runnel.grid({ "relation", "kind", "rows" }, rows, { false, false, true }))
end

local function schema(p, name)
  local rel = p:relation(name)
  if not rel then print(("no relation %s (.tables lists them)"):format(quote(name))) return end
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

-- Completion candidates for readline: relation names after ".schema " or
-- inside a string; otherwise globals, or the fields and methods of the
-- value before a "." or ":" (relations and pipelines list their methods).
function M.complete(line, start)
  local before = line:sub(1, start)
  local word = line:sub(start + 1)
  local out = {}
  local function add(name, prefix)
    if type(name) == "string" and name:sub(1, #word) == word then out[#out + 1] = (prefix or "") .. name end
  end
  local in_string = select(2, before:gsub('"', "")) % 2 == 1 or select(2, before:gsub("'", "")) % 2 == 1
  if before:match("^%s*%.schema%s+$") or in_string then
    for _, rel in ipairs(_G.p:relations()) do add(rel:name()) end
  elseif before:match("^%s*%.$") then
    for _, c in ipairs{ "help", "tables", "schema", "traceback", "quit" } do add(c) end
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
      if mt and type(mt.__index) == "table" then fields(mt.__index) end
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

local function run_chunk(fn, traceback)
  local results = table.pack(xpcall(rl.call, function(e)
    local msg = type(e) == "string" and e or pretty(e)
    return traceback and debug.traceback(msg, 2) or msg
  end, fn))
  if not results[1] then
    print("error: " .. tostring(results[2]))
    return
  end
  for i = 2, results.n do print(show(results[i])) end
end

-- Compiles buffered input: an expression first, then a statement. Returns
-- the function, or nil and "incomplete", or nil and the syntax error.
-- A leading `local` is dropped: each chunk is its own scope, and a REPL
-- user who writes `local t = …` means to use t on the next line.
local function compile(src)
  src = src:gsub("^%s*local%s+function%s", "function "):gsub("^%s*local%s+", "")
  local fn = load("return " .. src, "=stdin", "t")
  if fn then return fn end
  local err
  fn, err = load(src, "=stdin", "t")
  if fn then return fn end
  if err:match("<eof>$") then return nil, "incomplete" end
  return nil, err
end

function M.main(file)
  local tty = rl.isatty()
  local p = runnel.open()
  _G.p, _G.runnel = p, runnel
  p:on_declare(function(rel) runnel.watch(rel) end)
  local history = os.getenv("HOME") and os.getenv("HOME") .. "/.runnel_history"
  if tty then
    if history then rl.history_file(history, false) end
    print(("%s — a stream processor in your program. `p` is a temporary pipeline; .help for help."):format(runnel._VERSION))
  end
  if file then
    local fn, err = loadfile(file)
    if fn then run_chunk(fn, false) else print("error: " .. err) end
  end
  local traceback, buffer = false, nil
  while true do
    local line = rl.readline(buffer and ">> " or "> ")
    if not line then break end
    if tty and line:match("%S") then rl.add_history(line, history) end
    local cmd, argument = line:match("^%s*%.(%a+)%s*(.-)%s*$")
    if not buffer and cmd then
      if cmd == "quit" or cmd == "exit" then break
      elseif cmd == "help" then print(HELP)
      elseif cmd == "tables" then tables(p)
      elseif cmd == "schema" then schema(p, argument)
      elseif cmd == "traceback" then
        traceback = not traceback
        print("tracebacks " .. (traceback and "on" or "off"))
      else print(("unknown command .%s (.help lists them)"):format(cmd)) end
    elseif buffer or line:match("%S") then
      local src = buffer and buffer .. "\n" .. line or line
      local fn, err = compile(src)
      if fn then
        buffer = nil
        run_chunk(fn, traceback)
      elseif err == "incomplete" then
        buffer = src
      else
        buffer = nil
        print("error: " .. err)
      end
    end
  end
  if tty and history then rl.history_file(history, true) end
  p:close()
  return 0
end

return M
