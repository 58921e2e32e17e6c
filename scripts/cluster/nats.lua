-- nats.lua — nats-server on 127.0.0.1 for the cluster specs, demo and
-- benchmark: one server or a 3-node JetStream cluster on random free
-- ports, data under a directory of the caller's, every server watched so
-- that it dies with the Lua process that started it (even when that one is
-- killed or fails), and stopped by stop().
local N = {}

local function sh(cmd)
  local f = io.popen(cmd .. " 2>&1")
  local out = f:read("a")
  local ok = f:close()
  return ok, out
end

local function my_pid()
  local f = io.open("/proc/self/stat")
  local pid = f:read("n")
  f:close()
  return pid
end

local function sleep(s) os.execute("sleep " .. s) end

--- True when nats-server can be run at all.
function N.available()
  return (sh("command -v nats-server >/dev/null"))
end

local used = {}
-- A port nothing listens on (ss says), not handed out before in this process.
local function free_port()
  local _, out = sh("ss -Htln 2>/dev/null")
  for _ = 1, 200 do
    local port = math.random(20000, 60000)
    if not used[port] and not out:find(":" .. port .. " ", 1, true) then
      used[port] = true
      return port
    end
  end
  error("nats: no free port found")
end

local Server = {}
Server.__index = Server

-- Starts the server with its arguments; a watchdog kills it when the Lua
-- process that started it is gone (bounded: it checks every second).
function Server:start()
  os.execute("mkdir -p '" .. self.dir .. "'")
  os.remove(self.log)
  local cmd = ("nats-server -a 127.0.0.1 -p %d -js -sd '%s/js' -n %s -l '%s' %s"):format(
    self.port, self.dir, self.name, self.log, self.extra or "")
  local script = self.dir .. "/watch.sh"
  local f = assert(io.open(script, "w"))
  f:write(("%s &\ns=$!\necho $s > '%s/pid'\nwhile kill -0 %d 2>/dev/null && kill -0 $s 2>/dev/null; do sleep 1; done\nkill -9 $s 2>/dev/null\n")
    :format(cmd, self.dir, my_pid()))
  f:close()
  os.execute("sh '" .. script .. "' >/dev/null 2>&1 &")
  for _ = 1, 100 do -- up to 5 s for "Server is ready"
    local f = io.open(self.log)
    local text = f and f:read("a") or ""
    if f then f:close() end
    if text:find("Server is ready", 1, true) then return true end
    if text:find("[FTL]", 1, true) then return nil, text end
    sleep(0.05)
  end
  return nil, "nats-server did not start on port " .. self.port
end

function Server:pid()
  local f = io.open(self.dir .. "/pid")
  local pid = f and f:read("n")
  if f then f:close() end
  return pid
end

--- SIGKILL (signal 9) or SIGTERM; waits until it is gone (bounded).
function Server:kill(signal)
  local pid = self:pid()
  if not pid then return end
  os.execute(("kill -%s %d 2>/dev/null"):format(signal or "9", pid))
  for _ = 1, 100 do
    local f = io.open("/proc/" .. pid .. "/stat")
    local stat = f and f:read("a")
    if f then f:close() end
    if not stat or stat:match("^%d+ %b() (%a)") == "Z" then break end -- gone, or a zombie
    sleep(0.05)
  end
  os.remove(self.dir .. "/pid")
end

local function new_server(dir, name, extra)
  local port = free_port()
  return setmetatable({ dir = dir .. "/" .. name, name = name, port = port, log = dir .. "/" .. name .. ".log",
                        url = "nats://127.0.0.1:" .. port, extra = extra }, Server)
end

--- One JetStream server with data under dir -> { url, servers = {s}, stop }, or nil, why.
function N.single(dir)
  local s = new_server(dir, "n1")
  local ok, err = s:start()
  if not ok then s:kill(); return nil, err end
  return { url = s.url, servers = { s }, stop = function() s:kill() end }
end

--- A 3-node JetStream cluster with data under dir -> { url (all three), servers, stop }, or nil, why.
function N.cluster(dir, nodes)
  nodes = nodes or 3
  local servers, routes = {}, {}
  for i = 1, nodes do
    servers[i] = new_server(dir, "n" .. i)
    servers[i].cport = free_port()
    routes[i] = "nats://127.0.0.1:" .. servers[i].cport
  end
  local urls = {}
  for i, s in ipairs(servers) do
    s.extra = ("--cluster_name rn --cluster nats://127.0.0.1:%d --routes %s"):format(s.cport, table.concat(routes, ","))
    urls[i] = s.url
  end
  local c = { url = table.concat(urls, ","), servers = servers }
  function c.stop() for _, s in ipairs(servers) do s:kill() end end
  for _, s in ipairs(servers) do
    local ok, err = s:start()
    if not ok then c.stop(); return nil, err end
  end
  return c
end

return N
