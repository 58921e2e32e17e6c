-- Review of 0.38 with an NDJSON sink whose path is too long for a meta
-- key (the real path > 400 bytes: "od#" / "of#" hash keys): runnel verify
-- on the healthy state, the renamed file found by its identity, and the
-- drop note's wording for a log sink.
local runnel = require "runnel"
local H = require "helper"

describe("review26: an NDJSON path sink on a long path", function()
  after_each(H.cleanup)

  local function setup()
    local dir = H.tmpdir()
    local deep = dir .. "/" .. ("a"):rep(200) .. "/" .. ("b"):rep(200)
    H.sh("mkdir -p " .. deep)
    local state, log, script = dir .. "/st", deep .. "/out.ndjson", dir .. "/crash.lua"
    H.ndjson_table_crash(script, state, log)
    return state, log
  end

  it("runnel verify finds no damage, and a file renamed to another name is found by its identity", function()
    local state, log = setup()
    local out, _, code = H.sh(("%s verify %s"):format(H.runnel_bin, state))
    assert.equal(0, code, out)
    assert(os.rename(log, log .. ".old"))
    local p = runnel.open{ path = state }
    local t = p:table("t", { {"id","int"}, {"a","string"}, key = "id" })
    t:sink(runnel.ndjson(log))
    t:insert{ id = 3, a = "z" }
    p:close()
    assert.equal('{"verb":"INSERT","id":3,"a":"z"}\n', H.text_of(log))
    out, _, code = H.sh(("%s verify %s"):format(H.runnel_bin, state))
    assert.equal(0, code, out)
  end)

  it("the drop note says a log sink takes its waiting groups with any columns", function()
    local state = setup()
    local lines = {}
    local p = runnel.open{ path = state, notes = function(line) lines[#lines + 1] = line end }
    p:drop("t")
    p:close()
    assert.equal(1, #lines)
    assert.matches("declared again (with any columns)", lines[1], 1, true)
  end)
end)
