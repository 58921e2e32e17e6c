-- runnel.lua — the Lua surface of runnel.
--
-- Declarations are checked and normalized here, in Lua; the per-row work
-- (conversion, keys, LMDB, operators) runs in C behind runnel.core. Errors
-- raised here, and in runnel.core, point at the user's line: the first
-- frame outside this file.
local core = require "runnel.core"

local Pipeline, Relation = core.Pipeline, core.Relation
core._dsl(function() end) -- errors raised in C skip this file's frames: they name the user's line
-- raise(msg): error at the user's line, past every frame of this file (a
-- method called by another, runnel.watch calling rel:sink …).
local raise = core._raise

-- An option's value as a message shows it: a string says so ("3" is not 3).
local function given(v)
  if type(v) == "string" then return ('string "%s"'):format(v) end
  if v ~= v then return "nan" end -- tostring gives "-nan" for 0/0 on x86: one NaN is one word
  return tostring(v)
end

-- A value as a refusal shows it, a string bare: a NaN is "nan", as given() says it.
local function shown(v)
  if v ~= v then return "nan" end
  return tostring(v)
end

-- v as an integer option: an integer, or an integral float as that integer
-- (3.0, as JSON decoding or arithmetic gives it); nil for anything else (a
-- fraction, NaN, an infinity, a string).
local function whole(v)
  return type(v) == "number" and math.tointeger(v) or nil
end

local runnel = { null = core.null, now = core.now, json_decode = core.json_decode, attach = core.attach,
                 _VERSION = "runnel " .. core.version }

local TYPES = { int = true, float = true, string = true, bool = true, bytes = true,
                list = true, map = true, any = true }
local COLUMN_FIELDS = { [1] = true, [2] = true, name = true, type = true, null = true,
                        default = true, was = true }

-- Per-pipeline Lua-side data (hooks, name counters), weak so it never keeps
-- a pipeline alive.
local extra = setmetatable({}, { __mode = "k" })
local function extra_of(p)
  local e = extra[p]
  if not e then e = { on_declare = {} }; extra[p] = e end
  return e
end

-- The methods below are called as p:method(…) and rel:method(…): a call
-- with another self (t.rows(nil), p.table(t, …)) is the caller's mistake.
local function is_a(v, methods)
  local mt = type(v) == "userdata" and getmetatable(v)
  return mt and mt.__index == methods
end
local function check_self(self, methods, what, method)
  if not is_a(self, methods) then
    raise(("%s: expects a %s as self (call it as x:%s(…)), got %s"):format(method, what, method, type(self)))
  end
end
local function check_pipeline(self, method) check_self(self, Pipeline, "runnel.Pipeline", method) end
local function check_relation(self, method) check_self(self, Relation, "runnel.Relation", method) end

-- Containers a value may nest (core/row.h, RN_MAX_NESTING): a struct
-- column deeper than that could hold no value.
local MAX_NESTING = 24
local function struct_depth(fields)
  local depth = 1
  for _, f in ipairs(fields) do
    if f.fields then depth = math.max(depth, 1 + struct_depth(f.fields)) end
  end
  return depth
end

-- Turns { {"id","int"}, {"name","string", null = true}, key = "id" } into
-- the column specs runnel.core takes; returns nil, message on bad input.
local function column_specs(where, decl, nested)
  if type(decl) ~= "table" then
    return nil, ("%s: columns must be a table, got %s"):format(where, type(decl))
  end
  local cols = {}
  for k in pairs(decl) do
    if k ~= "key" and (math.type(k) ~= "integer" or k < 1 or k > #decl) then
      return nil, ("%s: unexpected field %s in the column list"):format(where, tostring(k))
    end
  end
  for i, c in ipairs(decl) do
    if type(c) ~= "table" then
      return nil, ("%s: column #%d must be a table like {\"name\", \"type\"}, got %s"):format(where, i, type(c))
    end
    local name, ty = c[1] or c.name, c[2] or c.type
    if type(name) ~= "string" or name == "" then
      return nil, ("%s: column #%d needs a non-empty string name"):format(where, i)
    end
    for k in pairs(c) do
      if not COLUMN_FIELDS[k] then
        return nil, ('%s: column "%s": unknown option %s'):format(where, name, tostring(k))
      end
    end
    if c.null ~= nil and type(c.null) ~= "boolean" then -- null = 1 would be a not-null column without a word
      return nil, ('%s: column "%s": null must be a boolean, got %s'):format(where, name, given(c.null))
    end
    local spec = { name = name, null = c.null == true }
    if type(ty) == "table" then
      local fields, err = column_specs(('%s: column "%s"'):format(where, name), ty, true)
      if not fields then return nil, err end
      local depth = not nested and struct_depth(fields)
      if depth and depth > MAX_NESTING then
        return nil, ('%s: column "%s": a struct nested %d deep; a value nests at most %d lists, maps or structs')
                    :format(where, name, depth, MAX_NESTING)
      end
      spec.type, spec.fields = "struct", fields
    elseif TYPES[ty] then
      spec.type = ty
    else
      return nil, ('%s: column "%s": unknown type %s (int, float, string, bool, bytes, list, map, any or a column list)')
                  :format(where, name, tostring(ty))
    end
    if c.default ~= nil then spec.has_default, spec.default = true, c.default end
    if c.was ~= nil and (type(c.was) ~= "string" or c.was == "") then
      return nil, ('%s: column "%s": was must be the former name of the column, got %s'):format(where, name, tostring(c.was))
    end
    spec.was = c.was
    cols[i] = spec
  end
  return cols
end

local function key_spec(where, key)
  if key == nil then return nil end
  if type(key) == "string" then return { key } end
  if type(key) == "table" and #key > 0 then
    local out = {}
    for i, k in ipairs(key) do
      if type(k) ~= "string" then
        return nil, ("%s: key entry #%d must be a column name"):format(where, i)
      end
      out[i] = k
    end
    return out
  end
  return nil, ("%s: key must be a column name or a list of them, got %s"):format(where, type(key))
end

local tell_changes -- below: the lines of schema changes a declaration applied

-- fn(…), a notes or on_declare function, told of what is done (a
-- declaration applied and stored): an error it raises cannot undo it, so
-- it is written to stderr, naming the hook, and the caller goes on (the
-- declaration returns its relation; later hooks and lines are still told).
local function tell_hook(what, fn, ...)
  local ok, err = pcall(fn, ...)
  if not ok then
    io.stderr:write(("runnel: %s raised (what it was told of is done, and kept): %s\n"):format(what, tostring(err)))
  end
end

local function declared(p, rel)
  tell_changes(p)
  for _, hook in ipairs(extra_of(p).on_declare) do tell_hook("on_declare", hook, rel) end
  return rel
end

local function declare_source(p, kind, name, decl)
  if type(name) ~= "string" then
    return nil, ("%s: the name must be a string, got %s"):format(kind, type(name))
  end
  local cols, err = column_specs(name, decl)
  if not cols then return nil, err end
  local key
  key, err = key_spec(name, decl.key)
  if err then return nil, err end
  if kind == "stream" and key then return nil, name .. ": a stream has no key" end
  for _, c in ipairs(cols) do
    if c.was then p:_rename(name, c.was, c.name) end
  end
  local rel
  rel, err = p:_declare(kind, name, cols, key)
  if not rel then return nil, err end
  return declared(p, rel)
end

--- p:table(name, columns) -> relation: a keyed table (key = …) or a keyless one.
function Pipeline:table(name, decl)
  check_pipeline(self, "table")
  local rel, err = declare_source(self, "table", name, decl)
  if not rel then raise(err) end
  return rel
end

--- p:stream(name, columns) -> relation: append-only events.
function Pipeline:stream(name, decl)
  check_pipeline(self, "stream")
  local rel, err = declare_source(self, "stream", name, decl)
  if not rel then raise(err) end
  return rel
end

--- p:batch(fn, …): fn runs inside one group; an error rolls it back and is raised again.
-- The group is the batch's: p:begin(), p:commit(), p:rollback() and p:run()
-- inside fn are refused (fn raises to roll it back), and so is a change,
-- a declaration, a sink or a drop after an error fn caught rolled the
-- group back, so that no part of fn's work is committed while batch raises.
local core_commit, core_rollback = Pipeline.commit, Pipeline.rollback

-- p:batch's work, protected whole by batch: an error raised anywhere in it
-- leaves no group open and no batch counted, whether fn raised it or a hook
-- did (Ctrl-C in the REPL or runnel run raises "interrupted!" at the next
-- call, return or instruction, which may be one of these). The commit's own
-- error is returned, to be raised at the caller's line (under pcall it
-- would name none).
local function batch_body(self, e, fn, ...)
  self:begin()
  e.batches = e.batches + 1
  self:_batches(e.batches) -- a change that finds the group gone raises (lrelation.c)
  fn(...)
  e.batches = e.batches - 1
  self:_batches(e.batches)
  if not self:in_group() then -- a change's error that fn caught rolled the group back
    return false, "batch: the group was rolled back by an error fn caught; nothing fn did is committed"
  end
  return pcall(core_commit, self)
end

-- A batch that did not finish, closed: its count restored and the group it
-- began rolled back. As a to-be-closed variable it runs on every way out of
-- batch, coroutine.close of a coroutine suspended in fn too.
local BatchGuard = { __close = function(g)
  if not g.open then return end
  g.open = false
  g.e.batches = g.before
  g.p:_batches(g.before)
  if g.p:in_group() then core_rollback(g.p) end
end }

function Pipeline:batch(fn, ...)
  check_pipeline(self, "batch")
  if type(fn) ~= "function" then raise("batch: expects a function") end
  if self:in_group() then self:begin() end -- raises begin's error: the open group is not the batch's
  local e = extra_of(self)
  e.batches = e.batches or 0
  local guard <close> = setmetatable({ p = self, e = e, before = e.batches, open = true }, BatchGuard)
  local ok, committed, seq = pcall(batch_body, self, e, fn, ...)
  if ok and committed then
    guard.open = false
    return seq
  end
  if ok then raise(seq, true) end -- the commit's error, made already
  error(committed, 0)
end

local function in_batch(p, method)
  local e = extra[p]
  if e and e.batches and e.batches > 0 then
    raise(("%s: inside p:batch(fn) the group is the batch's: it commits when fn returns; raise an error in fn to "
           .. "roll it back"):format(method))
  end
end
-- p:begin() in fn after an error fn caught rolled the batch's group back
-- would open a group the batch then commits, without the changes before
-- the error; inside a batch it is refused as commit and rollback are.
local core_begin = Pipeline.begin
function Pipeline:begin(...)
  check_pipeline(self, "begin")
  in_batch(self, "begin")
  return core_begin(self, ...)
end
-- What a group open refuses (a declaration, a sink, a drop) finds none
-- open in fn after an error fn caught rolled the batch's group back: done,
-- it would be committed on its own while the batch raises.
local function batch_lost(p, what)
  local e = extra[p]
  if e and e.batches and e.batches > 0 and not p:in_group() then
    raise(("%s: the group of p:batch(fn) was rolled back by an error fn caught; let that error raise out of fn "
           .. "(this would be committed on its own)"):format(what))
  end
end
for _, method in ipairs{ "_declare", "_filter", "_map", "_cdc", "_distinct", "_top", "_index", "_join", "_select",
                         "_aggregate", "_lookup", "_drop" } do
  local core_method = Pipeline[method]
  Pipeline[method] = function(self, ...)
    batch_lost(self, method:sub(2))
    return core_method(self, ...)
  end
end
function Pipeline:commit(...)
  check_pipeline(self, "commit")
  in_batch(self, "commit")
  return core_commit(self, ...)
end
function Pipeline:rollback(...)
  check_pipeline(self, "rollback")
  in_batch(self, "rollback")
  return core_rollback(self, ...)
end

--- p:relation(name) -> relation | nil
function Pipeline:relation(name)
  check_pipeline(self, "relation")
  for _, rel in ipairs(self:relations()) do
    if rel:name() == name then return rel end
  end
  return nil
end

--- p:on_declare(fn): fn(rel) after every later declaration (the REPL uses it).
function Pipeline:on_declare(fn)
  check_pipeline(self, "on_declare")
  self:in_group() -- raises when the pipeline is closed
  if type(fn) ~= "function" then raise("on_declare: expects a function, got " .. type(fn)) end
  table.insert(extra_of(self).on_declare, fn)
end

-- A table's first key outside its sequence part (a map given for a list), or nil.
local function non_sequence_key(t)
  local n = #t
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return k end
  end
end

-- by = "col" | { "col", … } -> the list; refuses a map ({ team = true } has
-- no sequence part: it would group by nothing), a non-name, a name twice.
local function by_list(where, by)
  if type(by) == "string" then return { by } end
  if by == nil then return {} end
  local k = type(by) == "table" and non_sequence_key(by)
  if type(by) ~= "table" or k ~= nil then
    raise(("%s: by must be a column name or a list of them, got %s"):format(where,
          type(by) == "table" and "a table with key " .. tostring(k) or given(by)))
  end
  for i, col in ipairs(by) do
    if type(col) ~= "string" then raise(("%s: by entry #%d must be a column name, got %s"):format(where, i, given(col))) end
    for j = 1, i - 1 do
      if by[j] == col then raise(('%s: by names "%s" twice'):format(where, col)) end
    end
  end
  return by
end

local function derived_name(rel, what, name)
  if name ~= nil then
    if type(name) ~= "string" then
      return nil, ("%s: %s: the name must be a string, got %s"):format(rel:name(), what, type(name))
    end
    return name
  end
  local p, base = rel:pipeline(), rel:name() .. "." .. what
  local candidate, n = base, 1
  while p:relation(candidate) do
    n = n + 1
    candidate = base .. n
  end
  return candidate
end

-- ---- the functions a derived relation runs, between runs (core/evolve_code.h) ----

-- string.dump keeps the lines a function was defined between, stripped or
-- not: they are cut (Lua 5.4's layout: a 31-byte header, the upvalue
-- count, the stripped source's empty string 0x80, then the two lines as
-- varints, each ending with the byte whose high bit is set), so a function
-- moved to other lines keeps its fingerprint. A function defined inside it
-- keeps its own lines.
local function without_lines(code)
  if code:sub(1, 5) ~= "\27Lua\x54" or #code < 36 or code:byte(33) ~= 0x80 then return code end
  local at = 34
  for _ = 1, 2 do
    while at <= #code and code:byte(at) < 0x80 do at = at + 1 end
    at = at + 1
  end
  return code:sub(1, 33) .. code:sub(at)
end

-- A fingerprint of fn that stays while its behaviour does: its bytecode
-- without debug information (string.dump(fn, true) less its lines: the
-- same function elsewhere or under another name is the same), then each upvalue it
-- reads: a number, string, boolean or nil by value, a Lua function by its
-- own fingerprint (a local helper), a runnel.attach(…) by the state's real
-- path, the name and what identifies the relation it reads now (another one
-- attached, the same declared again otherwise or rebuilt since, is another
-- function; of p's own state, by path and name: its reads are noted),
-- anything else (a table, userdata, a C function) by its type only: a
-- change inside a table it reads, or in a global (_ENV), is not seen.
local function fingerprint(fn, depth, p)
  local ok, code = pcall(string.dump, fn, true)
  if not ok then return "C function" end
  code = without_lines(code)
  local parts = { #code, ":", code }
  for i = 1, math.huge do
    local name, value = debug.getupvalue(fn, i)
    if name == nil then break end
    local kind = name == "_ENV" and "_ENV" or math.type(value) or type(value)
    local shown = ""
    if kind == "integer" or kind == "boolean" then shown = tostring(value)
    elseif kind == "float" then shown = ("%a"):format(value)
    elseif kind == "string" then shown = #value .. ":" .. value
    elseif kind == "function" and depth < 4 then shown = fingerprint(value, depth + 1, p)
    elseif kind == "userdata" then
      local id = core._attached_identity(value, p) -- an attach: what it reads (lua/llookup.c, read_attached)
      if id then kind, shown = "attached", id end
    end
    parts[#parts + 1] = ("|%s %d:%s"):format(kind, #shown, shown)
  end
  return table.concat(parts)
end

-- Before relation name is declared: its functions' fingerprint, in the
-- order given (a join's mapper, selector and joiner; nil where absent),
-- kept by the state; a new one has what is built from it rebuilt.
local function record_code(p, name, ...)
  local parts = {}
  for i = 1, select("#", ...) do
    local fn = select(i, ...)
    parts[i] = type(fn) == "function" and fingerprint(fn, 0, p) or "-"
  end
  local ok, err = p:_code(name, table.concat(parts, "\0"))
  if not ok then raise(err) end
end

-- A filter's or map's function as the state keeps it, to run it again
-- (core/evolve_code.h, "fc:"): its bytecode without debug information, then
-- each upvalue's value: nil, a boolean, number or string, or _ENV (made
-- again, it reads the globals as they are then, not as they were). false
-- when it cannot be made again: it holds another upvalue (a table, a
-- function, userdata), or is a C function.
local function code_again(fn)
  local ok, code = pcall(string.dump, fn, true)
  if not ok then return false end
  local parts = { string.pack("<s4", code) }
  for i = 1, math.huge do
    local name, value = debug.getupvalue(fn, i)
    if name == nil then break end
    local kind = math.type(value) or type(value)
    if name == "_ENV" and kind == "table" then parts[#parts + 1] = "E"
    elseif kind == "nil" then parts[#parts + 1] = "N"
    elseif kind == "boolean" then parts[#parts + 1] = value and "T" or "F"
    elseif kind == "integer" then parts[#parts + 1] = "I" .. string.pack("<j", value)
    elseif kind == "float" then parts[#parts + 1] = "D" .. string.pack("<n", value)
    elseif kind == "string" then parts[#parts + 1] = "S" .. string.pack("<s4", value)
    else return false end
  end
  return table.concat(parts)
end

-- The function code_again kept, made again (its _ENV: the globals of fn,
-- the new function, as they are now); nil and why when it cannot be (a
-- Lua that does not load its bytecode, a copy of another shape). The
-- state hands back only a copy that matches its check (evolve_code.c).
local function made_again(code, fn)
  local unreadable = "its old function could not be read"
  local ok, body, at = pcall(string.unpack, "<s4", code)
  if not ok then return nil, unreadable end
  local old, err = load(body, "=(its old function)", "b")
  if not old then return nil, "its old function could not be loaded: " .. tostring(err) end
  local env = _G
  for i = 1, math.huge do
    local name, value = debug.getupvalue(fn, i)
    if name == nil then break end
    if name == "_ENV" then env = value break end
  end
  local i = 0
  while at <= #code do
    i = i + 1
    local kind, value = code:sub(at, at), nil
    at = at + 1
    if kind == "E" then value = env
    elseif kind == "T" then value = true
    elseif kind == "F" then value = false
    elseif kind == "I" then ok, value, at = pcall(string.unpack, "<j", code, at)
    elseif kind == "D" then ok, value, at = pcall(string.unpack, "<n", code, at)
    elseif kind == "S" then ok, value, at = pcall(string.unpack, "<s4", code, at)
    elseif kind ~= "N" then ok = false end
    if not ok or not debug.setupvalue(old, i, value) then return nil, unreadable end -- cut, or too many
  end
  if debug.getupvalue(old, i + 1) ~= nil then return nil, unreadable end -- too few
  return old
end

-- record_code for a filter or map: also keeps its function to run again;
-- what its sinks' rows came from when they are to be told a change: told
-- ("kept", "unkept", "absent" or nil) and the old function made again, or
-- why it could not be (for p:_filter and p:_map, core/derive.h).
local function record_fn(p, name, fn)
  local ok, told, code, why = p:_code(name, fingerprint(fn, 0, p), code_again(fn))
  if not ok then raise(told) end
  if told ~= "kept" then return told end
  if not code then return told, why end -- the state's copy is damaged, or has no check
  local old
  old, why = made_again(code, fn)
  return told, old or why
end

--- rel:filter(fn [, name]) -> relation of the rows for which fn(row) is true.
function Relation:filter(fn, name)
  check_relation(self, "filter")
  if type(fn) ~= "function" then raise("filter: expects a function, got " .. type(fn)) end
  local n, err = derived_name(self, "filter", name)
  if not n then raise(err) end
  local told, old = record_fn(self:pipeline(), n, fn)
  local rel
  rel, err = self:pipeline():_filter(self, n, fn, told, old)
  if not rel then raise(err) end
  return declared(self:pipeline(), rel)
end

--- rel:map(fn, columns [, name]) -> relation of fn(row) (nil: no row), ids passed through.
function Relation:map(fn, decl, name)
  check_relation(self, "map")
  if type(fn) ~= "function" then raise("map: expects a function, got " .. type(fn)) end
  local n, err = derived_name(self, "map", name)
  if not n then raise(err) end
  local cols, key
  cols, err = column_specs(n, decl)
  if not cols then raise(err) end
  key, err = key_spec(n, decl.key)
  if err then raise(err) end
  for _, c in ipairs(cols) do -- what its sinks were told is given in these columns (core/evolve_log.c)
    if c.was then self:pipeline():_rename(n, c.was, c.name) end
  end
  local told, old = record_fn(self:pipeline(), n, fn) -- its rows in the columns it had: core/evolve_log.c
  local rel
  rel, err = self:pipeline():_map(self, n, fn, cols, key, told, old)
  if not rel then raise(err) end
  return declared(self:pipeline(), rel)
end

--- rel:distinct([name]) -> keyless relation of rel's distinct rows (rel table-like);
--- copies are counted: a row stays while one copy does, under one id (core/distinct.c).
function Relation:distinct(name)
  check_relation(self, "distinct")
  local n, err = derived_name(self, "distinct", name)
  if not n then raise(err) end
  local rel
  rel, err = self:pipeline():_distinct(self, n)
  if not rel then raise(err) end
  return declared(self:pipeline(), rel)
end

local CDC_FIELDS = { preimage = true, postimage = true, format = true, name = true }
local CDC_FORMATS = { log = true, debezium = true, flink = true }

--- rel:cdc{ preimage = false|true|"full", postimage = false|true,
--            format = "log"|"debezium"|"flink", name = … } -> stream of CDC rows
function Relation:cdc(opts)
  check_relation(self, "cdc")
  opts = opts or {}
  if type(opts) ~= "table" then raise("cdc: expects an options table, got " .. type(opts)) end
  for k in pairs(opts) do
    if not CDC_FIELDS[k] then
      raise(("cdc: unknown option %s (preimage, postimage, format, name)"):format(tostring(k)))
    end
  end
  local pre = opts.preimage
  if pre ~= nil and pre ~= false and pre ~= true and pre ~= "full" then
    raise('cdc: preimage must be false, true or "full", got ' .. shown(pre))
  end
  local post = opts.postimage
  if post ~= nil and type(post) ~= "boolean" then
    raise("cdc: postimage must be a boolean, got " .. shown(post))
  end
  local format = opts.format or "log"
  if not CDC_FORMATS[format] then
    raise('cdc: format must be "log", "debezium" or "flink", got ' .. shown(format))
  end
  local n, err = derived_name(self, "cdc", opts.name)
  if not n then raise(err) end
  local rel
  rel, err = self:pipeline():_cdc(self, n, pre == "full" and 2 or pre and 1 or 0, post == true, format)
  if not rel then raise(err) end
  return declared(self:pipeline(), rel)
end

local joiner_copies, mapper_column = require("runnel.joiner")()
local lent_guards = require "runnel.lent" -- which mappers and joiners may keep the rows lent to them

local JOIN_FIELDS = { on = true, mapper = true, selector = true, joiner = true, kind = true,
                      columns = true, name = true }
local JOIN_KINDS = { inner = true, left = true, outer = true }

-- A joiner given as a table { out_name = "column", … } names columns of the
-- join's default result (left then right, clashes as "<right>.<column>"):
-- it is done in C, like select. Returns the from and to lists, or nil.
local function join_references(opts)
  if type(opts.joiner) ~= "table" then return nil end
  if opts.columns then raise("join: a joiner of column references takes its columns from them: drop columns") end
  local from, to = {}, {}
  for k, v in pairs(opts.joiner) do
    if type(k) ~= "string" or type(v) ~= "string" then
      raise(("join: a joiner table maps result names to column names, got %s = %s"):format(tostring(k), tostring(v)))
    end
    to[#to + 1], from[#from + 1] = k, v
  end
  if #to == 0 then raise("join: a joiner table names at least one column") end
  return from, to
end

--- left:join(right, { on = "col" | {"a","b"} | mapper = fn(row) -> key,
--                     selector = fn(left_key, right_key) -> key,
--                     joiner = fn(left, right) -> row | values… | { out = "column", … },
--                     columns = {…, key = …} (the joiner's columns), kind = "inner"|"left"|"outer",
--                     name = … }) -> relation
function Relation:join(right, opts)
  check_relation(self, "join")
  if not is_a(right, Relation) then raise("join: the right side must be a relation, got " .. type(right)) end
  if type(opts) ~= "table" then raise("join: expects (right, options), got " .. type(opts) .. " for the options") end
  for k in pairs(opts) do
    if not JOIN_FIELDS[k] then
      raise(("join: unknown option %s (on, mapper, selector, joiner, columns, kind, name)"):format(tostring(k)))
    end
  end
  if (opts.on == nil) == (opts.mapper == nil) then raise("join: give either on or mapper") end
  local on = opts.on
  if type(on) == "string" then on = { on }
  elseif on ~= nil and (type(on) ~= "table" or #on == 0) then
    raise("join: on must be a column name or a list of them")
  end
  local from, to = join_references(opts)
  for _, f in ipairs{ "mapper", "selector", "joiner" } do
    if opts[f] ~= nil and type(opts[f]) ~= "function" and not (f == "joiner" and from) then
      raise(("join: %s must be a function, got %s"):format(f, type(opts[f])))
    end
  end
  local kind = opts.kind or "inner"
  if not JOIN_KINDS[kind] then raise('join: kind must be "inner", "left" or "outer", got ' .. shown(kind)) end
  if type(opts.joiner) == "function" and not opts.columns then
    raise("join: a joiner needs columns = { … } for the rows it returns")
  end
  local n, err = derived_name(self, "join", opts.name)
  if not n then raise(err) end
  if opts.columns and opts.joiner == nil then -- its rows would be left+right under those names
    raise(n .. ": columns are the rows a joiner returns: give a joiner, or select columns after the join")
  end
  local cols, key
  if opts.columns then
    cols, err = column_specs(n, opts.columns)
    if not cols then raise(err) end
    key, err = key_spec(n, opts.columns.key)
    if err then raise(err) end
    for _, c in ipairs(cols) do -- what its sinks were told is given in these columns (core/evolve_log.c)
      if c.was then self:pipeline():_rename(n, c.was, c.name) end
    end
  end
  local rel
  local joiner = type(opts.joiner) == "function" and opts.joiner or nil
  local copies = joiner and joiner_copies(joiner, kind) -- done in C when it gives exactly cols
  if opts.mapper or opts.selector or joiner then record_code(self:pipeline(), n, opts.mapper, opts.selector, joiner) end
  local mapped = opts.mapper and mapper_column(opts.mapper) -- read in C when that gives the mapper's key
  rel, err = self:pipeline():_join(self, right, n, kind, on, opts.mapper, opts.selector, joiner, cols, key, from, to,
                                   copies, mapped, lent_guards(opts.mapper, 1), lent_guards(joiner, 2))
  if not rel then raise(err) end
  return declared(self:pipeline(), rel)
end

--- rel:select{ "col", {"new_name", "col"}, …, key = … } [, name] -> relation
-- Keeps, renames and reorders columns in C (no Lua per row); ids pass
-- through; the key is the given one, or rel's key when all of it is kept.
function Relation:select(spec, name)
  check_relation(self, "select")
  if type(spec) ~= "table" or #spec == 0 then raise("select: expects a list of columns") end
  local from, to = {}, {}
  for i, c in ipairs(spec) do
    if type(c) == "string" then from[i], to[i] = c, c
    elseif type(c) == "table" and type(c[1]) == "string" and type(c[2]) == "string" then to[i], from[i] = c[1], c[2]
    else raise(("select: entry #%d must be a column name or {new_name, column}"):format(i)) end
  end
  for k in pairs(spec) do
    if k ~= "key" and (math.type(k) ~= "integer" or k < 1 or k > #spec) then
      raise(("select: unexpected field %s"):format(tostring(k)))
    end
  end
  local n, err = derived_name(self, "select", name)
  if not n then raise(err) end
  local key
  key, err = key_spec(n, spec.key)
  if err then raise(err) end
  local rel
  rel, err = self:pipeline():_select(self, n, from, to, key)
  if not rel then raise(err) end
  return declared(self:pipeline(), rel)
end

---------------------------------------------------------------------------
-- Aggregates and windows.

local AGG = {} -- marks aggregate descriptors
local function descriptor(kind, col, fns)
  return setmetatable({ kind = kind, col = col, fns = fns }, AGG)
end
local function column_arg(what, col)
  if type(col) ~= "string" then raise(what .. ": expects a column name, got " .. type(col)) end
  return col
end

--- runnel.count() counts rows; runnel.count(col) counts non-null values of col.
function runnel.count(col)
  if col == nil then return descriptor("count") end
  return descriptor("count_col", column_arg("count", col))
end
function runnel.sum(col) return descriptor("sum", column_arg("sum", col)) end
function runnel.min(col) return descriptor("min", column_arg("min", col)) end
function runnel.max(col) return descriptor("max", column_arg("max", col)) end
function runnel.avg(col) return descriptor("avg", column_arg("avg", col)) end

--- runnel.agg{ init = fn() -> state, add = fn(state, row) -> state,
--              remove = fn(state, row) -> state, result = fn(state) -> value }
-- A user aggregate. remove may be left out for streams (inserts only).
function runnel.agg(fns)
  if type(fns) ~= "table" or type(fns.add) ~= "function" then
    raise("agg: expects { init = fn, add = fn, remove = fn, result = fn } (add at least)")
  end
  for k, v in pairs(fns) do
    if k ~= "init" and k ~= "add" and k ~= "remove" and k ~= "result" then
      raise("agg: unknown field " .. tostring(k))
    end
    if type(v) ~= "function" then raise(("agg: %s must be a function"):format(k)) end
  end
  return descriptor("agg", nil, fns)
end

local WINDOW = {}
--- runnel.tumbling(size, time_col): windows [k*size, (k+1)*size).
function runnel.tumbling(size, col)
  if type(size) ~= "number" or size <= 0 then raise("tumbling: size must be a positive number") end
  return setmetatable({ kind = "tumbling", size = size, col = column_arg("tumbling", col) }, WINDOW)
end
--- runnel.hopping(size, step, time_col): every [k*step, k*step + size) holding the time.
function runnel.hopping(size, step, col)
  if type(size) ~= "number" or size <= 0 or type(step) ~= "number" or step <= 0 then
    raise("hopping: size and step must be positive numbers")
  end
  return setmetatable({ kind = "hopping", size = size, step = step, col = column_arg("hopping", col) }, WINDOW)
end

-- key = {…} states the by columns as the key when the input cannot prove
-- them non-null (a left join's right column): true, or nil without key.
local function aggregate_key(n, key, by)
  if key == nil then return nil end
  local k = type(key) == "string" and { key } or key
  local same = type(k) == "table" and #k == #by and #by > 0
  for i = 1, same and #by or 0 do same = same and k[i] == by[i] end
  if not same then
    raise(("%s: key must name the by columns, in order (%s)"):format(n, #by > 0 and table.concat(by, ", ")
                                                                   or "there are none"))
  end
  return true
end

-- The list form's entries { {"n", runnel.count()}, {"total", runnel.sum("score")} }, in order.
local function aggregate_list(n, spec)
  local list = {}
  for k in pairs(spec) do
    if math.type(k) == "integer" and (k < 1 or k > #spec) then
      raise(("%s: unexpected entry [%d]: the list form is { {\"n\", runnel.count()}, … }"):format(n, k))
    end
  end
  for i, e in ipairs(spec) do
    if type(e) ~= "table" or type(e[1]) ~= "string" or e[1] == "" or getmetatable(e[2]) ~= AGG or #e ~= 2 then
      raise(("%s: entry #%d must be {\"name\", aggregate}, e.g. {\"n\", runnel.count()}"):format(n, i))
    end
    for _, seen in ipairs(list) do
      if seen.name == e[1] then raise(("%s: column \"%s\" is named twice"):format(n, e[1])) end
    end
    list[i] = { name = e[1], kind = e[2].kind, col = e[2].col, fns = e[2].fns }
  end
  return list
end

--- rel:aggregate{ by = col | {cols} | nil, window = runnel.tumbling(…)|runnel.hopping(…),
--                 grace = seconds, name = "relation name", <column> = aggregate, … }
-- A keyed table of groups: the by columns, window_start and window_end when
-- windowed, then the aggregates in the order of their names; or, in the list
-- form rel:aggregate{ by = …, {"n", runnel.count()}, {"total", runnel.sum("score")} },
-- in the order written. Errors name the aggregate (name, or <rel>.aggregate).
function Relation:aggregate(spec)
  check_relation(self, "aggregate")
  if type(spec) ~= "table" then raise(self:name() .. ": aggregate: expects a table, got " .. type(spec)) end
  local named = type(spec.name) == "string" and spec.name or nil -- name = runnel.max("name") is a column
  local n, err = derived_name(self, "aggregate", named)
  if not n then raise(err) end
  if spec.name ~= nil and not named and getmetatable(spec.name) ~= AGG then
    raise(n .. ": name must be a string (the relation's name) or an aggregate (a column called name), got "
          .. given(spec.name))
  end
  local by = by_list(n, spec.by)
  local window
  if spec.window ~= nil then
    if getmetatable(spec.window) ~= WINDOW then
      raise(n .. ": window must be runnel.tumbling(…) or runnel.hopping(…), got " .. given(spec.window))
    end
    window = { kind = spec.window.kind, size = spec.window.size, step = spec.window.step,
               col = spec.window.col, grace = spec.grace }
  elseif spec.grace ~= nil then
    raise(n .. ": grace needs a window")
  end
  if spec.grace ~= nil and not (type(spec.grace) == "number" and spec.grace >= 0 and spec.grace < math.huge) then
    -- NaN too; an infinite grace would make no window final, its state kept for good
    raise(n .. ": grace must be a finite number of seconds >= 0, got " .. given(spec.grace))
  end
  local aggs = {}
  for k, v in pairs(spec) do
    if k ~= "by" and k ~= "window" and k ~= "grace" and k ~= "key" and not (k == "name" and named)
       and math.type(k) ~= "integer" then
      if type(k) ~= "string" or getmetatable(v) ~= AGG then
        raise(("%s: %s must be an aggregate (runnel.count(), sum(col), min, max, avg, agg{…})")
              :format(n, tostring(k)))
      end
      aggs[#aggs + 1] = { name = k, kind = v.kind, col = v.col, fns = v.fns }
    end
  end
  table.sort(aggs, function(a, b) return a.name < b.name end) -- the map form: columns in name order
  local listed = aggregate_list(n, spec) -- the list form: columns in the order written
  if #listed > 0 and #aggs > 0 then
    raise(n .. ": give the aggregates as a list { {\"n\", runnel.count()}, … } or as n = runnel.count(), "
          .. "not both")
  end
  if #listed > 0 then aggs = listed end
  if #aggs == 0 then raise(n .. ": name at least one aggregate, e.g. n = runnel.count()") end
  local fns = {} -- runnel.agg{…}'s functions, in column order
  for _, a in ipairs(aggs) do
    if a.fns then for _, f in ipairs{ "init", "add", "remove", "result" } do fns[#fns + 1] = a.fns[f] or false end end
  end
  if #fns > 0 then record_code(self:pipeline(), n, table.unpack(fns)) end
  local rel
  rel, err = self:pipeline():_aggregate(self, n, by, window, aggs, aggregate_key(n, spec.key, by))
  if not rel then raise(err) end
  return declared(self:pipeline(), rel)
end

-- Derived relations have no stored rows of their own: rows(), count() and
-- get() compute them from their inputs (O(rows)). Sources read LMDB.
-- rows() come in the order a read from outside gives (runnel.attach,
-- runnel query): key order (id order without a key), an index's order, a
-- top's group then rank (core/scan.h, rn_rel_scan_ordered).
local core_rows, core_count, core_get = Relation.rows, Relation.count, Relation.get

function Relation:rows()
  check_relation(self, "rows")
  local kind = self:schema().kind
  if kind == "table" then return core_rows(self) end
  local list = {}
  self:_scan_ordered(function(row, id) list[#list + 1] = { row, id } end)
  local i = 0
  return function()
    i = i + 1
    local e = list[i]
    if e then return e[1], e[2] end
  end
end

function Relation:count()
  check_relation(self, "count")
  if self:schema().kind == "table" then return core_count(self) end
  local n = 0
  self:scan(function() n = n + 1 end)
  return n
end

-- A derived relation's get (lrelation.c, core/scan.h: rn_rel_get) checks
-- its key as a table's get does, and reads a top or an index by its
-- input's key, as runnel.attach does.
function Relation:get(key)
  check_relation(self, "get")
  return core_get(self, key)
end

local SINK_FIELDS = { insert = true, update = true, delete = true, commit = true, consolidate = true,
                      rollback = true, durable = true, name = true }

-- The durable name of a sink (durable = true), or nil; raises on a bad one.
local function durable_name(o)
  if o.durable == nil or o.durable == false then
    if o.name ~= nil then raise("sink: name is for durable sinks (durable = true)") end
    return nil
  end
  if o.durable ~= true then raise("sink: durable must be true or false") end
  if type(o.name) ~= "string" or o.name == "" then
    raise("sink: a durable sink needs a name, unique in the pipeline (name = \"…\")")
  end
  if o.name:find("\0", 1, true) then -- the state keeps it as a C string: "a\0b" would be "a"
    raise(("sink: a durable sink's name cannot hold a NUL byte (%q)"):format(o.name))
  end
  if o.rollback ~= nil then raise("sink: a durable sink never sees a group that rolls back (no rollback)") end
  return o.name
end

--- rel:sink(fn [, { durable = true, name = … }]) or
-- rel:sink{ insert, update, delete, commit, rollback, consolidate, durable, name } -> rel
-- In-group (the default): runs before the group commits and may fail it;
-- rollback(seq) runs when a group the sink got changes or a commit of
-- rolled back after all (a later sink or hook failed): drop what it kept.
-- Durable (durable = true): gets each group after it is durable in LMDB,
-- from the state's outbox (OUTBOX-n in core/outbox.c); it cannot fail the
-- group, and after a crash it gets the groups after its last recorded one
-- again (info.seq and info.n name each change). A change it returned from
-- is taken: one that raises is retried from that change on (same info.n),
-- then commit(seq); a commit that raised is called again alone.
-- A value with an `attach` method (runnel.ndjson …) attaches itself.
function Relation:sink(s, opts)
  check_relation(self, "sink")
  local p, ok, err = self:pipeline()
  batch_lost(p, "sink") -- every kind of sink: one attached (runnel.ndjson …) too
  if type(s) == "function" then
    if opts ~= nil and type(opts) ~= "table" then raise("sink: options must be a table") end
    for k in pairs(opts or {}) do
      if k ~= "durable" and k ~= "name" then raise(("sink: unknown option %s (durable, name)"):format(tostring(k))) end
    end
    ok, err = p:_sink(self, s, nil, nil, nil, nil, nil, nil, durable_name(opts or {}))
  elseif type(s) == "table" and type(s.attach) == "function" then
    ok, err = pcall(s.attach, s, self)
  elseif type(s) == "table" then
    for k, v in pairs(s) do
      if not SINK_FIELDS[k] then
        raise(("sink: unknown field %s (insert, update, delete, commit, rollback, consolidate, durable, name)")
              :format(tostring(k)))
      end
      if k == "consolidate" and type(v) ~= "boolean" then -- consolidate = 0 was true
        raise("sink: consolidate must be a boolean, got " .. given(v))
      end
      if k ~= "consolidate" and k ~= "durable" and k ~= "name" and type(v) ~= "function" then
        raise(("sink: %s must be a function, got %s"):format(k, type(v)))
      end
    end
    ok, err = p:_sink(self, nil, s.insert, s.update, s.delete, s.commit, s.consolidate, s.rollback, durable_name(s))
  else
    raise("sink: expects a function or a table of functions, got " .. type(s))
  end
  tell_changes(p) -- a durable sink that missed groups says so (OUTBOX-5)
  if not ok then raise(err, true) end -- made in C (a replayed callback's own text kept)
  return self
end

local OPEN_FIELDS = { path = true, sync = true, clock = true, map_size = true, writemap = true, carry = true,
                      max_readers = true,
                      notes = true, write_back = true }
local CARRY_FIELDS = { groups = "an integer", changes = "an integer", seconds = "a number", page_share = "an integer" }

-- carry = { groups = n, changes = n, seconds = s, page_share = n }: the
-- bounds of the LMDB transaction that groups share with sync = false
-- (omitted: the defaults); page_share = N also ends it before its writes
-- copy 1/N of the pages they go to (0: off, the default).
local function carry_bounds(carry)
  if carry == nil then return nil, nil, nil, nil end
  if type(carry) ~= "table" then raise("open: carry must be a table { groups, changes, seconds, page_share }") end
  for k, v in pairs(carry) do
    local want = CARRY_FIELDS[k]
    if not want then raise(("open: carry: unknown field %s (groups, changes, seconds, page_share)"):format(tostring(k))) end
    local ok = want == "an integer" and whole(v) or want == "a number" and type(v) == "number"
    if k == "page_share" then
      if not ok or v < 0 then raise("open: carry.page_share must be an integer, 0 (off) or above") end
    elseif not ok or not (v > 0) then raise(("open: carry.%s must be %s above 0"):format(k, want)) end
  end
  return whole(carry.groups), whole(carry.changes), carry.seconds, whole(carry.page_share)
end

--- runnel.open([path | { path, sync = true, clock = fn, map_size = bytes, writemap = false }]) -> pipeline
-- map_size is LMDB's initial map (64 MiB by default); it doubles by itself.
-- writemap = true writes through LMDB's memory map: faster, but with
-- sync = false an OS crash may damage the state instead of only losing its
-- last groups (LMDB's own warning). A process crash loses nothing committed.
function runnel.open(opts)
  local path, sync, clock, map_size, writemap, groups, changes, seconds, notes, write_back, page_share, max_readers
  if type(opts) == "string" then
    path = opts
  elseif type(opts) == "table" then
    for k in pairs(opts) do
      if not OPEN_FIELDS[k] then raise(("open: unknown option %s (path, sync, clock, map_size, writemap, carry, notes, write_back, max_readers)"):format(tostring(k))) end
    end
    path, sync, clock, map_size, writemap = opts.path, opts.sync, opts.clock, opts.map_size, opts.writemap == true
    for _, k in ipairs{ "sync", "writemap" } do -- sync = "false" would be taken as true, writemap = 1 as false
      if opts[k] ~= nil and type(opts[k]) ~= "boolean" then
        raise(("open: %s must be a boolean, got %s"):format(k, given(opts[k])))
      end
    end
    groups, changes, seconds, page_share = carry_bounds(opts.carry)
    notes = opts.notes
    if notes ~= nil and notes ~= false and type(notes) ~= "function" then
      raise("open: notes must be a function(line) or false")
    end
    write_back = opts.write_back -- true: the write-back layer (same state; README, Performance)
    if write_back ~= nil and type(write_back) ~= "boolean" then raise("open: write_back must be a boolean") end
    if clock ~= nil and type(clock) ~= "function" then raise("open: clock must be a function") end
    if map_size ~= nil and not whole(map_size) then raise("open: map_size must be an integer") end
    map_size = map_size and whole(map_size)
    max_readers = opts.max_readers -- LMDB's reader slots, when the state's lock file is made
    if max_readers ~= nil and (not whole(max_readers) or max_readers < 1 or max_readers > 65536) then
      raise(("open: max_readers must be an integer from 1 to 65536 (LMDB's reader slots; 126 by default), got %s")
            :format(shown(max_readers)))
    end
    if map_size and map_size < 0 then -- C takes it as a size_t: -1 would be 2^64 - 1
      raise(("open: map_size must be 0 (64 MiB) or more bytes, got %d"):format(map_size))
    end
  elseif opts ~= nil then
    raise("open: expects a path or an options table, got " .. type(opts))
  end
  -- Checked here, where the user's line is known: core.open would take a
  -- number as its text (a state directory "5" in the working directory)
  -- and call "" a name.
  if path ~= nil and type(path) ~= "string" then
    raise("open: path must be a string (a state directory), got " .. type(path))
  end
  if path == "" then raise("open: the path must not be empty (runnel.open() opens a temporary state)") end
  max_readers = max_readers and whole(max_readers)
  local p, err = core.open(path, sync == false, clock, map_size, writemap, groups, changes, seconds, write_back,
                           page_share, max_readers)
  if not p then raise(err) end
  if notes ~= nil then extra_of(p).notes = notes end
  return p
end

-- ---- A state that lives through deploys (schema changes, dropping) ----

-- Each schema change a declaration applied is one line (evolve.h), handed
-- to runnel.open{ notes = fn(line) } (false: kept quiet), by default
-- written to stderr: a deploy says what it changed.
-- The lines are taken from the core (notes.h): a C host that set a notes
-- callback at open is told them there instead, and Lua gets none.
function tell_changes(p)
  local e = extra_of(p)
  local lines = p:_take_notes()
  for i = 1, #lines do
    if e.notes == nil then io.stderr:write("runnel: ", lines[i], "\n")
    elseif e.notes then tell_hook("notes", e.notes, lines[i]) end
  end
end

--- p:drop(name): drops a relation the pipeline has not declared (core:
-- rn_drop); a durable sink's groups left waiting are said in notes.
function Pipeline:drop(name)
  check_pipeline(self, "drop")
  self:_drop(name)
  tell_changes(self)
end

--- p:changes() -> { line… }: the schema changes applied since open.
function Pipeline:changes()
  check_pipeline(self, "changes")
  return self:_notes()
end

--- p:alter(name, { rename = { old = "new", … } }): renames columns of the
-- source table name when it is next declared (the state holding old and
-- no new); the same as was = "old" in the new column's declaration.
function Pipeline:alter(name, spec)
  check_pipeline(self, "alter")
  if type(name) ~= "string" then raise("alter: the relation name must be a string, got " .. type(name)) end
  if type(spec) ~= "table" then raise("alter: expects { rename = { old = \"new\" } }") end
  for k in pairs(spec) do
    if k ~= "rename" then raise(("alter: unknown field %s (rename)"):format(tostring(k))) end
  end
  if type(spec.rename) ~= "table" then raise("alter: rename must be a table { old = \"new\" }") end
  for from, to in pairs(spec.rename) do
    if type(from) ~= "string" or type(to) ~= "string" or from == "" or to == "" then
      raise("alter: rename takes column names, old = \"new\"")
    end
    self:_rename(name, from, to, true)
  end
  return self
end

--- p:undeclared() -> { name… }: relations the state holds that this
-- pipeline has not declared (so far), in name order.
function Pipeline:undeclared()
  check_pipeline(self, "undeclared")
  return self:_undeclared()
end

-- A name's control characters as messages escape them (core/error.c): a
-- newline in a declared name must not break a note's line.
local CONTROL_ESCAPES = { ["\n"] = "\\n", ["\t"] = "\\t", ["\r"] = "\\r", ["\b"] = "\\b", ["\f"] = "\\f" }
local function escape_controls(s)
  return (s:gsub("[%c\127]", function(c) return CONTROL_ESCAPES[c] or ("\\u%04x"):format(c:byte()) end))
end

-- At close, a pipeline that declared relations says which stored ones it
-- did not: they are kept, unchanged, until dropped (never fed, never grown).
local core_close = Pipeline.close
function Pipeline:close()
  check_pipeline(self, "close")
  local ok, names = pcall(self._undeclared, self)
  local e = extra[self]
  if ok and #names > 0 and e and e.notes ~= false and #self:relations() > 0 then
    local line = ("stored in the state but not declared: %s (p:drop(name) or runnel drop STATE NAME removes one)")
                 :format(escape_controls(table.concat(names, ", ")))
    if e.notes then tell_hook("notes", e.notes, line) else io.stderr:write("runnel: ", line, "\n") end
  end
  return core_close(self)
end

local LOOKUP_FIELDS = { key = true, source = true, cache = true }
local CACHE_FIELDS = { ttl = true, size = true, missing = true }

--- p:lookup(name, { columns…, key = …, source = fn | runnel.sqlite_source(…) | runnel.attach(…),
--                   cache = { ttl = seconds, size = entries, missing = true } }) -> relation
-- Rows fetched on demand for joins; without cache every lookup asks the source.
function Pipeline:lookup(name, decl)
  check_pipeline(self, "lookup")
  if type(name) ~= "string" then raise("lookup: the name must be a string") end
  if type(decl) ~= "table" then raise("lookup: expects a column list with key and source") end
  local cols_only = {}
  for k, v in pairs(decl) do
    if math.type(k) == "integer" then cols_only[k] = v
    elseif not LOOKUP_FIELDS[k] then raise(("%s: unknown field %s (key, source, cache)"):format(name, tostring(k))) end
  end
  cols_only.key = decl.key
  local cols, err = column_specs(name, cols_only)
  if not cols then raise(err) end
  local key
  key, err = key_spec(name, decl.key)
  if err then raise(err) end
  if not key then raise(name .. ": a lookup needs a key") end
  local src, kind, a, b = decl.source
  if type(src) == "function" then kind, a = "function", src
  elseif type(src) == "table" and src.sqlite_source then kind, a, b = "sqlite", src.sqlite_source, src.table
  elseif tostring(src):match("^runnel%.Attached") or (type(src) == "userdata" and src._source) then
    kind, a, b = "attach", src:_source()
  else
    raise(name .. ": source must be a function, runnel.sqlite_source(…) or runnel.attach(…)")
  end
  local cache = decl.cache
  if cache ~= nil then
    if type(cache) ~= "table" then raise(name .. ": cache must be a table") end
    for k in pairs(cache) do
      if not CACHE_FIELDS[k] then raise(("%s: cache: unknown field %s (ttl, size, missing)"):format(name, tostring(k))) end
    end
    local size, ttl = cache.size, cache.ttl
    if size ~= nil and not (type(size) == "number" and math.tointeger(size) and size >= 1) then -- a whole float is a size too
      raise(("%s: cache: size must be a whole number >= 1, got %s"):format(name, shown(size)))
    end
    if ttl ~= nil and not (type(ttl) == "number" and ttl > 0) then
      raise(("%s: cache: ttl must be a number of seconds > 0, got %s"):format(name, shown(ttl)))
    end
    if cache.missing ~= nil and type(cache.missing) ~= "boolean" then -- missing = 0 was true
      raise(("%s: cache: missing must be a boolean, got %s"):format(name, given(cache.missing)))
    end
  end
  local rel
  rel, err = self:_lookup(name, cols, key, kind, a, b, cache ~= nil, cache and (cache.ttl or math.huge),
                          cache and math.tointeger(cache.size or 10000), cache and cache.missing ~= false)
  if not rel then raise(err) end
  return rel
end

local RUN_FIELDS = { batch = true, on_error = true, rejects = true, progress = true, max_rejects = true }

--- p:run(source, { batch = 1000, on_error = "stop"|"skip", rejects = path | file, progress = true,
--                   max_rejects = n }) -> { lines, applied, rejected, groups }
function Pipeline:run(source, opts)
  check_pipeline(self, "run")
  in_batch(self, "run") -- its groups would be committed although the batch raises
  opts = opts or {}
  if type(source) == "table" and source.jetstream then return self:_run_js(source, opts) end
  if type(source) ~= "table" or source.ndjson == nil then raise("run: expects runnel.ndjson_source(…)") end
  -- checked here, or the binding's argument errors name this file and _run
  if io.type(source.ndjson) == "closed file" then raise("run: the source's file is closed") end
  if (type(source.ndjson) ~= "string" and io.type(source.ndjson) ~= "file") or type(source.name) ~= "string" then
    raise("run: expects runnel.ndjson_source(…)")
  end
  for k in pairs(opts) do
    if not RUN_FIELDS[k] then raise("run: unknown option " .. tostring(k) .. " (batch, on_error, rejects, progress, max_rejects)") end
  end
  local batch = whole(opts.batch or 1000)
  if not batch or batch < 1 then raise("run: batch must be a positive integer") end
  local on_error = opts.on_error or "stop"
  if on_error ~= "stop" and on_error ~= "skip" then raise('run: on_error must be "stop" or "skip"') end
  if opts.rejects ~= nil and type(opts.rejects) ~= "string" and io.type(opts.rejects) ~= "file" then
    raise("run: rejects must be a path or an open file")
  end
  if opts.progress ~= nil and type(opts.progress) ~= "boolean" then -- progress = "no" was true
    raise("run: progress must be a boolean, got " .. given(opts.progress))
  end
  local max = opts.max_rejects
  if max ~= nil and (not whole(max) or max < 1) then raise("run: max_rejects must be a positive integer") end
  max = max and whole(max)
  -- as the CLI's usage: without skip nothing is rejected, and a rejects
  -- path would only be emptied
  if (opts.rejects ~= nil or max ~= nil) and on_error ~= "skip" then
    raise(('run: %s goes with on_error = "skip"'):format(opts.rejects ~= nil and "rejects" or "max_rejects"))
  end
  -- its errors name the caller's line (runnel.core skips this file's frames)
  return self:_run(source.ndjson, source.name, batch, on_error == "skip", opts.rejects, opts.progress ~= false, max)
end

---------------------------------------------------------------------------
-- Reading a state from outside (issue 15: the REPL's .open browses with these).

--- runnel.inspect(path) -> { seq, relations = { { name, kind, columns, rows, next_id }… } }
-- What the state at path holds, from its catalogue (one read transaction).
runnel.inspect = core.inspect

--- runnel.state_version(path) -> integer (since 0.37)
-- A number that changes with every group, declaration and drop committed
-- on the state, and when the state is removed and made again (its last
-- LMDB transaction's id and its file, hashed), and with each group a
-- pipeline of this process carries on it (sync = false; told, not flushed:
-- since 0.38): the REPL reads a browsed state's catalogue again only when
-- it did.
runnel.state_version = core.state_version

-- attached:rows() is an iterator of (row, id) like rel:rows(), whether the
-- binding hands back a list or already an iterator.
local function iterate_attached(methods)
  local rows = methods.rows
  if type(rows) ~= "function" or methods._iterating then return end
  methods._iterating = true
  function methods.rows(att, ...)
    if not is_a(att, methods) then -- checked here: the binding's check would name this file's line
      raise(("bad argument #1 to 'rows' (runnel.Attached expected, got %s)"):format(type(att)))
    end
    local list, st, ctl = rows(att, ...)
    if type(list) == "function" then return list, st, ctl end
    local mt = getmetatable(list) -- a list that iterates itself (row, id), and still counts with #
    if type(mt) == "table" and mt.__call then return list end
    local i = 0
    return function()
      i = i + 1
      if list[i] ~= nil then return list[i], nil end
    end
  end
end

--- runnel.attach(state_path, name) -> attached: get(key), rows() (an iterator), close()
function runnel.attach(path, name)
  -- checked here: the binding's own checks would name this line, not the caller's
  if type(path) ~= "string" then raise(("bad argument #1 to 'attach' (string expected, got %s)"):format(type(path))) end
  if type(name) ~= "string" then raise(("bad argument #2 to 'attach' (string expected, got %s)"):format(type(name))) end
  local att = core.attach(path, name)
  local mt = getmetatable(att)
  if type(mt) == "table" and type(mt.__index) == "table" then iterate_attached(mt.__index) end
  return att
end

-- ---- ordered access: rel:top{}, rel:index{} and an index's reads (core/top.c,
-- core/index.c, lua/lorder.c) ----

-- An order: { {"score", "desc"}, {"id", "asc"} }, or flat: { "score", "desc", "id" }
-- (a direction follows its column; ascending when none does). -> cols, desc
local function order_spec(where, order, options)
  if type(order) == "string" then order = { order } end
  if type(order) ~= "table" then return nil, where .. ": order must be a list of columns, got " .. type(order) end
  for k in pairs(order) do -- a map ({ score = "desc" }) has no sequence part
    if (math.type(k) ~= "integer" or k < 1 or k > #order) and not (options and options[k]) then
      return nil, ("%s: order must be a list of columns, got a table with key %s"):format(where, tostring(k))
    end
  end
  local cols, desc = {}, {}
  local directed = true -- the last column has its direction: a "asc"/"desc" after it is a column
  for i, item in ipairs(order) do
    local col, dir = item, nil
    if type(item) == "table" then
      col, dir = item[1], item[2]
      for k in pairs(item) do -- { "score", dir = "desc" } would sort ascending, and { "score", "desc", "x" } drop "x"
        if k ~= 1 and k ~= 2 then
          return nil, ("%s: order entry #%d must be {column, direction}, got a table with key %s")
                      :format(where, i, tostring(k))
        end
      end
    end
    if (item == "asc" or item == "desc") and not directed then
      desc[#cols] = item == "desc"
      directed = true
    elseif (item == "asc" or item == "desc") and #cols > 0 and type(order[i - 1]) == "string" then
      -- { "score", "desc", "asc" }: the second direction would overrule the first
      return nil, ('%s: order entry #%d: "%s" follows the direction of "%s"; a direction follows its column once')
                  :format(where, i, item, cols[#cols])
    elseif type(col) ~= "string" then
      return nil, ("%s: order entry #%d must be a column name or {column, direction}"):format(where, i)
    elseif dir ~= nil and dir ~= "asc" and dir ~= "desc" then
      return nil, ('%s: the direction of "%s" must be "asc" or "desc", got %s'):format(where, col, shown(dir))
    else
      for j = 1, #cols do
        if cols[j] == col then return nil, ('%s: order names "%s" twice'):format(where, col) end
      end
      cols[#cols + 1] = col
      desc[#cols] = dir == "desc"
      directed = type(item) == "table"
    end
  end
  if #cols == 0 then return nil, where .. ": order needs at least one column" end
  return cols, desc
end

local TOP_FIELDS = { n = true, by = true, order = true, rank = true, ties = true, name = true }

--- rel:top{ n = 10, by = "guild_id" | {…} | nil, order = { {"score", "desc"}, {"id", "asc"} },
---          rank = "rank", ties = "row", name = … } -> the first n rows of each by group
--- in that order (then by row id), with a 1-based rank column; rank movements are UPDATEs.
function Relation:top(opts)
  check_relation(self, "top")
  if type(opts) ~= "table" then raise(("%s: top: expects an options table, got %s"):format(self:name(), type(opts))) end
  for k in pairs(opts) do
    if not TOP_FIELDS[k] then
      raise(("%s: top: unknown option %s (n, by, order, rank, ties, name)"):format(self:name(), tostring(k)))
    end
  end
  local n, err = derived_name(self, "top", opts.name)
  if not n then raise(err) end
  local count = type(opts.n) == "number" and math.tointeger(opts.n) -- 3.0 is 3, as JSON or arithmetic gives it
  if not count or count < 1 then raise(n .. ": n must be a positive integer, got " .. given(opts.n)) end
  if opts.ties == "dense" then
    raise(n .. ': ties = "dense" (equal values sharing a rank) is not offered yet; ties = "row" ranks by row number, '
          .. 'equal values in row id order')
  elseif opts.ties ~= nil and opts.ties ~= "row" then
    raise(n .. ': ties must be "row" (row numbers, equal values ordered by id), got ' .. shown(opts.ties))
  end
  local by = by_list(n, opts.by)
  local cols, desc = order_spec(n, opts.order)
  if not cols then raise(desc) end
  local rank = opts.rank or "rank"
  if type(rank) ~= "string" then raise(n .. ": rank must be a column name") end
  local rel
  rel, err = self:pipeline():_top(self, n, count, by, cols, desc, rank)
  if not rel then raise(err) end
  return declared(self:pipeline(), rel)
end

--- rel:index{ "score", "desc", …, name = … } -> an index: rel's rows kept in that order;
--- idx:range{ from, to, offset, limit }, idx:rank(values), idx:count{ from, to }.
function Relation:index(spec)
  check_relation(self, "index")
  if type(spec) ~= "table" then raise(("%s: index: expects a list of columns, got %s"):format(self:name(), type(spec))) end
  for k in pairs(spec) do
    if math.type(k) ~= "integer" and k ~= "name" then -- a map ({ score = "desc" }) too
      raise(("%s: index: unknown option %s (name)"):format(self:name(), tostring(k)))
    end
  end
  local n, err = derived_name(self, "index", spec.name)
  if not n then raise(err) end
  local cols, desc = order_spec(n, spec, { name = true })
  if not cols then raise(desc) end
  local rel
  rel, err = self:pipeline():_index(self, n, cols, desc)
  if not rel then raise(err) end
  return declared(self:pipeline(), rel)
end

local RANGE_FIELDS = { from = true, to = true, offset = true, limit = true }

--- idx:range{ from =, to =, offset =, limit = } -> iterator of rows in index order
--- (bounds inclusive: a value, or a list for the first order columns).
function Relation:range(opts)
  check_relation(self, "range")
  opts = opts or {}
  if type(opts) ~= "table" then
    raise(("%s: range: expects { from =, to =, offset =, limit = }, got %s"):format(self:name(), type(opts)))
  end
  for k in pairs(opts) do
    if not RANGE_FIELDS[k] then
      raise(("%s: range: unknown option %s (from, to, offset, limit)"):format(self:name(), tostring(k)))
    end
  end
  -- the bounds, offset and limit are checked by the binding (lua/lorder.c), naming the option
  local rows, i = self:_range(opts.from, opts.to, opts.offset, opts.limit), 0
  return function()
    i = i + 1
    return rows[i]
  end
end

--- idx:rank(values) -> 1 + the rows before values (the rank of the first row holding them)
function Relation:rank(values)
  check_relation(self, "rank")
  return self:_rank(values)
end

--- count(): the rows; idx:count{ from =, to = }: the rows of an index between the bounds.
local unordered_count = Relation.count
function Relation:count(opts)
  check_relation(self, "count")
  if opts ~= nil then
    if type(opts) ~= "table" then raise(("%s: count: expects { from =, to = }, got %s"):format(self:name(), type(opts))) end
    for k in pairs(opts) do
      if k ~= "from" and k ~= "to" then raise(("%s: count: unknown option %s (from, to)"):format(self:name(), tostring(k))) end
    end
    return self:_count(opts.from, opts.to)
  end
  local kind = self:schema().kind
  if kind == "top" or kind == "index" then return self:_ordered_count() end
  return unordered_count(self)
end

--- p:run(runnel.jetstream_source{…}, { batch = N }) -> { messages, lines, applied, groups }:
-- the source's batch (or opts.batch) is messages per group.
function Pipeline:_run_js(source, opts)
  for k in pairs(opts) do
    if k ~= "batch" and k ~= "progress" then raise("run: unknown option " .. tostring(k) .. " for a jetstream source (batch)") end
  end
  local batch = whole(source.batch or opts.batch or 100)
  if not batch or batch < 1 then raise("run: batch must be a positive integer") end
  local st = self:_run_jetstream(source.jetstream, source.stream, source.subjects, batch, source.idle or 0,
                                 source.limit or 0, source.name)
  st.lines = st.messages
  return st
end

require("runnel.io")(runnel, raise, core)
require("runnel.view")(runnel, core)

return runnel
