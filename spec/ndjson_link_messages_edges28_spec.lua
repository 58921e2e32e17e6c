-- An NDJSON path sink given a symbolic link writes the file the link named
-- at its declaration, even after the link is pointed elsewhere (0.39).
-- Until 0.40 its messages named only the link: a reader then looked at
-- whatever the link names now, not the file the sink writes. A message
-- now names both ("link (a link to file)"), and a message giving a line
-- names the file itself, as an editor opens it.
local H = require "helper"

describe("an NDJSON path sink through a symbolic link, in its messages", function()
  local dir, tdir, link, target, other
  before_each(function()
    dir, tdir = H.tmpdir(), H.tmpdir()
    link, target, other = dir .. "/current.ndjson", tdir .. "/out.ndjson", tdir .. "/other.ndjson"
    H.write(target, "")
    H.write(other, "")
    H.sh(("ln -s %s %s"):format(target, link))
  end)
  after_each(H.cleanup)

  it("an incomplete line another program left is placed in the file, not the link", function()
    H.write(target, '{"k":0}\n')
    local p, s = H.ndjson_stream(dir .. "/st", link, { verb = false })
    H.sh(("ln -sfn %s %s"):format(other, link)) -- the link now names another file
    local f = assert(io.open(target, "a"))
    f:write('{"k":9') -- another writer's line, cut short, before the sink's first write
    f:close()
    s:insert{ k = 2, pad = "y" } -- committed; its line waits for the file
    local err = H.error_of(function() p:deliver() end)
    assert.matches("s: ndjson: " .. target:gsub("%p", "%%%0") .. ":2: the file ends in an incomplete line", err)
    p:close()
  end)

  it("another state's sink on the same file names the link and its file", function()
    local p = H.ndjson_stream(dir .. "/st", link, { verb = false })
    local err = H.error_of(function() H.ndjson_stream(dir .. "/st2", link, { verb = false }) end)
    assert.matches(("s: ndjson: %s (a link to %s) is the file of another durable sink"):format(link, target)
                     :gsub("[%(%)%.%-]", "%%%0"), err)
    p:close()
  end)

  it("a path that is no link is named as given", function()
    local plain = dir .. "/plain.ndjson"
    H.write(plain, '{"k":9')
    local err = H.error_of(function() H.ndjson_stream(dir .. "/st", plain, { verb = false }) end)
    assert.matches("s: ndjson: " .. plain:gsub("%p", "%%%0") .. ":1: the file ends in an incomplete line", err)
  end)
end)
