-- A data.mdb cut short at any page: refused before it is mapped, or read
-- whole; never a SIGBUS, never a writer committing over the hole.
local H = require "helper"
local runnel = require "runnel"

local size_of = H.size_of

-- A state whose newest transaction touched one table only, over pages the
-- others freed: the tables it did not touch lie in older pages, some past
-- the newest roots.
local function make_state(state)
  local p = runnel.open(state)
  local a = p:table("a", { {"k","int"}, {"v","string"}, key = "k" })
  local b = p:table("b", { {"k","int"}, {"v","string"}, key = "k" })
  local bag = p:table("bag", { {"x","int"}, {"blob","string"} })
  p:begin()
  for i = 1, 600 do a:insert{ k = i, v = ("a"):rep(100) } end
  p:commit()
  p:begin()
  for i = 1, 300 do b:insert{ k = i, v = ("b"):rep(100) } end
  for i = 1, 6 do bag:insert{ x = i, blob = ("z"):rep(9000) } end -- overflow pages
  p:commit()
  p:begin()
  for i = 1, 590 do a:delete{ k = i } end
  p:commit()
  for g = 1, 5 do
    p:begin()
    a:insert{ k = 1000 + g, v = "new" }
    p:commit()
  end
  local counts = { a = a:count(), b = b:count(), bag = bag:count() }
  p:close()
  return counts
end

local reader = [[
local runnel = require "runnel"
local how, state = arg[1], arg[2]
local ok, err = pcall(function()
  if how == "open" then
    local p = runnel.open(state)
    local t = {}
    t.a = p:table("a", { {"k","int"}, {"v","string"}, key = "k" })
    t.b = p:table("b", { {"k","int"}, {"v","string"}, key = "k" })
    t.bag = p:table("bag", { {"x","int"}, {"blob","string"} })
    local out = {}
    for _, name in ipairs{ "a", "b", "bag" } do
      local n = 0
      for row in t[name]:rows() do n = n + #(row.v or row.blob) end
      out[#out + 1] = name .. "=" .. t[name]:count() .. "/" .. n
    end
    io.write(table.concat(out, " "))
    p:close()
  end
end)
if not ok then io.write("ERR " .. tostring(err)) end
]]

describe("a data.mdb cut short", function()
  after_each(H.cleanup)

  it("at any page is refused as damaged or read whole, by open and by verify, never with SIGBUS", function()
    local dir = H.tmpdir()
    local state = dir .. "/st"
    local counts = make_state(state)
    H.write(dir .. "/read.lua", reader)
    local out, err, code = H.sh(("lua5.4 %s/read.lua open %s"):format(dir, state))
    assert.equal(0, code, err)
    local whole = out
    assert.equal(("a=%d b=%d bag=%d"):format(counts.a, counts.b, counts.bag), (whole:gsub("/%d+", "")))
    local full = size_of(state .. "/data.mdb")
    local psize = 4096
    local refused, read = 0, 0
    for pages = 2, full // psize - 1 do
      local cut = dir .. "/cut"
      assert(os.execute(("rm -rf %s && cp -r %s %s && truncate -s %d %s/data.mdb"):format(cut, state, cut,
        pages * psize, cut)))
      out, err, code = H.sh(("lua5.4 %s/read.lua open %s"):format(dir, cut))
      assert.equal(0, code, ("cut at %d pages: exit %s: %s%s"):format(pages, tostring(code), out, err))
      if out:match("^ERR ") then
        assert.matches("state damaged: " .. cut:gsub("%p", "%%%0") .. "/data.mdb is truncated %(%d+ bytes; its last "
          .. "transaction needs %d+%)", out)
        refused = refused + 1
      else
        assert.equal(whole, out, "cut at " .. pages .. " pages")
        read = read + 1
      end
      local vout, verr, vcode = H.sh(("%s verify %s"):format(H.runnel_bin, cut))
      assert.is_true(vcode == 0 or vcode == 1, ("verify, cut at %d pages: exit %s: %s%s"):format(pages,
        tostring(vcode), vout, verr))
      if out:match("^ERR ") then assert.equal(1, vcode, vout .. verr) end
    end
    assert.is_true(refused > 0, "no cut was refused")
  end)

  it("to nothing is refused as damaged, not taken for a new state", function()
    local dir = H.tmpdir()
    local state = dir .. "/st"
    make_state(state)
    assert(os.execute(("truncate -s 0 %s/data.mdb"):format(state)))
    local err = H.error_of(runnel.open, state)
    assert.equal(("state damaged: %s/data.mdb is empty (0 bytes); if this state never committed a group, remove "
      .. "the file to start it anew"):format(state), err)
    local _, serr, code = H.sh(("%s inspect %s"):format(H.runnel_bin, state))
    assert.equal(1, code)
    assert.matches("state damaged: .*is empty %(0 bytes%)", serr)
    assert.equal(0, size_of(state .. "/data.mdb"))
  end)

  it("is not left behind by a new state whose first open failed", function()
    local dir = H.tmpdir()
    local state = dir .. "/st"
    -- a map the address space cannot hold: refused after LMDB made data.mdb
    local ok = pcall(runnel.open, { path = state, map_size = 1 << 62 })
    assert.is_false(ok)
    local p = runnel.open(state)
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:insert{ k = 1 }
    assert.equal(1, t:count())
    p:close()
  end)
end)
