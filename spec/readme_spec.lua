-- The README's Lua blocks run as written: the tour on its own, and each
-- later block after the tour (its final p:close() held back). A block
-- preceded by an "not run by spec/readme_spec.lua" comment is a sketch.
local H = require "helper"

local function blocks()
  local f = assert(io.open(H.root .. "/README.md"))
  local text = f:read("a")
  f:close()
  local out = {}
  for before, code in text:gmatch("([^\n]*)\n```lua\n(.-)```") do
    if not before:find("not run by spec/readme_spec.lua", 1, true) then out[#out + 1] = code end
  end
  return out
end

local function run(dir, code)
  local path = dir .. "/tour.lua"
  local f = assert(io.open(path, "w"))
  f:write(code)
  f:close()
  local bin = H.runnel_bin:sub(1, 1) == "/" and H.runnel_bin or H.root .. "/" .. H.runnel_bin
  return H.sh(("cd %s && %s run tour.lua"):format(dir, bin))
end

describe("the README", function()
  after_each(H.cleanup)

  it("has a tour that runs as written and prints what it says, twice in a row on its state", function()
    local tour = blocks()[1]
    local dir = H.tmpdir()
    local out, err, code = run(dir, tour)
    assert.equal("", err)
    assert.equal(0, code)
    assert.equal("INSERT\t1\tann\n120\t2\t2\t1\n1\tann\n2\tbob\n", out)
    out, err, code = run(dir, tour) -- the state kept ann's score: the upsert resets it, the update restores it
    assert.equal("", err)
    assert.equal(0, code)
    assert.equal("DELETE\t1\tann\nINSERT\t1\tann\n120\t2\t2\t2\n1\tann\n2\tbob\n", out)
  end)

  it("has later blocks that run after the tour", function()
    local all = blocks()
    assert.is_true(#all >= 3, "the README lost its blocks")
    local tour = all[1]:gsub("p:close%(%)%s*$", "")
    for i = 2, #all do
      local _, err, code = run(H.tmpdir(), tour .. "\n" .. all[i] .. "\np:close()\n")
      assert.equal("", err, "README block " .. i)
      assert.equal(0, code, "README block " .. i)
    end
  end)
end)
