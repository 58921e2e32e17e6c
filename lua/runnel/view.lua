-- runnel/view.lua — relations as text: runnel.format_value, runnel.grid,
-- runnel.show and runnel.watch (the REPL prints with them). Loaded by
-- runnel.lua, which hands it the module table.
return function(runnel, core)
  core._dsl(function() end) -- a file of the DSL: errors raised here name the user's line
  local raise_here = core._raise

  local function fmt_value(v)
    if v == nil or v == runnel.null then return "null" end
    local t = type(v)
    if t == "string" then return v end
    if t == "number" or t == "boolean" then return tostring(v) end
    if t == "table" then
      local parts, n = {}, #v
      for i = 1, n do parts[i] = fmt_value(v[i]) end
      local keys = {}
      for k in pairs(v) do
        if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
      end
      table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
      for _, k in ipairs(keys) do parts[#parts + 1] = tostring(k) .. "=" .. fmt_value(v[k]) end
      return "{" .. table.concat(parts, ", ") .. "}"
    end
    return tostring(v)
  end
  runnel.format_value = fmt_value

  local function width(s)
    return utf8.len(s) or #s
  end

  -- A cell's control characters as Lua writes them: a newline would break
  -- the grid's row, and ESC, BEL or a C1 control (U+009B is CSI) would go
  -- to the terminal as a command (recolour, clear, retitle).
  local ESCAPES = { ["\n"] = "\\n", ["\t"] = "\\t", ["\r"] = "\\r" }

  -- A byte that is part of no UTF-8 character (a bytes value, a cut
  -- string) as \ddd: raw, the terminal shows garbage or takes it as the
  -- start of a character. Such bytes are >= 128: always three digits.
  local function utf8_only(s)
    if utf8.len(s) then return s end
    local out, i = {}, 1
    while i <= #s do
      local n, bad = utf8.len(s, i)
      if n then out[#out + 1] = s:sub(i) break end
      out[#out + 1] = s:sub(i, bad - 1) .. ("\\%d"):format(s:byte(bad))
      i = bad + 1
    end
    return table.concat(out)
  end

  local function visible(s)
    s = utf8_only(s)
    -- three digits when a digit follows, as Lua's %q: "\27" then "1" is not "\271"
    s = s:gsub("([%c\127])(%d?)", function(c, d)
      return (ESCAPES[c] or (d == "" and "\\%d" or "\\%03d"):format(c:byte())) .. d
    end)
    return (s:gsub("\194([\128-\159])", function(c) return ("\\u{%x}"):format(c:byte()) end))
  end

  core._visible = visible -- the REPL's messages name relations as grids do

  --- runnel.grid(headers, rows [, right]) -> string: an aligned text table.
  -- rows are lists of cell strings; right[i] aligns column i to the right.
  function runnel.grid(headers, rows, right)
    right = right or {}
    local w = {}
    for i, h in ipairs(headers) do w[i] = width(visible(h)) end
    for _, r in ipairs(rows) do
      for i = 1, #headers do w[i] = math.max(w[i], width(visible(r[i] or ""))) end
    end
    local function line(cells)
      local out = {}
      for i = 1, #headers do
        local c = visible(cells[i] or "")
        local pad = (" "):rep(w[i] - width(c))
        out[i] = right[i] and pad .. c or c .. pad
      end
      return (" " .. table.concat(out, " | ")):gsub("%s+$", "")
    end
    local rule = {}
    for i = 1, #headers do rule[i] = ("-"):rep(w[i] + 2) end
    local lines = { line(headers), table.concat(rule, "+") }
    for _, r in ipairs(rows) do lines[#lines + 1] = line(r) end
    return table.concat(lines, "\n")
  end

  local function column_names(rel)
    local names = {}
    for i, c in ipairs(rel:schema().columns) do names[i] = c.name end
    return names
  end

  -- The header of a column the grid adds (the row id, watch's verb): word,
  -- or other when a column of the relation has that name (" id | id | name"
  -- said nothing of which was the row id), "(other)" when one has that too.
  local function own_header(names, word, other)
    local taken = {}
    for _, n in ipairs(names) do taken[n] = true end
    local h = word
    while taken[h] do h = h == word and other or "(" .. h .. ")" end
    return h
  end

  local function numeric_columns(rel, offset)
    local right = {}
    for i, c in ipairs(rel:schema().columns) do
      right[i + offset] = c.type == "int" or c.type == "float"
    end
    return right
  end

  local function count_line(total, what, limit)
    local more = total > limit and (", %d shown"):format(limit) or ""
    return ("(%d %s%s%s)"):format(total, what, total == 1 and "" or "s", more)
  end

  --- runnel.format(rel [, limit]) -> string: rel's rows as a grid, at most
  -- limit (100) of them; the first column `id` is the row id ("row id"
  -- when a column is named id).
  function runnel.format(rel, limit)
    limit = type(limit or 100) == "number" and math.tointeger(limit or 100) -- 5.0 is 5
    if not limit or limit < 0 then raise_here("format: limit must be an integer >= 0") end
    local names = column_names(rel)
    local headers, rows, total = { own_header(names, "id", "row id") }, {}, 0
    for i, n in ipairs(names) do headers[i + 1] = n end
    for row, id in rel:rows() do
      total = total + 1
      if total <= limit then
        local cells = { id and tostring(id) or "" }
        for i, n in ipairs(names) do cells[i + 1] = fmt_value(row[n]) end
        rows[#rows + 1] = cells
      end
    end
    local right = numeric_columns(rel, 1)
    right[1] = true
    return runnel.grid(headers, rows, right) .. "\n" .. count_line(total, "row", limit)
  end

  --- runnel.show(rel [, limit]): prints runnel.format(rel, limit), in a
  -- script as in the REPL; returns nothing.
  function runnel.show(rel, limit)
    print(runnel.format(rel, limit))
  end

  local WATCH_FIELDS = { print = true, limit = true }

  -- runnel.watch's second argument: a print function or { print, limit }.
  local function watch_options(opts)
    if opts == nil then return { print = print } end
    if type(opts) == "function" then return { print = opts } end
    if type(opts) ~= "table" then raise_here("watch: expects a print function or { print = fn, limit = n }") end
    for k in pairs(opts) do
      if not WATCH_FIELDS[k] then raise_here(("watch: unknown option %s (print, limit)"):format(tostring(k))) end
    end
    if opts.print ~= nil and type(opts.print) ~= "function" then raise_here("watch: print must be a function") end
    local limit = type(opts.limit) == "number" and math.tointeger(opts.limit) -- 5.0 is 5
    if opts.limit ~= nil and (not limit or limit < 0) then raise_here("watch: limit must be an integer >= 0") end
    return opts
  end

  --- runnel.watch(rel [, print_fn | { print = fn, limit = n }]) -> rel: prints
  -- each committed group's changes of rel. An UPDATE shows "old → new" in
  -- the cells that changed. With limit, a group's grid shows its first
  -- limit changes and "(N changes, limit shown)"; limit is read at each
  -- group, so the caller may change it in the table later.
  function runnel.watch(rel, opts)
    opts = watch_options(opts)
    local function out(text) (opts.print or print)(text) end
    local title = visible(rel:name())
    local names = column_names(rel)
    local verbs = rel:schema().tablelike -- a stream's events are all INSERTs
    local first = verbs and 2 or 1
    local headers = { own_header(names, "id", "row id"), verbs and own_header(names, "verb", "change") or nil }
    for i, n in ipairs(names) do headers[i + first] = n end
    local right = numeric_columns(rel, first)
    right[1] = true
    local rows, shown, total = {}, nil, 0
    local function change(verb, row, old, info)
      local cells = { tostring(info.id), verbs and verb or nil }
      for i, n in ipairs(names) do
        local new, before = row and row[n], old and old[n]
        if verb == "DELETE" then cells[i + first] = fmt_value(before)
        elseif verb == "UPDATE" and fmt_value(new) ~= fmt_value(before) then
          cells[i + first] = fmt_value(before) .. " → " .. fmt_value(new)
        else cells[i + first] = fmt_value(new) end
      end
      total = total + 1
      if not opts.limit or #rows < opts.limit then rows[#rows + 1] = cells end
    end
    rel:sink{
      insert = function(row, info) change("INSERT", row, nil, info) end,
      update = function(row, old, info) change("UPDATE", row, old, info) end,
      delete = function(old, info) change("DELETE", nil, old, info) end,
      commit = function(seq)
        shown = nil
        if total > 0 then
          local cut = total > #rows and "\n" .. count_line(total, "change", #rows) or ""
          out(("%s · group %d"):format(title, seq) .. "\n" .. runnel.grid(headers, rows, right) .. cut)
          shown = seq
        end
        rows, total = {}, 0
      end,
      rollback = function(seq) -- its rows never reach another group's printout
        if shown == seq then out(("%s · group %d rolled back"):format(title, seq)) end
        rows, shown, total = {}, nil, 0
      end }
    return rel
  end
end
