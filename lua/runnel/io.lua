-- runnel/io.lua — the constructors of runnel's outside ends: NDJSON and
-- SQLite sinks, stores, and the sources of lookups and p:run. Loaded by
-- runnel.lua, which hands it the module table and its error function.
return function(runnel, raise, core)
  core._dsl(function() end) -- a file of the DSL: errors raised here name the user's line

  --- runnel.ndjson(path_or_file [, { verb = "verb" | false }]) -> a sink for rel:sink(…)
  -- One JSON object per change; the verb in the named field ("verb" unless
  -- verb = false; a cdc relation's events say what happened themselves, so
  -- for one the default is false); a DELETE line carries the key columns. A durable sink: a
  -- group's lines are written once it is durable in LMDB. A path is appended
  -- to, exactly once across crashes (cut back to the last group recorded,
  -- never a torn line); an open file gets the groups durable while it runs.
  function runnel.ndjson(target, opts)
    opts = opts or {}
    if type(opts) ~= "table" then raise("ndjson: options must be a table") end
    for k in pairs(opts) do
      if k ~= "verb" then raise("ndjson: unknown option " .. tostring(k) .. " (verb)") end
    end
    local verb = opts.verb
    if verb ~= nil and verb ~= false and type(verb) ~= "string" then raise("ndjson: verb must be a field name or false") end
    if type(target) ~= "string" and io.type(target) ~= "file" then
      raise("ndjson: expects a path or an open file, got " .. type(target))
    end
    return { attach = function(_, rel)
      local field = verb
      if field == nil then field = rel:schema().kind ~= "cdc" and "verb" end -- every cdc event is an INSERT
      local ok, err = rel:pipeline():_ndjson_sink(rel, target, field)
      if not ok then error(err, 0) end
    end }
  end

  --- runnel.sqlite(path, table [, { busy_timeout = seconds }]) -> a sink keeping
  -- a relation in a SQLite table (created if absent; the relation's key as
  -- primary key). A durable sink: each group, once durable in LMDB, becomes
  -- one SQLite transaction of its net effect per key with its mark in
  -- runnel_sinks, exactly once across crashes; rewritten whole only when it
  -- missed groups or the file was replaced. busy_timeout (default 5) bounds
  -- the wait for another connection's lock; past it the delivery fails, the
  -- group stays committed and waits (p:deliver() retries and says why).
  function runnel.sqlite(path, tname, opts)
    if type(path) ~= "string" or type(tname) ~= "string" then raise("sqlite: expects (path, table)") end
    local busy = opts and opts.busy_timeout
    if busy ~= nil and (type(busy) ~= "number" or busy < 0) then
      raise("sqlite: busy_timeout must be a number of seconds, at least 0")
    end
    return { attach = function(_, rel)
      local ok, err = rel:pipeline():_sqlite_sink(rel, path, tname, busy and math.floor(busy * 1000 + 0.5) or -1)
      if not ok then error(err, 0) end
    end }
  end

  --- runnel.store(name) -> a sink keeping a relation in this pipeline's state as a
  -- permanent table, readable from elsewhere with runnel.attach(state_path, name).
  function runnel.store(name)
    if type(name) ~= "string" or name == "" then raise("store: expects a name") end
    return { attach = function(_, rel)
      local ok, err = rel:pipeline():_store_sink(rel, name)
      if not ok then error(err, 0) end
    end }
  end

  --- runnel.sqlite_source(path, table) -> a lookup source: SELECT … WHERE key = ?
  function runnel.sqlite_source(path, tname)
    if type(path) ~= "string" or type(tname) ~= "string" then raise("sqlite_source: expects (path, table)") end
    return { sqlite_source = path, table = tname }
  end

  --- runnel.ndjson_source(path_or_file) -> a source for p:run: lines of
  -- {"rel": …, "op": "insert"|"update"|"upsert"|"delete", "row": {…}}; "-" is stdin.
  function runnel.ndjson_source(target)
    if type(target) ~= "string" and io.type(target) ~= "file" then
      raise("ndjson_source: expects a path, \"-\" or an open file, got " .. type(target))
    end
    local name = type(target) == "string" and (target == "-" and "stdin" or target)
                 or (target == io.stdin and "stdin" or "file")
    return { ndjson = target, name = name }
  end
end
