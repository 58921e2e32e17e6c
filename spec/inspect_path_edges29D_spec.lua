-- runnel inspect escaped the control characters of relation names and
-- columns ("one line per relation"), but printed the state's path as it
-- was: a path holding a newline split the "state:" line in two, and a
-- byte that is no UTF-8 (a path may hold any) reached the terminal. The
-- path is shown as the names are, each such byte as \ddd, as a grid shows
-- it; valid UTF-8 stays as it is.
local H = require "helper"
local runnel = require "runnel"

local R = H.runnel_bin

describe("runnel inspect of a state whose path holds control characters or bytes that are no UTF-8", function()
  after_each(H.cleanup)

  it("shows the path on its one state: line, escaped", function()
    local dir = H.tmpdir()
    for _, case in ipairs{
      { "a b\nc\td", "a b\\nc\\td" },
      { "x\255y", "x\\255y" },
      { "Straße €\195", "Straße €\\195" },
      { "\226\130", "\\226\\130" }, -- a character cut short
      { "\237\160\128", "\\237\\160\\128" }, -- a surrogate
    } do
      local st = dir .. "/" .. case[1]
      local p = runnel.open(st)
      p:table("t", { {"id","int"}, key = "id" })
      p:close()
      local quoted = "'" .. st:gsub("'", "'\\''") .. "'"
      local out, err, code = H.sh(("%s inspect %s"):format(R, quoted))
      assert.are.same({ "", 0 }, { err, code })
      local first, second = out:match("^([^\n]*)\n([^\n]*)\n")
      assert.are.equal("state: " .. dir .. "/" .. case[2], first)
      assert.are.equal("last group: 0", second)
    end
  end)
end)
