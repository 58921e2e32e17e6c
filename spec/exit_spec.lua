-- os.exit(code, true) while a callback runs closes the Lua state under
-- the pipeline: its close is refused (the core's frames are below), and
-- the process ends; a temporary state's directory must not stay behind.
local H = require "spec.helper"

-- Runs body (Lua declaring relations on the temporary pipeline p, then
-- calling os.exit somewhere) with TMPDIR a fresh directory: the exit code,
-- stderr, and the temporary states left in that directory.
local function run_exiting(body, runner)
  local dir = H.tmpdir()
  local script = dir .. "/exit.lua"
  H.write(script, 'local runnel = require "runnel"\nlocal p = runnel.open()\n' .. body)
  local tmp = dir .. "/tmp"
  assert(os.execute("mkdir '" .. tmp .. "'"))
  -- The process ends with the pipeline open under its callback's frames:
  -- what the closed Lua state pointed to is unreachable at exit, and
  -- LeakSanitizer (make asan) would count it; the directory is the point.
  local _, err, code = H.sh(("ASAN_OPTIONS=detect_leaks=0 TMPDIR='%s' %s '%s'")
    :format(tmp, runner or (H.runnel_bin .. " run"), script))
  local left = H.sh(("ls '%s'"):format(tmp))
  return code, err, left
end

describe("os.exit(code, true) inside a callback", function()
  after_each(H.cleanup)

  local cases = {
    sink = 't:sink(function() os.exit(3, true) end)\nt:insert{ k = 1 }\n',
    filter = 't:filter(function() os.exit(3, true) end)\nt:insert{ k = 1 }\n',
    map = 't:map(function() os.exit(3, true) end, { {"k","int"}, key = "k" })\nt:insert{ k = 1 }\n',
    ["join mapper"] = 'local u = p:table("u", { {"k","int"}, key = "k" })\n'
      .. 't:join(u, { mapper = function() os.exit(3, true) end })\nt:insert{ k = 1 }\n',
    ["table-form sink's commit"] = 't:sink{ commit = function() os.exit(3, true) end }\nt:insert{ k = 1 }\n',
  }
  for what, body in pairs(cases) do
    it("in a " .. what .. " removes the temporary state (runnel run)", function()
      local code, err, left = run_exiting('local t = p:table("t", { {"k","int"}, key = "k" })\n' .. body)
      assert.are.equal(3, code, err)
      assert.are.equal("", left)
    end)
  end

  it("removes it under lua5.4 with require 'runnel' too", function()
    local code, err, left = run_exiting('local t = p:table("t", { {"k","int"}, key = "k" })\n' .. cases.sink, "lua5.4")
    assert.are.equal(3, code, err)
    assert.are.equal("", left)
  end)

  it("outside a callback, as before, removes it", function()
    local code, err, left = run_exiting('p:table("t", { {"k","int"}, key = "k" }):insert{ k = 1 }\nos.exit(4, true)\n')
    assert.are.equal(4, code, err)
    assert.are.equal("", left)
  end)
end)
