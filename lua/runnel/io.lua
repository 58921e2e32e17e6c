-- runnel/io.lua — the constructors of runnel's outside ends: NDJSON and
-- SQLite sinks, stores, and the sources of lookups and p:run. Loaded by
-- runnel.lua, which hands it the module table and its error function.
return function(runnel, raise, core)
  core._dsl(function() end) -- a file of the DSL: errors raised here name the user's line

  --- runnel.ndjson(path_or_file [, { verb = "verb" | false, id = "field" }]) -> a sink for rel:sink(…)
  -- One JSON object per change; the verb in the named field ("verb" unless
  -- verb = false; a cdc relation's events say what happened themselves, so
  -- for one the default is false); a DELETE line carries the key columns. A durable sink: a
  -- group's lines are written once it is durable in LMDB. A path is appended
  -- to, exactly once across crashes (cut back to the last group recorded,
  -- never a torn line); an open file gets the groups durable while it runs.
  -- id = "field": each line names its change there, "<state id>:<seq>:<n>"
  -- (after the verb), so a path sink back from a crash tells its own waiting
  -- lines from identical lines another writer appended (without it, content
  -- decides: ndjson.c, "Ownership").
  function runnel.ndjson(target, opts)
    opts = opts or {}
    if type(opts) ~= "table" then raise("ndjson: options must be a table") end
    for k in pairs(opts) do
      if k ~= "verb" and k ~= "id" then raise("ndjson: unknown option " .. tostring(k) .. " (verb, id)") end
    end
    local verb, id = opts.verb, opts.id
    if verb ~= nil and verb ~= false and (type(verb) ~= "string" or verb == "") then
      raise("ndjson: verb must be a field name or false")
    end
    if id ~= nil and (type(id) ~= "string" or id == "" or id:find("\0", 1, true)) then
      raise("ndjson: id must be a field name")
    end
    if type(target) ~= "string" and io.type(target) ~= "file" then
      raise("ndjson: expects a path or an open file, got " .. type(target))
    end
    return { attach = function(_, rel)
      local field = verb
      if field == nil then field = rel:schema().kind ~= "cdc" and "verb" end -- every cdc event is an INSERT
      local ok, err = rel:pipeline():_ndjson_sink(rel, target, field, id)
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
  -- One state writes a table (another is refused while the first is still
  -- there); a mirror changed outside runnel is refused, never dropped; a
  -- row the table refuses (CHECK, NOT NULL) keeps its group waiting, named
  -- in the error, until the row or the table is fixed.
  function runnel.sqlite(path, tname, opts)
    if type(path) ~= "string" or type(tname) ~= "string" then raise("sqlite: expects (path, table)") end
    if opts ~= nil and type(opts) ~= "table" then raise("sqlite: options must be a table") end
    for k in pairs(opts or {}) do
      if k ~= "busy_timeout" then raise("sqlite: unknown option " .. tostring(k) .. " (busy_timeout)") end
    end
    local busy = opts and opts.busy_timeout
    if busy ~= nil and (type(busy) ~= "number" or not (busy >= 0)) then -- not (>=): NaN too
      raise("sqlite: busy_timeout must be a number of seconds, at least 0")
    end
    local busy_ms = busy and math.min(busy * 1000 + 0.5, 0x7fffffff) // 1 -- math.huge: as long as SQLite waits
    return { attach = function(_, rel)
      local ok, err = rel:pipeline():_sqlite_sink(rel, path, tname, busy_ms and math.tointeger(busy_ms) or -1)
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
  -- ---- JetStream (core/jetstream.c, core/js_source.c) ----

  local JS_SINK_FIELDS = { url = true, subject = true, format = true, verb = true, id = true, timeout = true }

  --- runnel.jetstream{ url =, subject =, format = "ndjson"|"debezium"|"flink", verb = "verb", id =, timeout = 10 }
  -- -> a durable sink publishing each change as one message on subject, with
  -- the message id "<state id>:<seq>:<n>" (the server drops a re-send). A
  -- group is published once it is durable in LMDB; after an outage longer
  -- than the stream's duplicate window the subject's last message says what
  -- was published already. "ndjson": the row with the verb in field verb;
  -- "debezium"/"flink": the relation's rel:cdc{format = …} rows. One state
  -- publishes to a subject.
  function runnel.jetstream(opts)
    if type(opts) ~= "table" then raise("jetstream: expects { url =, subject = }") end
    for k in pairs(opts) do
      if not JS_SINK_FIELDS[k] then raise("jetstream: unknown option " .. tostring(k) .. " (url, subject, format, verb, id, timeout)") end
    end
    if type(opts.url) ~= "string" or type(opts.subject) ~= "string" or opts.subject == "" then
      raise("jetstream: url and subject must be strings")
    end
    local format = opts.format or "ndjson"
    if format ~= "ndjson" and format ~= "debezium" and format ~= "flink" then
      raise('jetstream: format must be "ndjson", "debezium" or "flink"')
    end
    local verb = opts.verb
    if verb == nil then verb = "verb" end
    if verb ~= false and (type(verb) ~= "string" or verb == "") then
      raise("jetstream: verb must be a field name or false")
    end
    if opts.id ~= nil and type(opts.id) ~= "string" then raise("jetstream: id must be a string") end
    if opts.timeout ~= nil and (type(opts.timeout) ~= "number" or opts.timeout <= 0) then
      raise("jetstream: timeout must be a positive number of seconds")
    end
    return { attach = function(_, rel)
      if format ~= "ndjson" then rel, verb = rel:cdc{ format = format }, false end
      local ok, err = rel:pipeline():_jetstream_sink(rel, opts.url, opts.subject, verb, opts.id, opts.timeout)
      if not ok then error(err, 0) end
    end }
  end

  local JS_SOURCE_FIELDS = { url = true, stream = true, subjects = true, subject = true, partitions = true,
                             batch = true, idle = true, limit = true }

  -- "nats://host:port[,host:port…]/STREAM/subject[,subject…][?batch=N&idle=S]" as options
  local function js_url_options(text)
    local url, stream, subjects, query = text:match("^(nats://[^/]+)/([^/]+)/([^?]+)%??(.*)$")
    if not url then raise("jetstream_source: expects nats://host:port/STREAM/subject[,subject…][?batch=N&idle=S]") end
    local opts = { url = url, stream = stream, subjects = {} }
    for sub in subjects:gmatch("[^,]+") do opts.subjects[#opts.subjects + 1] = sub end
    for k, v in query:gmatch("([^&=]+)=([^&]*)") do opts[k] = tonumber(v) or v end
    return opts
  end

  --- runnel.jetstream_source{ url =, stream =, subjects = {…} | subject = s, partitions = {p…},
  --   batch = 100, idle = 0, limit = nil } or runnel.jetstream_source("nats://h:p/STREAM/subj,…")
  -- -> a source for p:run: each message holds NDJSON change lines or a
  -- msgpack array of changes; up to batch messages form one group, which
  -- also writes the stream sequence it reached per subject into the state.
  -- subject + partitions reads subject.<p> for each p. The run ends once
  -- caught up and idle seconds passed with nothing new (idle < 0: never).
  function runnel.jetstream_source(opts)
    if type(opts) == "string" then opts = js_url_options(opts) end
    if type(opts) ~= "table" then raise("jetstream_source: expects { url =, stream =, subjects = }") end
    for k in pairs(opts) do
      if not JS_SOURCE_FIELDS[k] then
        raise("jetstream_source: unknown option " .. tostring(k) .. " (url, stream, subjects, subject, partitions, batch, idle, limit)")
      end
    end
    if type(opts.url) ~= "string" or type(opts.stream) ~= "string" then raise("jetstream_source: url and stream must be strings") end
    local subjects = {}
    if opts.partitions ~= nil then
      if type(opts.subject) ~= "string" or type(opts.partitions) ~= "table" then
        raise("jetstream_source: partitions = {p…} goes with subject = prefix")
      end
      for _, p in ipairs(opts.partitions) do subjects[#subjects + 1] = opts.subject .. "." .. tostring(p) end
    elseif type(opts.subject) == "string" then
      subjects[1] = opts.subject
    end
    for _, sub in ipairs(type(opts.subjects) == "table" and opts.subjects or {}) do
      if type(sub) ~= "string" then raise("jetstream_source: subjects must be strings") end
      subjects[#subjects + 1] = sub
    end
    if #subjects == 0 then raise("jetstream_source: name subjects = {…} or subject =") end
    local counts = {}
    for _, f in ipairs{ "batch", "limit" } do
      local v = opts[f]
      counts[f] = type(v) == "number" and math.tointeger(v) or nil -- 10.0 is 10, as JSON or arithmetic gives it
      if v ~= nil and (not counts[f] or counts[f] < 1) then
        raise("jetstream_source: " .. f .. " must be a positive integer")
      end
    end
    if opts.idle ~= nil and type(opts.idle) ~= "number" then raise("jetstream_source: idle must be a number of seconds") end
    return { jetstream = opts.url, stream = opts.stream, subjects = subjects, batch = counts.batch, idle = opts.idle,
             limit = counts.limit, name = opts.url .. "/" .. opts.stream }
  end
end
