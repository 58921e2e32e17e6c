-- runnel/state.lua — the CLI's commands on a state another process may be
-- writing: runnel query (rows of any relation runnel.attach reads, in one
-- LMDB read transaction: whole groups only) and runnel drop (a relation
-- removed).
-- Each returns the exit code; messages go to stdout and stderr.
local runnel = require "runnel"

local M = {}

-- code: 1 by default, 2 for a usage error (as runnel help says).
local function fail(msg, code)
  io.stderr:write("runnel: ", msg, "\n")
  return code or 1
end

local function is_state(dir)
  return require("runnel.core")._exists(dir .. "/data.mdb") -- not opened: a FIFO would block, an unreadable file say nothing
end

-- ---- values as text ----

local function csv(s)
  if s:find('[,"\r\n]') then return '"' .. s:gsub('"', '""') .. '"' end
  return s
end

-- A value as a grid or CSV cell shows it. text: its JSON as NDJSON sinks
-- write it (attached:_rows_json), which a Lua table cannot tell (a map
-- from a list, an empty one from the other); bytes, and a string that is
-- not UTF-8 (held as bytes), as their base64.
local function cell(v, text, col)
  if v == nil then return "" end
  if type(v) == "table" then return text end
  if type(v) == "string" and (col.type == "bytes" or not utf8.len(v)) then return (text:gsub('^"(.*)"$', "%1")) end
  return runnel.format_value(v)
end

-- ---- runnel query STATE REL [KEY…] [--limit N] [--format grid|ndjson|csv] ----

local FORMATS = { grid = true, ndjson = true, csv = true }

local function query_args(args)
  local o = { keys = {}, format = "grid" }
  local i, options = 1, true
  while i <= #args do
    local a = args[i]
    if options and a == "--" then options, i = false, i + 1 -- what follows is a KEY even if it starts with --
    elseif options and a:sub(1, 2) == "--" and a ~= "--limit" and a ~= "--format" then
      return nil, ("query: unknown option %s (--limit N, --format grid|ndjson|csv; -- before a KEY that starts "
                   .. "with --)"):format(a)
    elseif options and (a == "--limit" and o.limit or a == "--format" and o.format_given) then
      return nil, ("query: %s given twice"):format(a) -- the last would win without a word
    elseif options and a == "--limit" then
      o.limit = math.tointeger(tonumber(args[i + 1]))
      if not o.limit or o.limit < 0 then return nil, "query: --limit takes a count of rows" end
      i = i + 2
    elseif options and a == "--format" then
      o.format, o.format_given = args[i + 1], true
      if not FORMATS[o.format] then return nil, "query: --format takes grid, ndjson or csv" end
      i = i + 2
    elseif not o.state then o.state, i = a, i + 1
    elseif not o.rel then o.rel, i = a, i + 1
    else o.keys[#o.keys + 1], i = a, i + 1 end
  end
  if not o.state or not o.rel then
    return nil, "usage: runnel query STATE REL [KEY…] [--limit N] [--format grid|ndjson|csv]"
  end
  return o
end

-- A key part's text as a value of column c: a number for an int or float
-- column, true/false for a bool, else the text as it is (a string key "007"
-- stays a string).
local function key_value(text, c)
  if c.type == "int" or c.type == "float" then return tonumber(text) or text end
  if c.type == "bool" and (text == "true" or text == "false") then return text == "true" end
  return text
end

-- The parts of a key of several columns: "eu,7" -> { "eu", "7" }; a part
-- holding a comma or a quote is written in double quotes, a quote in it
-- doubled, as --format csv writes a cell: "\"a,b\",7" -> { "a,b", "7" }.
-- nil when a quote is not closed or text follows it.
local function key_parts(text)
  local parts, i = {}, 1
  while true do
    if text:sub(i, i) == '"' then
      local piece, j = {}, i + 1
      while true do
        local q = text:find('"', j, true)
        if not q then return nil end
        piece[#piece + 1] = text:sub(j, q - 1)
        if text:sub(q + 1, q + 1) ~= '"' then j = q + 1; break end
        piece[#piece + 1], j = '"', q + 2
      end
      parts[#parts + 1] = table.concat(piece)
      local after = text:sub(j, j)
      if after == "" then return parts end
      if after ~= "," then return nil end
      i = j + 1
    else
      local comma = text:find(",", i, true)
      parts[#parts + 1] = text:sub(i, comma and comma - 1 or #text)
      if not comma then return parts end
      i = comma + 1
    end
  end
end

-- A key given on the command line: "7" (a key of one column is the whole
-- text, commas and quotes too), or "eu,7" for a key of two columns.
local function key_of(text, key_cols)
  local parts = #key_cols == 1 and { text } or key_parts(text)
  if not parts then
    return nil, ('query: key %q has a quote not closed, or text after one: a part holding a comma is written in '
                 .. 'double quotes, "a,b", a quote in it doubled'):format(text)
  end
  if #parts ~= #key_cols then
    local names = {}
    for i, c in ipairs(key_cols) do names[i] = c.name end
    return nil, ("query: key %q has %d part%s; the key is %d column%s (%s), parts separated by commas (a part "
                 .. 'holding a comma in double quotes, "a,b")')
                :format(text, #parts, #parts == 1 and "" or "s", #key_cols, #key_cols == 1 and "" or "s",
                        table.concat(names, ", "))
  end
  local key = {}
  for i, c in ipairs(key_cols) do key[c.name] = key_value(parts[i], c) end
  return key
end

-- Whether row holds key (a map of the key columns' values).
local function has_key(row, key)
  for name, v in pairs(key) do
    if row[name] ~= v then return false end
  end
  return true
end

-- The rows of the keys given, in their order, read in one read transaction
-- (rows()): a get per key would read each in its own, and a group another
-- process commits between two gets would show half of it. att:get checks
-- each key first (its type errors name the relation and the column).
-- Also whether the limit left out a row found.
local function rows_of_keys(att, cols, keys, limit)
  local key_cols, wanted = {}, {}
  for _, c in ipairs(cols) do if c.key then key_cols[#key_cols + 1] = c end end
  if #key_cols == 0 then
    local _, name = att:_source()
    return nil, ("query: %s has no key to read by: leave out KEY to print its rows (--limit N for the first N)")
                :format(name)
  end
  for i, text in ipairs(keys) do
    local key, err = key_of(text, key_cols)
    if not key then return nil, err end
    if #keys == 1 then
      local row, json = att:_get_json(key)
      return { row and (limit ~= 0) and { row, nil, json } or nil }, row ~= nil and limit == 0
    end
    att:get(key)
    wanted[i] = key
  end
  local found = {}
  local rows, _, texts = att:_rows_json()
  for r, row in ipairs(rows) do
    for i, key in ipairs(wanted) do
      if not found[i] and has_key(row, key) then found[i] = { row, nil, texts[r] } end
    end
  end
  local picked, more = {}, false
  for i = 1, #keys do
    if found[i] then
      if limit and #picked >= limit then more = true else picked[#picked + 1] = found[i] end
    end
  end
  return picked, more
end

-- The rows to print: all of them (one read transaction), or those of the
-- keys; and whether --limit left out a row (one read past the limit tells,
-- where counting them all would read the whole relation: the walk stops
-- there).
local function selected(att, cols, keys, limit)
  if #keys > 0 then return rows_of_keys(att, cols, keys, limit) end
  local picked = {}
  local rows, ids, texts = att:_rows_json(limit and limit + 1) -- { row, id, its JSON }; one more: whether more exist
  for i, row in ipairs(rows) do
    if limit and #picked >= limit then return picked, true end
    picked[#picked + 1] = { row, ids[i], texts[i] }
  end
  return picked, false
end

-- The grid's footer: the count of rows, or, when --limit cut them, the
-- count shown and that more exist ("(2 rows)" read as if there were two).
local function count_line(n, more)
  return ("(%d row%s%s)"):format(n, n == 1 and "" or "s", more and " shown, more exist" or "")
end

local function print_rows(o, cols, picked, more)
  local names = {}
  for i, c in ipairs(cols) do names[i] = c.name end
  for _, p in ipairs(picked) do -- a row its JSON could not be made of: a damaged row, or out of memory
    if not p[3].line then return fail(("%s: a stored row of %s cannot be read (runnel verify %s)"):format(o.state, o.rel, o.state)) end
  end
  if o.format == "ndjson" then
    for _, p in ipairs(picked) do io.stdout:write(p[3].line, "\n") end
  elseif o.format == "csv" then
    local head = {}
    for i, n in ipairs(names) do head[i] = csv(n) end
    io.stdout:write(table.concat(head, ","), "\n")
    for _, p in ipairs(picked) do
      local cells = {}
      for i, n in ipairs(names) do cells[i] = csv(cell(p[1][n], p[3][i], cols[i])) end
      io.stdout:write(table.concat(cells, ","), "\n")
    end
  else
    local rows, right = {}, {}
    for i, c in ipairs(cols) do right[i] = c.type == "int" or c.type == "float" end
    for r, p in ipairs(picked) do
      local cells = {}
      for i, n in ipairs(names) do cells[i] = cell(p[1][n], p[3][i], cols[i]) end
      rows[r] = cells
    end
    io.stdout:write(runnel.grid(names, rows, right), "\n", count_line(#picked, more), "\n")
  end
end

function M.query(args)
  local o, err = query_args(args)
  if not o then return fail(err, 2) end
  if not is_state(o.state) then return fail(o.state .. ": not a runnel state (no data.mdb)") end
  local ok, att = pcall(runnel.attach, o.state, o.rel)
  if not ok then return fail((tostring(att):gsub("^[^:]*:%d+: ", ""))) end
  local cols = att:columns()
  local picked, more
  ok, picked, more = pcall(selected, att, cols, o.keys, o.limit)
  att:close()
  if not ok then return fail((tostring(picked):gsub("^[^:]*:%d+: ", ""))) end
  if not picked then return fail(more) end -- more: why not
  return print_rows(o, cols, picked, more) or 0
end

-- ---- runnel drop STATE NAME ----

function M.drop(args)
  if #args ~= 2 then return fail("usage: runnel drop STATE NAME", 2) end
  local state, name = args[1], args[2]
  if not is_state(state) then return fail(state .. ": not a runnel state (no data.mdb)") end
  local said = {} -- a durable sink's groups left waiting: the drop's note
  local ok, p = pcall(runnel.open, { path = state, notes = function(line) said[#said + 1] = line end })
  if not ok then return fail((tostring(p):gsub("^[^:]*:%d+: ", ""))) end
  said = {}
  local dropped, err = pcall(p.drop, p, name)
  for _, line in ipairs(said) do
    if line:match('^drop "') then io.stderr:write("runnel: ", line, " (runnel drop-outbox STATE SINK)\n") end
  end
  p:close()
  if not dropped then return fail((tostring(err):gsub("^[^:]*:%d+: ", ""))) end
  io.stdout:write(("dropped %s from %s\n"):format(name, state))
  return 0
end

-- ---- runnel drop-outbox STATE SINK ----

-- The groups waiting for a durable sink no pipeline declares any more
-- (renamed, or its relation dropped), and its record, dropped
-- (p:drop_outbox; OUTBOX-10 in core/outbox.c).
M["drop-outbox"] = function(args)
  if #args ~= 2 then return fail("usage: runnel drop-outbox STATE SINK", 2) end
  local state, sink = args[1], args[2]
  if not is_state(state) then return fail(state .. ": not a runnel state (no data.mdb)") end
  local ok, p = pcall(runnel.open, { path = state, notes = false })
  if not ok then return fail((tostring(p):gsub("^[^:]*:%d+: ", ""))) end
  local dropped, err = pcall(p.drop_outbox, p, sink)
  p:close()
  if not dropped then return fail((tostring(err):gsub("^[^:]*:%d+: ", ""))) end
  io.stdout:write(("dropped the groups waiting for %s from %s\n"):format(sink, state))
  return 0
end

return M
