-- runnel/view.lua — relations as text: runnel.format_value, runnel.grid,
-- runnel.show and runnel.watch (the REPL prints with them). Loaded by
-- runnel.lua, which hands it the module table.
return function(runnel, core)
  core._dsl(function() end) -- a file of the DSL: errors raised here name the user's line

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

  --- runnel.grid(headers, rows [, right]) -> string: an aligned text table.
  -- rows are lists of cell strings; right[i] aligns column i to the right.
  function runnel.grid(headers, rows, right)
    right = right or {}
    local w = {}
    for i, h in ipairs(headers) do w[i] = width(h) end
    for _, r in ipairs(rows) do
      for i = 1, #headers do w[i] = math.max(w[i], width(r[i] or "")) end
    end
    local function line(cells)
      local out = {}
      for i = 1, #headers do
        local c = cells[i] or ""
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

  local function numeric_columns(rel, offset)
    local right = {}
    for i, c in ipairs(rel:schema().columns) do
      right[i + offset] = c.type == "int" or c.type == "float"
    end
    return right
  end

  --- runnel.show(rel [, limit]) -> string: the table's rows as a grid (id first).
  function runnel.show(rel, limit)
    limit = limit or 100
    local names = column_names(rel)
    local headers, rows, total = { "#" }, {}, 0
    for i, n in ipairs(names) do headers[i + 1] = n end
    for row, id in rel:rows() do
      total = total + 1
      if total <= limit then
        local cells = { tostring(id) }
        for i, n in ipairs(names) do cells[i + 1] = fmt_value(row[n]) end
        rows[#rows + 1] = cells
      end
    end
    local right = numeric_columns(rel, 1)
    right[1] = true
    local more = total > limit and (", %d shown"):format(limit) or ""
    return ("%s\n(%d row%s%s)"):format(runnel.grid(headers, rows, right), total, total == 1 and "" or "s", more)
  end

  --- runnel.watch(rel [, print_fn]) -> rel: prints each committed group's changes of rel.
  -- An UPDATE shows "old → new" in the cells that changed.
  function runnel.watch(rel, out)
    out = out or print
    local names = column_names(rel)
    local verbs = rel:schema().tablelike -- a stream's events are all INSERTs
    local first = verbs and 2 or 1
    local headers = { "#", verbs and "verb" or nil }
    for i, n in ipairs(names) do headers[i + first] = n end
    local right = numeric_columns(rel, first)
    right[1] = true
    local rows, shown = {}, nil
    local function change(verb, row, old, info)
      local cells = { tostring(info.id), verbs and verb or nil }
      for i, n in ipairs(names) do
        local new, before = row and row[n], old and old[n]
        if verb == "DELETE" then cells[i + first] = fmt_value(before)
        elseif verb == "UPDATE" and fmt_value(new) ~= fmt_value(before) then
          cells[i + first] = fmt_value(before) .. " → " .. fmt_value(new)
        else cells[i + first] = fmt_value(new) end
      end
      rows[#rows + 1] = cells
    end
    rel:sink{
      insert = function(row, info) change("INSERT", row, nil, info) end,
      update = function(row, old, info) change("UPDATE", row, old, info) end,
      delete = function(old, info) change("DELETE", nil, old, info) end,
      commit = function(seq)
        shown = nil
        if #rows > 0 then
          out(("%s · group %d"):format(rel:name(), seq) .. "\n" .. runnel.grid(headers, rows, right))
          shown = seq
        end
        rows = {}
      end,
      rollback = function(seq) -- its rows never reach another group's printout
        if shown == seq then out(("%s · group %d rolled back"):format(rel:name(), seq)) end
        rows, shown = {}, nil
      end }
    return rel
  end
end
