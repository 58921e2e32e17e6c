-- runnel query reads in a child (lua/cli.c in_child); when the child
-- crashes on a damaged page, the parent names the state. It took the
-- state to be argv[2], but options may come first (query_args in
-- lua/runnel/state.lua takes them anywhere): `runnel query --format csv
-- ST REL 5` said "reading --format crashed ... (runnel verify --format
-- says where)", naming no state and sending the user to verify an option.
local H = require "helper"
local runnel = require "runnel"

local R = H.runnel_bin

local function make_state(dir)
  local p = runnel.open(dir)
  local t = p:table("players", { {"id","int"}, {"name","string"}, key = "id" })
  p:begin()
  for i = 1, 200 do t:insert{ id = i, name = "n" .. i } end
  p:commit()
  p:close()
end

-- A copy of the state at src in dst with 8 bytes at offset at inverted.
local function damaged_copy(src, dst, at)
  os.execute(("rm -rf '%s' && mkdir -p '%s'"):format(dst, dst))
  local data = H.read(src .. "/data.mdb")
  local flipped = data:sub(at + 1, at + 8):gsub(".", function(c) return string.char(~c:byte() & 0xFF) end)
  H.write(dst .. "/data.mdb", data:sub(1, at) .. flipped .. data:sub(at + 9))
end

describe("runnel query whose child crashed", function()
  after_each(H.cleanup)

  it("names the state even when options come before it", function()
    local dir = H.tmpdir()
    make_state(dir .. "/st")
    local bad = dir .. "/bad"
    local pages = H.size_of(dir .. "/st/data.mdb") // 4096
    local found = false
    for page = 2, pages - 1 do
      damaged_copy(dir .. "/st", bad, page * 4096 + 16)
      local _, err = H.sh(("%s query %s players 5"):format(R, bad))
      if err:find("crashed", 1, true) then found = true break end
    end
    assert.is_true(found) -- the damage does crash the read: the forms below are tested on a crash
    for _, args in ipairs{ "--format csv %s players 5", "--limit 3 %s players", "-- %s players 5",
                           "--limit 1 --format ndjson -- %s players 5", "%s --format csv players 5" } do
      local cmd = ("%s query " .. args):format(R, bad)
      local out, err, code = H.sh(cmd)
      assert.are.same({ "", 1 }, { out, code }, cmd)
      assert.are.equal(1, err:find("runnel: query: reading " .. bad .. " crashed (", 1, true), err)
      assert.is_truthy(err:find("): the state is damaged (runnel verify " .. bad .. " says where)\n", 1, true), err)
    end
  end)
end)
