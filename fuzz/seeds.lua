-- fuzz/seeds.lua — writes the seed corpus: lua5.4 fuzz/seeds.lua
-- Small, meaningful inputs per target in fuzz/corpus/<target>/ (the files
-- are committed; rerun this after changing the state in fuzz/state.c).
local NIL, BIN, ARR = {}, {}, {}
local function bin(s) return setmetatable({ s }, BIN) end
local function arr(t) return setmetatable(t, ARR) end

-- A small msgpack encoder: maps are given as lists of {key, value} pairs so
-- their order (and duplicates) are the seed's choice.
local function mp(v)
  local ty = type(v)
  if v == NIL or v == nil then return "\xc0"
  elseif ty == "boolean" then return v and "\xc3" or "\xc2"
  elseif math.type(v) == "integer" then
    if v >= 0 and v < 128 then return string.char(v) end
    if v < 0 and v >= -32 then return string.pack("b", v) end
    return "\xd3" .. string.pack(">i8", v)
  elseif ty == "number" then return "\xcb" .. string.pack(">d", v)
  elseif ty == "string" then
    if #v < 32 then return string.char(0xa0 + #v) .. v end
    return "\xd9" .. string.char(#v) .. v
  elseif getmetatable(v) == BIN then return "\xc4" .. string.char(#v[1]) .. v[1]
  elseif getmetatable(v) == ARR then
    local out = { string.char(0x90 + #v) }
    for _, x in ipairs(v) do out[#out + 1] = mp(x) end
    return table.concat(out)
  else
    local out = { string.char(0x80 + #v) }
    for _, kv in ipairs(v) do out[#out + 1] = mp(kv[1]) .. mp(kv[2]) end
    return table.concat(out)
  end
end

local function write(target, name, data)
  os.execute("mkdir -p fuzz/corpus/" .. target)
  local f = assert(io.open(("fuzz/corpus/%s/%s"):format(target, name), "wb"))
  f:write(data)
  f:close()
end

-- push: |ctl|len16|msgpack| changes; ctl = op-1 | rel << 2 | commit << 7.
local REL = { t = 0, teams = 1, c = 2, kl = 3, ev = 4, d = 5 }
local OP = { insert = 0, update = 1, upsert = 2, delete = 3 }
local function change(rel, op, map, commit)
  local body = mp(map)
  return string.char(OP[op] | REL[rel] << 2 | (commit and 0x80 or 0)) .. string.pack(">I2", #body) .. body
end
local full = { {"id", 1}, {"f", 1.5}, {"s", "ann"}, {"b", true}, {"y", bin("\0\1\2")},
  {"l", arr{ 1, "two", NIL }}, {"m", { {"k", 1}, {2, "v"} }}, {"a", arr{ 1.5, { {"x", true} } }},
  {"pos", { {"x", 3}, {"y", 0.25}, {"in", { {"z", "deep"} }} }}, {"team", 7}, {"score", 10} }
local seeds = {
  insert_full = change("t", "insert", full),
  insert_minimal = change("t", "insert", { {"id", 2} }),
  team_then_player = change("teams", "insert", { {"tid", 7}, {"name", "red"} }) .. change("t", "insert", full, true),
  update_patch = change("t", "insert", full, true) .. change("t", "update", { {"id", 1}, {"score", 99}, {"team", NIL} }),
  upsert_delete = change("t", "upsert", { {"id", 3}, {"s", "x"} }) .. change("t", "delete", { {"id", 3} }, true),
  composite = change("c", "insert", { {"k1", "a\0b"}, {"k2", -5}, {"k3", false}, {"k4", bin("")}, {"k5", -0.5}, {"v", arr{}} }),
  composite_del = change("c", "insert", { {"k1", ""}, {"k2", 9}, {"k3", true}, {"k4", bin("\255")}, {"k5", 2.0} }, true)
    .. change("c", "delete", { {"k1", ""}, {"k2", 9}, {"k3", true}, {"k4", bin("\255")}, {"k5", 2.0} }),
  keyless = change("kl", "insert", { {"a", 1}, {"b", "x"}, {"l", arr{ 1, 2 }} }) .. change("kl", "insert", { {"a", 1}, {"b", "x"}, {"l", arr{ 1, 2 }} }, true)
    .. change("kl", "delete", { {"a", 1}, {"b", "x"}, {"l", arr{ 1, 2 }} }),
  stream = change("t", "insert", { {"id", 4}, {"score", 6} }) .. change("ev", "insert", { {"player", 4}, {"ts", 61}, {"v", 2.5} })
    .. change("ev", "insert", { {"player", 4}, {"ts", 125}, {"v", 1e308} }, true),
  defaults = change("d", "insert", { {"id", "k"} }) .. change("d", "upsert", { {"id", "k"}, {"m", { {"b", 1}, {"a", 2} }} }),
  struct_array = change("t", "insert", { {"id", 5}, {"pos", arr{ 1, NIL, NIL }} }),
  wrong_type = change("t", "insert", { {"id", "one"} }) .. change("t", "insert", { {"id", 6} }),
  unknown_column = change("t", "insert", { {"id", 7}, {"nope", 1} }),
  duplicate = change("t", "insert", { {"id", 8} }) .. change("t", "insert", { {"id", 8} }),
  not_a_map = change("t", "insert", arr{ 1, 2 }),
  truncated = change("t", "insert", full):sub(1, 20),
  big_ints = change("t", "insert", { {"id", math.mininteger}, {"score", math.maxinteger}, {"f", 1/0} }),
  floats = change("t", "insert", { {"id", 9}, {"f", 0/0} }) .. change("t", "update", { {"id", 9}, {"f", -0.0} }),
  float_id = change("t", "insert", { {"id", 2.0} }) .. change("t", "delete", { {"id", 2.5} }),
  team_change = change("teams", "insert", { {"tid", 1}, {"name", "a"} }) .. change("t", "insert", { {"id", 1}, {"team", 1} }, true)
    .. change("teams", "update", { {"tid", 1}, {"region", "eu"} }) .. change("teams", "delete", { {"tid", 1} }),
}
for name, data in pairs(seeds) do write("push", name, data) end

-- ndjson: |options|lines; options bit 0 skip, bits 1-3 batch - 1.
local lines = {
  insert = '{"rel":"t","op":"insert","row":{"id":1,"s":"ann","team":7,"l":[1,"x",null],"pos":{"x":1,"in":{"z":"q"}}}}',
  teams = '{"rel":"teams","op":"insert","row":{"tid":7,"name":"red"}}\n{"rel":"t","op":"insert","row":{"id":2,"team":7}}',
  update = '{"rel":"t","op":"insert","row":{"id":1}}\n{"rel":"t","op":"update","row":{"id":1,"score":5,"f":2.5}}',
  delete = '{"rel":"t","op":"upsert","row":{"id":1,"m":{"b":1,"a":null}}}\n{"rel":"t","op":"delete","row":{"id":1}}',
  composite = '{"rel":"c","op":"insert","row":{"k1":"a","k2":1,"k3":true,"k4":"AAE=","k5":1.5,"v":{"x":[]}}}',
  keyless = '{"rel":"kl","op":"insert","row":{"a":1,"b":null}}\n{"rel":"kl","op":"delete","row":{"a":1,"b":null}}',
  stream = '{"rel":"ev","op":"insert","row":{"player":1,"ts":5,"v":1.0}}\n{"rel":"ev","op":"insert","row":{"player":1,"ts":99}}',
  bad_lines = '{"rel":"t","op":"insert","row":{"id":"x"}}\n{"rel":"nope","op":"insert","row":{}}\n{"rel":"t","op":"zap","row":{"id":1}}\n{]\n{"rel":"t","op":"insert","row":{"id":3}}',
  escapes = '{"rel":"d","op":"insert","row":{"id":"\\u0000\\ud83d\\ude00","m":{"\\n":1}}}',
  blank = '\n\n{"rel":"d","op":"insert","row":{"id":"a"}}\n\n',
  -- the scanner: spaces between tokens, the row before rel and op, escapes in names
  reordered = '{ "row" : { "id" : 4 , "s" : "a\\"b\\u00e9" } , "op" : "insert" , "rel" : "\\u0074" }\r',
}
for name, text in pairs(lines) do
  write("ndjson", name .. "_skip", "\1" .. text .. "\n")
  write("ndjson", name, "\6" .. text)
end

-- json: one text each.
local texts = {
  object = '{"a":1,"b":[true,false,null],"c":{"d":"e"}}', array = '[1,-2,3.5,1e10,-0.0,"x"]',
  string = '"caf\\u00e9 \\ud83d\\ude00 \\u0000"', number = '-9223372036854775808', real = '1.7976931348623157e308',
  dup = '{"a":1,"a":2}', nested = ('['):rep(70) .. (']'):rep(70), empty = '{}', bad = '{"a":}', long = '9999999999999999999999',
  ws = ' \t\n 1 ', control = '"\1"', key_nul = '{"a\\u0000b":1}',
  -- for the scanner (jscan.c), each beside jansson in fuzz_json.c
  fkjoin = '{"rel":"players","op":"update","row":{"id":5,"name":"p5","team_id":null,"score":12}}',
  escapes = '["\\"\\\\\\/\\b\\f\\n\\r\\t","\\u00E9\\uFFFF\\uDBFF\\uDFFF","\\ud800","\\udc00x","\\ud800\\u0041"]',
  utf8 = '["\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80","\xc0\x80","\xed\xa0\x80","\xf4\x90\x80\x80","\xe0\x9f\xbf"]',
  numbers = '[0,-0,1.5e-400,1e400,-1e400,01,1.,.5,-,1e+,9223372036854775807,-9223372036854775809,123456789012345678]',
  wide = '{' .. ('"k%d":%d,'):rep(40):format(table.unpack((function() local t = {} for i = 1, 40 do t[#t + 1] = i; t[#t + 1] = i end return t end)())) .. '"k7":0}',
  deep = ('{"a":'):rep(64) .. '1' .. ('}'):rep(64), too_deep = ('['):rep(65) .. '1' .. (']'):rep(65),
  nul_after = '[1\0,true\0]', trailing = '[1,]', literals = '[truex,nul]',
}
for name, text in pairs(texts) do write("json", name, text) end

-- key: |split|key a|key b|; keys as key.h encodes them.
local function kint(i) return "\x10" .. string.pack(">I8", i ~ math.mininteger) end
local function kstr(s, tag) return (tag or "\x30") .. s:gsub("%z", "\0\xff") .. "\0\0" end
local function kfloat(d)
  local u = string.unpack(">I8", string.pack(">d", d))
  u = (u >> 63 == 1) and ~u or (u ~ math.mininteger)
  return "\x20" .. string.pack(">I8", u)
end
local function key(a, b) return string.char(#a) .. a .. b end
local keys = {
  ints = key(kint(-1), kint(1)), int_prefix = key(kint(5), kint(5) .. kstr("a")),
  strings = key(kstr("a"), kstr("a\0")), bytes = key(kstr("\0\255", "\x40"), kstr("", "\x40")),
  floats = key(kfloat(-1.5), kfloat(1e-300)), bools = key("\x05\x06\x01", "\x06\x05"),
  mixed = key(kstr("x") .. kint(2) .. "\x06" .. kstr("", "\x40") .. kfloat(2.5), kstr("x") .. kint(2) .. "\x05"),
  bad_escape = key(kstr("a"):sub(1, -2) .. "\7", kint(0):sub(1, 5)), empty = "\0",
}
for name, data in pairs(keys) do write("key", name, data) end

-- row: stored rows (msgpack arrays) and near misses.
local rows = {
  full = mp(arr{ 1, 1.5, "s", true, bin("b"), arr{ 1 }, { {"a", 1} }, NIL, arr{ 1, NIL } }),
  small = mp(arr{ 7, NIL }), empty = mp(arr{}), scalar = mp(42), map = mp({ {"a", arr{ 1, 2 }} }),
  ext = "\x92\xd4\x01\x02\xc7\x02\x05ab", array16 = "\xdc\x00\x02\xc0\xc3",
  truncated = mp(arr{ 1, "long enough string" }):sub(1, 10),
  huge_count = "\xdd\xff\xff\xff\xff\xc0", nested = ("\x91"):rep(40) .. "\xc0",
  str8 = "\x92\xd9\x03abc\xc4\x00", trailing = mp(arr{ 1 }) .. "\xc0",
}
for name, data in pairs(rows) do write("row", name, data) end

-- ops: |config|operations (fuzz/fuzz_ops.c); a change is ctl = op-1 | rel << 3,
-- |len8|msgpack|; 4 begin, 5 commit, 6 rollback, 7 | n << 3: flush, reopen, read, deliver.
local OREL = { t = 0, teams = 1, kl = 2, c = 3, ev = 4 }
local function op(rel, verb, map)
  local body = mp(map)
  return string.char(OP[verb] | OREL[rel] << 3, #body) .. body
end
local BEGIN, COMMIT, ROLLBACK = "\4", "\5", "\6"
local FLUSH, REOPEN, READ, DELIVER = "\7", "\15", "\23", "\31"
local team7 = op("teams", "insert", { {"tid", 7}, {"name", "red"} })
local ann = op("t", "insert", { {"id", 1}, {"team", 7}, {"score", 10}, {"s", "ann"}, {"m", { {"k", 1} }} })
local ops = {
  commit = "\0" .. BEGIN .. team7 .. ann .. COMMIT .. REOPEN,
  rollback = "\0" .. team7 .. BEGIN .. ann .. op("t", "update", { {"id", 1}, {"score", 3} }) .. READ .. ROLLBACK .. READ,
  failed_push = "\2" .. BEGIN .. team7 .. ann .. op("t", "insert", { {"id", 1} }) .. BEGIN .. ann .. COMMIT,
  refused = "\1" .. ann .. BEGIN .. op("t", "update", { {"id", 1}, {"score", 13} }) .. team7 .. COMMIT .. FLUSH,
  lua_error = "\3" .. BEGIN .. ann .. op("t", "insert", { {"id", 2}, {"s", "boom"} }) .. COMMIT .. REOPEN,
  stream = "\4" .. BEGIN .. ann .. op("ev", "insert", { {"player", 1}, {"ts", 61}, {"v", 2.5} })
    .. op("ev", "insert", { {"player", 1}, {"ts", 200}, {"v", 1.0} }) .. COMMIT
    .. BEGIN .. op("ev", "insert", { {"player", 1}, {"ts", 62} }) .. ROLLBACK
    .. op("ev", "insert", { {"player", 1}, {"ts", 0} }) .. READ,
  keyless = "\6" .. BEGIN .. op("kl", "insert", { {"a", 1}, {"b", "x"} }) .. op("kl", "insert", { {"a", 1}, {"b", "x"} })
    .. COMMIT .. BEGIN .. op("kl", "delete", { {"a", 1}, {"b", "x"} }) .. ROLLBACK .. op("kl", "delete", { {"a", 1}, {"b", "x"} }),
  composite = "\0" .. op("c", "insert", { {"k1", "a"}, {"k2", 1}, {"v", arr{ 1, "x" }} })
    .. BEGIN .. op("c", "upsert", { {"k1", "a"}, {"k2", 1}, {"v", NIL} }) .. op("c", "delete", { {"k1", "b"}, {"k2", 1} }) .. COMMIT,
  top = "\7" .. team7 .. BEGIN .. ann .. op("t", "insert", { {"id", 2}, {"team", 7}, {"score", 20} })
    .. op("t", "insert", { {"id", 3}, {"team", 7}, {"score", 30} }) .. COMMIT
    .. BEGIN .. op("t", "delete", { {"id", 3} }) .. op("teams", "delete", { {"tid", 7} }) .. DELIVER .. ROLLBACK .. REOPEN,
}
for name, data in pairs(ops) do write("ops", name, data) end
-- fills (ctl 7 | 0x20, a base byte; 0x40: kl) past the 1 MiB map, carried and in one group
local FILL, FILLKL = "\39", "\103"
write("ops", "fill_carried", "\12" .. FILL .. "\0" .. FILL .. "\1" .. FILLKL .. "\2" .. FILL .. "\3" .. FILL .. "\4"
  .. BEGIN .. FILL .. "\5" .. FILLKL .. "\6" .. op("t", "update", { {"id", 1}, {"score", 13} }) .. COMMIT
  .. FILL .. "\7" .. FILLKL .. "\8" .. REOPEN)
write("ops", "fill_group", "\8" .. BEGIN .. FILL .. "\0" .. FILL .. "\1" .. FILLKL .. "\2" .. FILL .. "\3"
  .. FILL .. "\4" .. FILL .. "\5" .. FILL .. "\6" .. COMMIT .. FILL .. "\0" .. FLUSH)

-- meta: edits of the pristine state's meta records (fuzz/fuzz_meta.c), each
-- |k|m|…|; k as RUNNEL_FUZZ_TRACE=1 lists them.
local M = { chs = 7, ["d:per_team"] = 10, ["d:roster"] = 11, egn = 22, ["fc:high"] = 23, fmt = 24, ["fn:high"] = 25,
  ["n:per_team"] = 30, ["n:t"] = 32, ["od:sink:c-durable"] = 33, ["od:sink:d"] = 34, ["r:best"] = 35, ["r:kd"] = 38,
  ["r:kl"] = 39, ["r:per_min"] = 40, ["r:per_team"] = 41, ["r:roster"] = 42, ["r:t"] = 43, seq = 45 }
local function replace(k, bytes) return string.char(M[k], #bytes) .. bytes end
local function delete(k) return string.char(M[k], 0xff) end
local function truncate(k, n) return string.char(M[k], 0xfe, n) end
local function flip(k, at, x) return string.char(M[k], 0x80 | at, x) end
local meta = {
  none = "",
  seq_short = replace("seq", "\1\2\3"),
  seq_ahead = replace("seq", string.pack("<I8", 1000)),
  seq_gone = delete("seq"),
  fmt_future = replace("fmt", string.pack("<I4", 99)),
  fmt_gone = delete("fmt"),
  t_schema = truncate("r:t", 9) .. flip("r:kl", 5, 0x20),
  t_gone = delete("r:t") .. delete("n:t"),
  t_counters = replace("n:t", string.pack("<I8I8I8", 0, 1 << 62, 2)),
  agg_decl = flip("d:per_team", 3, 0xff) .. truncate("r:per_team", 4) .. replace("n:per_team", "x"),
  join = flip("r:roster", 2, 1) .. delete("d:roster"),
  top = flip("r:best", 7, 0x80),
  window = truncate("r:per_min", 20),
  distinct = replace("r:kd", mp(arr{ 99, arr{} })),
  fn_changed = flip("fn:high", 0, 1),
  fn_code = flip("fn:high", 0, 1) .. flip("fc:high", 40, 0x55),
  fn_code_cut = flip("fn:high", 1, 1) .. truncate("fc:high", 30),
  durable = replace("od:sink:d", string.pack("<I8I8I8", 7, 9, 1 << 40)) .. truncate("od:sink:c-durable", 12),
  chs = replace("chs", string.pack("<I8I8", 5, 2)) .. replace("egn", "\0"),
}
for name, data in pairs(meta) do write("meta", name, data) end
