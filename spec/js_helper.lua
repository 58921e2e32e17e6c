-- js_helper.lua — what the JetStream specs share: one nats-server of their
-- own on 127.0.0.1 (a free port, its data in a scratch directory, always
-- stopped) and build/jsctl to add streams, publish and read messages.
local H = require "spec.helper"
package.path = "scripts/cluster/?.lua;" .. package.path
local N = require "nats"

local J = {}

local JSCTL = (os.getenv("RUNNEL_BIN") or "build/runnel"):gsub("runnel$", "jsctl")

-- jsctl is test tooling: nats.c 3.4.1 now and then leaks a published
-- message it was acked for, which a sanitized run must not count as runnel's.
function J.jsctl(url, ...)
  local out, err, code = H.sh(("ASAN_OPTIONS=detect_leaks=0 %s '%s' %s"):format(JSCTL, url, table.concat({ ... }, " ")))
  assert(code == 0, err)
  return out
end

-- The messages of a subject: { {seq, id, data}, … }.
function J.dump(url, stream, subject)
  local msgs = {}
  for line in J.jsctl(url, "dump", stream, subject):gmatch("[^\n]+") do
    local seq, id, data = line:match("^(%d+)\t([^\t]*)\t(.*)$")
    msgs[#msgs + 1] = { tonumber(seq), id, data }
  end
  return msgs
end

-- Publishes lines, per (default 1) to a message, with message ids
-- "<id>:<n>" when id is given.
function J.publish(url, subject, lines, per, id)
  local dir = H.tmpdir()
  H.write(dir .. "/in.ndjson", table.concat(lines, "\n") .. "\n")
  J.jsctl(url, "pub", subject, dir .. "/in.ndjson", "lines=" .. (per or 1), id and ("id=" .. id) or "")
end

-- Publishes text as one message (lines=99: its lines together).
function J.publish_one(url, subject, text)
  local dir = H.tmpdir()
  H.write(dir .. "/msg", text .. "\n")
  J.jsctl(url, "pub", subject, dir .. "/msg", "lines=99")
end

-- Starts the server: it, or nil and why not. Its directory is not the
-- helper's scratch directory (other specs clean those); J.stop removes it.
-- A spec that cannot have its server fails (an it that raises why): make
-- test installs nats-server, so a server that does not start is a failure
-- to see, not a test to skip.
function J.start()
  math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)"), 16) % 1000)
  if not N.available() then return nil, "nats-server cannot start: it is not installed (make deps installs it)" end
  local home = os.tmpname()
  os.remove(home)
  local server, why = N.single(home)
  if server then server.home = home else os.execute("rm -rf '" .. home .. "'") end
  return server, server == nil and "nats-server cannot start: " .. tostring(why) or nil
end

function J.stop(server)
  server.stop()
  os.execute("rm -rf '" .. server.home .. "'")
end

-- A maker of fresh streams named prefix1, prefix2 …, each with its own
-- subjects "<name in lower case>.>": make(opts) returns the name and that
-- subject prefix.
function J.streams(url, prefix)
  local n = 0
  return function(opts)
    n = n + 1
    local name = prefix .. n
    J.jsctl(url, "add", name, "'" .. name:lower() .. ".>'", opts or "")
    return name, name:lower()
  end
end

-- The change line inserting { id = id } into stream "ev" (J.events).
function J.ev_insert(id) return ('{"rel":"ev","op":"insert","row":{"id":%d}}'):format(id) end

-- Declares stream ev (id int) on p with a sink collecting the ids it is
-- told, in order: that list.
function J.events(p)
  local ev = p:stream("ev", { {"id","int"} })
  local got = {}
  ev:sink(function(_, row) got[#got + 1] = row.id end)
  return got
end

return J
