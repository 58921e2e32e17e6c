-- p:run's rejects file at its edges: one that is the input itself (a
-- path, or another handle on the same file), and one that cannot be
-- written. Before, a rejects path naming the input emptied the input
-- before it was read (the run "succeeded" with 0 lines), a handle appending
-- to the input read its own rejects back for as long as the disk lasted,
-- and a rejects file that refused its writes (a full disk) lost every
-- rejected line in silence while the run reported them rejected.
local runnel = require "runnel"
local H = require "helper"

local LINES = {
  '{"rel":"t","op":"insert","row":{"id":1}}',
  '{"rel":"t","op":"insert","row":{"id":"bad"}}',
  '{"rel":"t","op":"insert","row":{"id":2}}',
}
local TEXT = table.concat(LINES, "\n") .. "\n"

describe("p:run's rejects", function()
  local dir, path, p, t
  before_each(function()
    dir = H.tmpdir()
    path = dir .. "/in.ndjson"
    H.write(path, TEXT)
    p = runnel.open()
    t = p:table("t", { {"id","int"}, key = "id" })
  end)
  after_each(function()
    p:close()
    H.cleanup()
  end)

  it("naming the input itself is refused, the input left whole", function()
    local ok, err = pcall(function() p:run(runnel.ndjson_source(path), { on_error = "skip", rejects = path }) end)
    assert.is_false(ok)
    assert.matches("run_rejects_edges16_spec.lua:%d+: run: the rejects file " .. path:gsub("%p", "%%%0")
                   .. " is the input itself", err)
    assert.equal(TEXT, H.read(path))
    assert.equal(0, t:count())
    assert.is_false(p:in_group())
  end)

  it("naming the input by another path (a symbolic link) is refused too", function()
    assert(os.execute(("ln -s '%s' '%s/link'"):format(path, dir)))
    local ok, err = pcall(p.run, p, runnel.ndjson_source(path), { on_error = "skip", rejects = dir .. "/link" })
    assert.is_false(ok)
    assert.matches("is the input itself", err, 1, true)
    assert.equal(TEXT, H.read(path))
  end)

  it("an open file on the input (appending to it) is refused: it would read its own rejects forever", function()
    local f = assert(io.open(path, "a"))
    local ok, err = pcall(p.run, p, runnel.ndjson_source(path), { on_error = "skip", rejects = f })
    f:close()
    assert.is_false(ok)
    assert.matches("run: the rejects file is the input itself", err, 1, true)
    assert.equal(TEXT, H.read(path))
    assert.equal(0, t:count())
  end)

  it("another file is written as before", function()
    local stats = p:run(runnel.ndjson_source(path), { on_error = "skip", rejects = dir .. "/rejects.txt" })
    assert.same({ 3, 2, 1, 1 }, { stats.lines, stats.applied, stats.rejected, stats.groups })
    assert.matches("^" .. path:gsub("%p", "%%%0") .. ":2: ", H.read(dir .. "/rejects.txt"))
  end)

  it("that cannot be written (a full disk) stops the run, naming the line; its group rolled back", function()
    local f = io.open("/dev/full", "w")
    if not f then return end -- no /dev/full here
    f:close()
    local ok, err = pcall(p.run, p, runnel.ndjson_source(path), { on_error = "skip", rejects = "/dev/full" })
    assert.is_false(ok)
    assert.matches(path:gsub("%p", "%%%0") .. ":2: writing the rejected line to the rejects file: ", err)
    assert.matches("No space left on device", err, 1, true)
    assert.equal(0, t:count()) -- line 1 was in the same group
    assert.is_false(p:in_group())
    t:insert{ id = 7 }
    assert.equal(1, t:count())
  end)

  it("that cannot be written stops the run after the groups before it, which stay committed", function()
    local f = io.open("/dev/full", "w")
    if not f then return end
    local ok, err = pcall(p.run, p, runnel.ndjson_source(path), { on_error = "skip", rejects = f, batch = 1 })
    f:close()
    assert.is_false(ok)
    assert.matches(":2: writing the rejected line to the rejects file", err, 1, true)
    assert.equal(1, t:count())
    assert.is_not_nil(t:get(1))
  end)

  it("without on_error = \"skip\" is refused, as the CLI refuses it, and an earlier rejects file is kept", function()
    H.write(dir .. "/rejects.txt", "kept\n")
    assert.are.equal('run: rejects goes with on_error = "skip"',
                     H.error_of(p.run, p, runnel.ndjson_source(path), { rejects = dir .. "/rejects.txt" }))
    assert.are.equal('run: max_rejects goes with on_error = "skip"',
                     H.error_of(p.run, p, runnel.ndjson_source(path), { on_error = "stop", max_rejects = 2 }))
    assert.equal("kept\n", H.read(dir .. "/rejects.txt")) -- it was emptied, nothing written
    assert.equal(0, t:count())
  end)

  it("runnel run --rejects naming its --input is refused with exit 1, the input whole", function()
    local script = dir .. "/p.lua"
    H.write(script, [[
local runnel = require "runnel"
local p = runnel.open()
p:table("t", { {"id","int"}, key = "id" })
return p
]])
    local _, err, code = H.sh(("%s run %s --input %s --on-error skip --rejects %s"):format(H.runnel_bin, script, path, path))
    assert.equal(1, code)
    assert.matches("is the input itself", err, 1, true)
    assert.equal(TEXT, H.read(path))
  end)
end)
