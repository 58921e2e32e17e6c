local runnel = require "runnel"
local H = require "helper"
local ks, read = H.ndjson_ks, H.text_of

describe("rev27d ndjson link re-pointed, declared again in the same process", function()
  after_each(H.cleanup)
  it("the second sink writes the new target, the first the old", function()
    local dir, tdir, odir = H.tmpdir(), H.tmpdir(), H.tmpdir()
    local link, target, other, state = dir .. "/cur.ndjson", tdir .. "/out.ndjson", odir .. "/next.ndjson", dir .. "/st"
    H.write(target, "")
    H.sh(("ln -s %s %s"):format(target, link))
    local p, s = H.ndjson_stream(state, link, { verb = false })
    s:insert{ k = 1, pad = "x" }
    H.sh(("ln -sfn %s %s"):format(other, link))
    local ok, err = pcall(s.sink, s, runnel.ndjson(link, { verb = false }))
    print(ok, err)
    s:insert{ k = 2, pad = "x" }
    -- pointed back: the same file as the first sink
    H.sh(("ln -sfn %s %s"):format(target, link))
    local ok2, err2 = pcall(s.sink, s, runnel.ndjson(link, { verb = false }))
    print(ok2, err2)
    s:insert{ k = 3, pad = "x" }
    p:close()
    print(read(target), read(other))
    local out, _, code = H.sh(("%s verify %s"):format(H.runnel_bin, state))
    assert.equal(0, code, out)
    assert.equal("1,2,3", ks(read(target)))
    if ok then assert.equal("2,3", ks(read(other))) end
  end)
end)
