-- The REPL's dot commands at their edges (round 17).
local H = require "helper"

describe("the REPL's .schema", function()
  it("without a name says it takes one, where it looked up a relation named \"\"", function()
    local out, err = H.sh(H.runnel_bin, 't = p:table("t", { {"k","int"}, key = "k" })\n.schema\n.schema   \n.schema t\n')
    assert.equal("", err)
    -- before: no relation "" (known: t)
    local _, n = out:gsub("error: %.schema takes NAME %(a relation: t%)\n", "")
    assert.equal(2, n)
    assert.matches('table "t"\n column | type | null | key | default\n', out, 1, true)
  end)
end)
