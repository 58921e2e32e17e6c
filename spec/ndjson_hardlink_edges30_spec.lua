-- Two NDJSON path sinks of one pipeline on one file by two names (a hard
-- link). The second is refused (one writer per file), but until 0.41 the
-- message blamed "another durable sink (of another state, in this
-- process or another)": the flock it met is this pipeline's own. It now
-- names the pipeline's sink that writes the file. Another state's sink
-- on the file is still called so.
local H = require "helper"
local runnel = require "runnel"

describe("an NDJSON path sink on a hard link to a file a sink writes", function()
  after_each(H.cleanup)

  it("of this pipeline names that sink", function()
    local dir = H.tmpdir()
    H.write(dir .. "/o.ndjson", "")
    H.sh(("ln '%s/o.ndjson' '%s/o2.ndjson'"):format(dir, dir))
    local p = runnel.open(dir .. "/st")
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:sink(runnel.ndjson(dir .. "/o.ndjson"))
    local err = H.error_of(function() t:select({ "k" }, "s"):sink(runnel.ndjson(dir .. "/o2.ndjson")) end)
    assert.matches(("s: ndjson: %s/o2.ndjson is the file of this pipeline's durable sink to %s/o.ndjson, "
                    .. "by another name: two sinks cannot write one file"):format(dir, dir):gsub("[%.%-]", "%%%0"), err)
    -- the pipeline goes on: the first sink writes its file
    t:insert{ k = 1 }
    p:close()
    assert.are.equal('{"verb":"INSERT","k":1}\n', H.read(dir .. "/o.ndjson"))
  end)

  it("of another state is still another state's", function()
    local dir = H.tmpdir()
    H.write(dir .. "/o.ndjson", "")
    H.sh(("ln '%s/o.ndjson' '%s/o2.ndjson'"):format(dir, dir))
    local p = runnel.open(dir .. "/st")
    p:table("t", { {"k","int"}, key = "k" }):sink(runnel.ndjson(dir .. "/o.ndjson"))
    local q = runnel.open(dir .. "/st2")
    local err = H.error_of(function() q:table("t", { {"k","int"}, key = "k" }):sink(runnel.ndjson(dir .. "/o2.ndjson")) end)
    assert.matches("is the file of another durable sink %(of another state", err)
    q:close()
    p:close()
  end)
end)
