-- One NDJSON file written by two states one after the other (core/ndjson.c,
-- "Ownership"): a state never removes or rewrites lines it did not write;
-- the lines of its own groups a crash left unrecorded are found, not
-- written twice; a file it cannot reconcile is named, never guessed at.
local runnel = require "runnel"
local H = require "helper"

local read = H.text_of
local function line(verb, k, v) return ('{"verb":"%s","k":%d,"v":"%s"}\n'):format(verb, k, v) end

describe("an NDJSON file shared by two states in turn", function()
  local dir, log
  before_each(function() dir = H.tmpdir(); log = dir .. "/out.ndjson" end)
  after_each(H.cleanup)

  local function open(name, sync)
    local p = runnel.open{ path = dir .. "/" .. name, sync = sync }
    local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
    t:sink(runnel.ndjson(log))
    return p, t
  end

  -- A child process on state `name` runs body after declaring the sink (an
  -- exit without close is a crash: its last group's mark is not recorded).
  local function child(name, body, sync)
    local script = dir .. "/child.lua"
    H.write(script, ([[
local runnel = require "runnel"
local p = runnel.open{ path = %q, sync = ]] .. tostring(sync ~= false) .. [[ }
local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })
t:sink(runnel.ndjson(%q))
]]):format(dir .. "/" .. name, log) .. body)
    local _, err, code = H.sh(("%s run %s"):format(H.runnel_bin, script))
    assert.equal("", err)
    assert.equal(0, code)
  end

  for _, sync in ipairs{ true, false } do
    it(("keeps every state's lines when A, B, then A again write it (sync = %s)"):format(sync), function()
      local a, ta = open("a", sync)
      ta:insert{ k = 1, v = "a1" }
      ta:insert{ k = 2, v = "a2" }
      a:close()
      local b, tb = open("b", sync)
      tb:insert{ k = 10, v = "b1" }
      b:close()
      a, ta = open("a", sync) -- before: cut back to its own last line, b1 gone
      ta:insert{ k = 3, v = "a3" }
      a:close()
      assert.equal(line("INSERT", 1, "a1") .. line("INSERT", 2, "a2") .. line("INSERT", 10, "b1")
                   .. line("INSERT", 3, "a3"), read(log))
    end)
  end

  it("keeps the lines of a state that crashed after writing, and that state writes them once", function()
    local a, ta = open("a")
    ta:insert{ k = 1, v = "a1" }
    a:close()
    -- B's group 2 is in the file, its mark would ride with group 3: there is none
    child("b", 't:insert{ k = 10, v = "b1" }; t:insert{ k = 11, v = "b2" }; os.exit(0, false)')
    assert.equal(line("INSERT", 1, "a1") .. line("INSERT", 10, "b1") .. line("INSERT", 11, "b2"), read(log))
    a, ta = open("a")
    ta:insert{ k = 2, v = "a2" }
    a:close()
    local b = open("b") -- b2 is found in the file: not written again
    b:close()
    assert.equal(line("INSERT", 1, "a1") .. line("INSERT", 10, "b1") .. line("INSERT", 11, "b2")
                 .. line("INSERT", 2, "a2"), read(log))
  end)

  -- A writes a1, B then b1, and A appends a2 after b1 and exits without
  -- close: a2's mark would ride with a later group, and there is none.
  local function a_b_then_a_crashed()
    local a, ta = open("a")
    ta:insert{ k = 1, v = "a1" }
    a:close()
    local b, tb = open("b")
    tb:insert{ k = 10, v = "b1" }
    b:close()
    child("a", 't:insert{ k = 2, v = "a2" }; os.exit(0, false)')
  end

  it("finds its own groups after another state's lines when a crash took their mark", function()
    a_b_then_a_crashed()
    local want = line("INSERT", 1, "a1") .. line("INSERT", 10, "b1") .. line("INSERT", 2, "a2")
    assert.equal(want, read(log))
    local a, ta = open("a") -- before: a2 was not at A's position (b1 is), and was appended again
    assert.equal(want, read(log))
    ta:insert{ k = 4, v = "a4" }
    a:close()
    assert.equal(want .. line("INSERT", 4, "a4"), read(log))
  end)

  it("after another state's lines, appends the groups a crash took before they were written", function()
    a_b_then_a_crashed()
    local text = read(log)
    H.write(log, text:sub(1, #text - #line("INSERT", 2, "a2"))) -- a2 never went out
    local a = open("a")
    a:close()
    assert.equal(line("INSERT", 1, "a1") .. line("INSERT", 10, "b1") .. line("INSERT", 2, "a2"), read(log))
  end)

  it("keeps the lines of a state with sync = false that crashed with groups carried", function()
    local a, ta = open("a")
    ta:insert{ k = 1, v = "a1" }
    a:close()
    -- b1 and b2 committed and written (b2's mark would ride with a later group); b3 carried: lost
    child("b", 't:insert{ k = 10, v = "b1" }; t:insert{ k = 11, v = "b2" }; p:flush(); t:insert{ k = 12, v = "b3" }; '
               .. 'os.exit(0, false)', false)
    assert.equal(line("INSERT", 1, "a1") .. line("INSERT", 10, "b1") .. line("INSERT", 11, "b2"), read(log))
    a, ta = open("a", false)
    ta:insert{ k = 2, v = "a2" }
    a:close()
    local b, tb = open("b", false)
    tb:insert{ k = 13, v = "b4" }
    b:close()
    assert.equal(line("INSERT", 1, "a1") .. line("INSERT", 10, "b1") .. line("INSERT", 11, "b2")
                 .. line("INSERT", 2, "a2") .. line("INSERT", 13, "b4"), read(log))
  end)

  it("has a state whose crash cut its group short mend it before another state writes", function()
    child("b", 't:insert{ k = 10, v = "b1" }; t:insert{ k = 11, v = "b2" }; os.exit(0, false)')
    local text = read(log)
    text = text:sub(1, #text - 5)
    H.write(log, text) -- the crash tore b2's line
    -- *CHANGED* (0.26): A cannot tell B's torn line from another program's: it
    -- neither cuts it (it did) nor appends to it, and says so
    local a = runnel.open(dir .. "/a")
    local ta = a:table("t", { {"k","int"}, {"v","string"}, key = "k" })
    assert.matches(("t: ndjson: %s:2: the file ends in an incomplete line (bytes %d to %d, no newline)"):format(
      log, #line("INSERT", 10, "b1"), #text), H.error_of(ta.sink, ta, runnel.ndjson(log)), 1, true)
    a:close()
    assert.equal(text, read(log))
    local b = open("b") -- b2's first bytes run to the end: its own, cut and written whole
    b:close()
    assert.equal(line("INSERT", 10, "b1") .. line("INSERT", 11, "b2"), read(log))
    local ta2
    a, ta2 = open("a")
    ta2:insert{ k = 1, v = "a1" }
    a:close()
    assert.equal(line("INSERT", 10, "b1") .. line("INSERT", 11, "b2") .. line("INSERT", 1, "a1"), read(log))
  end)

  it("names the file, the relation and the group it cannot reconcile, and writes nothing", function()
    -- B's group 2 has two lines; the crash kept the first, then A appended
    child("b", 't:insert{ k = 10, v = "b1" }; p:begin(); t:insert{ k = 11, v = "b2" }; t:insert{ k = 12, v = "b3" }; '
               .. 'p:commit(); os.exit(0, false)')
    local text = read(log)
    H.write(log, text:sub(1, #text - #line("INSERT", 12, "b3")))
    local a, ta = open("a")
    ta:insert{ k = 1, v = "a1" }
    a:close()
    local want = line("INSERT", 10, "b1") .. line("INSERT", 11, "b2") .. line("INSERT", 1, "a1")
    assert.equal(want, read(log))
    local b = runnel.open(dir .. "/b")
    local t = b:table("t", { {"k","int"}, {"v","string"}, key = "k" })
    local err = H.error_of(t.sink, t, runnel.ndjson(log))
    local from = #line("INSERT", 10, "b1")
    assert.matches(("t: ndjson: %s: bytes %d to %d hold the first lines of group 2 of t, which a crash cut short"):format(
      log, from, from + #line("INSERT", 11, "b2")), err, 1, true)
    b:close()
    assert.equal(want, read(log))
  end)
end)
