-- An NDJSON path sink whose path is a symbolic link, the file it names
-- renamed while the state was closed after a crash (ndjson.c, "A file
-- renamed while the state was closed"). The sink's key in the state is the
-- resolved path (realpath), and the file it writes is the link's target;
-- but until 0.38 the renamed file was looked for in the link's directory,
-- by the link's name: logrotate's out.ndjson.1 beside the target was not
-- found, so the waiting group was written again, or a group the crash tore
-- was left torn in the rotated log. The link is now resolved once: the
-- renamed file is looked for beside the file the path resolves to, by its
-- identity and by its name.
local H = require "helper"

local ks = H.ndjson_ks
local read = H.text_of

describe("an NDJSON path sink through a symbolic link, its target renamed while closed", function()
  local dir, tdir, link, target, state
  before_each(function()
    dir, tdir = H.tmpdir(), H.tmpdir()
    link, target, state = dir .. "/current.ndjson", tdir .. "/out.ndjson", dir .. "/st"
    H.write(target, "")
    H.sh(("ln -s %s %s"):format(target, link))
  end)
  after_each(H.cleanup)

  local function open()
    return H.ndjson_stream(state, link, { verb = false })
  end

  -- A child inserts keys first..last through the link (a group each) and
  -- crashes: the last group's mark is not recorded.
  local function crash(first, last) H.ndjson_crash(dir, state, link, first, last) end

  local function verify()
    local out, _, code = H.sh(("%s verify %s"):format(H.runnel_bin, state))
    assert.equal(0, code, out)
  end

  it("logrotate renames the target beside it: its waiting group is found there, not written again", function()
    crash(1, 3)
    local text = read(target)
    assert.equal("1,2,3", ks(text))
    assert(os.rename(target, target .. ".1")) -- the link now dangles; the sink makes the target again
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal(text, read(target .. ".1"))
    assert.equal("4", ks(read(target))) -- before: "3,4", group 3 written twice
    assert.equal(read(target), read(link))
    verify()
  end)

  it("a group the crash tore is cut in the renamed target and written whole", function()
    crash(1, 3)
    local text = read(target)
    H.write(target, text:sub(1, #text - 5)) -- group 3's line cut short by the crash
    assert(os.rename(target, target .. ".1"))
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal("1,2", ks(read(target .. ".1"))) -- before: the torn line left in the rotated log
    assert.equal("3,4", ks(read(target)))
    verify()
  end)

  it("a rotated copy (another inode) is found by the target's name, not the link's", function()
    crash(1, 3)
    local text = read(target)
    H.sh(("cp %s %s.1 && rm %s"):format(target, target, target)) -- logrotate's copy, then the file removed
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal(text, read(target .. ".1"))
    assert.equal("4", ks(read(target))) -- before: "3,4" (current.ndjson.N looked for, beside the link)
    verify()
  end)

  it("a link beside its target under another name: the rotation of the target's name is found", function()
    H.sh(("rm %s && ln -s out.ndjson %s"):format(link, dir .. "/current.ndjson"))
    target = dir .. "/out.ndjson"
    H.write(target, "")
    crash(1, 3)
    local text = read(target)
    H.sh(("cp %s %s.1 && rm %s"):format(target, target, target))
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal(text, read(target .. ".1"))
    assert.equal("4", ks(read(target)))
    verify()
  end)

  it("the link's own directory is not searched: a rotation named like the link there is not taken", function()
    crash(1, 3)
    local text = read(target)
    H.write(link .. ".1", text) -- a copy beside the link, named like the link's rotation
    H.sh(("cp %s %s.gz && rm %s"):format(target, target, target)) -- the target "compressed" away: not found
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal(text, read(link .. ".1")) -- untouched
    assert.equal("3,4", ks(read(target))) -- written again, as for any file not found (before: "4", found in the copy)
  end)

  it("a link pointed at another file is another sink: the old file's waiting group waits, runnel verify says so", function()
    crash(1, 3)
    local text = read(target)
    local other = tdir .. "/out2.ndjson"
    H.sh(("ln -sfn %s %s"):format(other, link))
    local p, s = open()
    s:insert{ k = 4, pad = "x" }
    p:close()
    assert.equal(text, read(target))
    assert.equal("4", ks(read(other)))
    local out, _, code = H.sh(("%s verify %s"):format(H.runnel_bin, state))
    assert.equal(0, code, out)
    assert.matches("wait for s: durable sink to " .. target:gsub("%p", "%%%0") .. ", not declared", out)
  end)
end)
