local runnel = require "runnel"
local H = require "helper"
local ks, read = H.ndjson_ks, H.text_of

local function verify(state)
  local out, _, code = H.sh(("%s verify %s"):format(H.runnel_bin, state))
  assert.equal(0, code, out)
end

local function undeclared(p)
  local s = p:stats()
  local n = 0
  for _ in pairs(s.outbox_undeclared or {}) do n = n + 1 end
  return n
end

describe("rev27d ndjson through links", function()
  after_each(H.cleanup)

  it("a link re-pointed while open, the process going on, then declared again", function()
    local dir, tdir, odir = H.tmpdir(), H.tmpdir(), H.tmpdir()
    local link, target, other, state = dir .. "/cur.ndjson", tdir .. "/out.ndjson", odir .. "/next.ndjson", dir .. "/st"
    H.write(target, "")
    H.sh(("ln -s %s %s"):format(target, link))
    local p, s = H.ndjson_stream(state, link, { verb = false })
    s:insert{ k = 1, pad = "x" }
    H.sh(("ln -sfn %s %s"):format(other, link))
    s:insert{ k = 2, pad = "x" }
    s:insert{ k = 3, pad = "x" }
    p:close()
    assert.equal("1,2,3", ks(read(target)))
    assert.equal("", read(other))
    p, s = H.ndjson_stream(state, link, { verb = false })
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("4", ks(read(other)))
    assert.equal("1,2,3", ks(read(target)))
    verify(state)
    p = H.ndjson_stream(state, target, { verb = false })
    assert.equal(0, undeclared(p))
    p:close()
    assert.equal("1,2,3", ks(read(target)))
  end)

  it("a relative link whose target is rotated (rename + create) and copytruncated while open", function()
    local dir = H.tmpdir()
    local link, target, state = dir .. "/cur.ndjson", dir .. "/out.ndjson", dir .. "/st"
    H.write(target, "")
    H.sh(("cd %s && ln -s out.ndjson cur.ndjson"):format(dir))
    local p, s = H.ndjson_stream(state, link, { verb = false })
    s:insert{ k = 1, pad = "x" }
    H.sh(("mv %s %s.1 && : > %s"):format(target, target, target))
    s:insert{ k = 2, pad = "x" }
    H.sh(("cp %s %s.2 && : > %s"):format(target, target, target))
    s:insert{ k = 3, pad = "x" }
    p:close()
    assert.equal("1", ks(read(target .. ".1")))
    assert.equal("2", ks(read(target .. ".2")))
    assert.equal("3", ks(read(target)))
    p, s = H.ndjson_stream(state, link, { verb = false })
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("3,4", ks(read(target)))
    verify(state)
  end)

  it("a link into a directory that is a link, the directory link re-pointed while open", function()
    local dir, d1, d2 = H.tmpdir(), H.tmpdir(), H.tmpdir()
    local dl, state = dir .. "/logs", dir .. "/st"
    H.sh(("ln -s %s %s"):format(d1, dl))
    H.write(d1 .. "/out.ndjson", "")
    H.sh(("ln -s %s/out.ndjson %s/cur.ndjson"):format(dl, dir))
    local p, s = H.ndjson_stream(state, dir .. "/cur.ndjson", { verb = false })
    s:insert{ k = 1, pad = "x" }
    H.sh(("ln -sfn %s %s"):format(d2, dl))
    s:insert{ k = 2, pad = "x" }
    -- rotate the old file itself: it is made again where it was
    H.sh(("mv %s/out.ndjson %s/out.ndjson.1"):format(d1, d1))
    s:insert{ k = 3, pad = "x" }
    p:close()
    assert.equal("1,2", ks(read(d1 .. "/out.ndjson.1")))
    assert.equal("3", ks(read(d1 .. "/out.ndjson")))
    assert.equal("", read(d2 .. "/out.ndjson"))
    p, s = H.ndjson_stream(state, dir .. "/cur.ndjson", { verb = false })
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("4", ks(read(d2 .. "/out.ndjson")))
    verify(state)
  end)
end)
