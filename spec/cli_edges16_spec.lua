-- The runnel command at its edges: a script's error object that is no
-- string. lua5.4 prints what its __tostring gives ("lua5.4: custom"); runnel
-- run printed "(error object is a table value)" for it, losing the message
-- of every library that raises error objects.
local H = require "helper"

local bin = H.runnel_bin

describe("runnel run, a script raising an error object", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  local function run(body, opts)
    local path = dir .. "/s.lua"
    H.write(path, body)
    return H.sh(("%s run %s%s"):format(bin, opts or "", path))
  end

  it("with __tostring prints what it gives, and exits 1", function()
    local out, err, code = run('error(setmetatable({}, { __tostring = function() return "custom told" end }))\n')
    assert.equal(1, code)
    assert.equal("", out)
    assert.equal("runnel: custom told\n", err)
  end)

  it("with __tostring under --traceback prints it, then the traceback", function()
    local _, err, code = run('error(setmetatable({}, { __tostring = function() return "custom told" end }))\n',
                             "--traceback ")
    assert.equal(1, code)
    assert.matches("^runnel: custom told\nstack traceback:\n", err)
  end)

  for what, mt in pairs{ ["raises"] = '{ __tostring = function() error("refused") end }',
                         ["gives no string"] = "{ __tostring = function() return {} end }",
                         ["is absent"] = "{}" } do
    it("whose __tostring " .. what .. " says its type, and exits 1", function()
      local out, err, code = run(("error(setmetatable({}, %s))\n"):format(mt))
      assert.equal(1, code)
      assert.equal("", out)
      assert.equal("runnel: (error object is a table value)\n", err)
    end)
  end

  it("nil says so", function()
    local _, err, code = run("error(nil)\n")
    assert.equal(1, code)
    assert.equal("runnel: (error object is a nil value)\n", err)
  end)
end)

-- runnel run - read no script: "cannot open -", where lua5.4 - reads the
-- script from stdin, as pipes give it.
describe("runnel run -", function()
  it("reads the script from stdin, its arguments after it", function()
    local out, err, code = H.sh(("%s run - a b"):format(bin), 'print("got", ...)\nprint(arg[0], arg[1])\n')
    assert.equal("", err)
    assert.equal(0, code)
    assert.equal("got\ta\tb\n-\ta\n", out)
  end)

  it("names stdin in an error, and refuses --input - beside it", function()
    local _, err, code = H.sh(("%s run -"):format(bin), 'error("boom")\n')
    assert.equal(1, code)
    assert.equal("runnel: stdin:1: boom\n", err)
    _, err, code = H.sh(("%s run - --input -"):format(bin), 'print(1)\n')
    assert.equal(2, code)
    assert.matches("--input - cannot read it too", err, 1, true)
  end)
end)
