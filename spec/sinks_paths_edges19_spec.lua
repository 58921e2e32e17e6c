-- Durable sinks on paths that are no regular file (core/sink.c,
-- rn_sink_path_kind): an NDJSON path sink reads its file back after a
-- crash to write each group once, and SQLite keeps a database in a file,
-- so a FIFO, a socket, a terminal or a device is refused at declaration,
-- naming the relation and the path (before: a FIFO swallowed the lines, a
-- device failed the next group, /dev/stdout on a pipe said "No such file").
local runnel = require "runnel"
local H = require "helper"

describe("a durable sink on a path that is no regular file", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  local function table_s()
    local p = runnel.open{ path = dir .. "/st" }
    return p, p:table("s", { {"k","int"}, key = "k" })
  end

  it("is refused for a FIFO, naming the relation and the path", function()
    local fifo = dir .. "/fifo"
    assert(os.execute("mkfifo " .. fifo))
    local p, s = table_s()
    local err = H.error_of(s.sink, s, runnel.ndjson(fifo))
    assert.matches("^s: ndjson: " .. fifo:gsub("%p", "%%%0") .. " is a FIFO %(a pipe%), not a regular file", err)
    assert.matches("io.stdout", err, 1, true)
    err = H.error_of(s.sink, s, runnel.sqlite(fifo, "t"))
    assert.matches("^s: sqlite: " .. fifo:gsub("%p", "%%%0") .. " is a FIFO %(a pipe%), not a regular file", err)
    s:insert{ k = 1 } -- the pipeline goes on
    assert.equal(1, p:seq())
    p:close()
  end)

  it("is refused for a character device such as /dev/null", function()
    local p, s = table_s()
    local err = H.error_of(s.sink, s, runnel.ndjson("/dev/null"))
    assert.matches("^s: ndjson: /dev/null is a character device, not a regular file", err)
    s:insert{ k = 1 }
    s:insert{ k = 2 } -- before: "ndjson: syncing: Invalid argument" rolled this group back
    assert.equal(2, p:seq())
    p:close()
  end)

  it("is refused for a socket", function()
    local sock = dir .. "/sock"
    local _, _, code = H.sh(("python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(%q)'"):format(sock))
    if code ~= 0 then return end -- no python3 here: nothing to bind one with
    local p, s = table_s()
    assert.matches("^s: ndjson: .* is a socket, not a regular file", H.error_of(s.sink, s, runnel.ndjson(sock)))
    assert.matches("^s: sqlite: .* is a socket, not a regular file", H.error_of(s.sink, s, runnel.sqlite(sock, "t")))
    p:close()
  end)

  it("/dev/stdout on a pipe is refused, pointing at io.stdout; on a file it is that file", function()
    local script = dir .. "/out.lua"
    H.write(script, ([[
local runnel = require "runnel"
local p = runnel.open{ path = %q }
local s = p:table("s", { {"k","int"}, key = "k" })
local ok, err = pcall(s.sink, s, runnel.ndjson("/dev/stdout", { verb = false }))
if not ok then io.stderr:write(err, "\n"); s:sink(runnel.ndjson(io.stdout, { verb = false })) end
s:insert{ k = 1 }
p:close()
]]):format(dir .. "/st"))
    local out, err, code = H.sh(("(lua5.4 %s | cat)"):format(script))
    assert.equal(0, code)
    assert.equal('{"k":1}\n', out)
    assert.matches("s: ndjson: /dev/stdout is a FIFO (a pipe), not a regular file", err, 1, true)
    os.execute("rm -rf " .. dir .. "/st")
    out, err, code = H.sh(("(lua5.4 %s > %s/out.ndjson)"):format(script, dir))
    assert.equal(0, code)
    assert.equal("", err)
    assert.equal('{"k":1}\n', H.read(dir .. "/out.ndjson"))
  end)
end)
