-- f0420e5 keeps the REPL going whatever the user sets p to (p = 5, p =
-- print). p = 0/0 still ended it at the next line, exit 1: after each
-- chunk the REPL forgets where p's group began, session.group_start[p] =
-- nil, and NaN is no table key ("runnel: lua/repl.lua:520: table index is
-- NaN"). The session now goes on, as with any other number.
local H = require "helper"

local bin = H.runnel_bin

describe("the REPL whose p is NaN", function()
  it("goes on, and .tables says what p holds", function()
    local out, err, code = H.sh(bin, "p = 0/0\n1 + 1\n.tables\np = nil\n2 + 2\n")
    assert.are.same({ table.concat({
      "2",
      "error: .tables reads the pipeline p, and p is a number value (.open DIR makes the state at DIR p; p = "
        .. "runnel.open() a temporary one)",
      "4",
    }, "\n") .. "\n", "", 0 }, { out, err, code })
  end)
end)
