-- The REPL: Lua 5.4 attributes, bytes in grids, names that go with a
-- state, and how it starts on a state or script it cannot open.
local H = require "helper"

local bin = H.runnel_bin

describe("the REPL on a local with an attribute", function()
  -- The REPL drops a leading `local` so the name outlives its line; with
  -- an attribute that left `z <const> = 1`, a syntax error.
  it("keeps a <const> local as a session-wide name", function()
    local out, err, code = H.sh(bin, "local z <const> = 1\nprint(z)\nlocal a, b < const > = 2, 3\nprint(a, b)\n")
    assert.equal(0, code, err)
    assert.equal("1\n2\t3\n", out)
  end)

  it("closes a <close> local at the end of its line, as lua5.4 does", function()
    local out, err, code = H.sh(bin, 'local c <close> = setmetatable({}, { __close = function() print("closed") end })\n'
                                     .. "print(c)\n")
    assert.equal(0, code, err)
    assert.equal("closed\nnil\n", out)
  end)
end)

describe("the REPL's grid on bytes that are not UTF-8", function()
  -- Control characters were escaped, but a byte that starts or ends no
  -- UTF-8 character (\255, a lone \195) went to the terminal as it was.
  it("writes each such byte as \\ddd, valid UTF-8 as it is", function()
    local out, err, code = H.sh(bin, table.concat({
      't = p:table("t", { {"id","int"}, {"b","bytes"}, key = "id" })',
      ".watch off",
      't:insert{ id = 1, b = "\\255x\\195" }',
      't:insert{ id = 2, b = "h\\195\\169\\2271" }',
      "t",
    }, "\n") .. "\n")
    assert.equal(0, code, err)
    assert.equal([[watch off
 row id | id | b
--------+----+-----------
      1 |  1 | \255x\195
      2 |  2 | hé\2271
(2 rows)
]], out)
  end)
end)

describe("the REPL's .open of another state", function()
  after_each(H.cleanup)

  local function state(dir, name)
    H.write(dir .. "/decl.lua", ('%s = p:table("%s", { {"id","int"}, key = "id" })\n'):format(name, name))
    local _, err, code = H.sh(("%s repl %s/%s %s/decl.lua"):format(bin, dir, name, dir), name .. ":insert{ id = 1 }\n")
    assert.equal(0, code, err)
  end

  -- A browsed state's relations are globals; after .open they stayed,
  -- and `alpha` went on printing the rows of the state left behind.
  it("forgets the globals that named the relations of the state it left", function()
    local dir = H.tmpdir()
    state(dir, "alpha")
    state(dir, "beta")
    local out, err, code = H.sh(("%s repl %s/alpha"):format(bin, dir),
                                ("alpha:count()\n.open %s/beta\nalpha\nbeta:count()\n"):format(dir))
    assert.equal(0, code, err)
    assert.equal(("1\n`p` is a read-only view of the state at %s/beta\nnil\n1\n"):format(dir), out)
  end)

  -- A script's globals naming relations of a pipeline .open closed.
  it("forgets the globals that named the relations of the pipeline it closed, and no others", function()
    local dir = H.tmpdir()
    state(dir, "beta")
    local out, err, code = H.sh(bin, table.concat({
      't = p:table("t", { {"id","int"}, key = "id" })',
      'mine = runnel.open()',
      'u = mine:table("u", { {"id","int"}, key = "id" })',
      "n = 5",
      ".open " .. dir .. "/beta",
      "t, u:count(), n",
    }, "\n") .. "\n")
    assert.equal(0, code, err)
    assert.equal(("`p` is a read-only view of the state at %s/beta\nnil\n0\n5\n"):format(dir), out)
  end)
end)

describe("the REPL on names with control characters", function()
  -- Grids escaped them, but a change grid's title and the names .watch
  -- and .schema list wrote them raw: a newline broke the line, an ESC
  -- recoloured the terminal.
  it("escapes them in .watch titles and the lists of known relations, as grids do", function()
    local out, err, code = H.sh(bin, table.concat({
      't = p:table("a\\nb\\27[31m", { {"c\\nd","int"}, key = "c\\nd" })',
      't:insert{ ["c\\nd"] = 1 }',
      ".tables",
      ".watch x",
      ".schema x",
    }, "\n") .. "\n")
    assert.equal(0, code, err)
    assert.equal([[a\nb\27[31m · group 1
 id | verb   | c\nd
----+--------+------
  1 | INSERT |    1
 relation    | kind  | rows
-------------+-------+------
 a\nb\27[31m | table |    1
error: no relation "x" to watch (known: a\nb\27[31m)
no relation "x" (known: a\nb\27[31m)
]], out)
  end)
end)

describe("the REPL browsing a state another process writes", function()
  after_each(H.cleanup)

  -- The catalogue was read once, at .open: a relation declared later by
  -- the process that writes the state was unknown to .tables, .schema and
  -- p:relation, and a table's row count stayed what it was.
  it("reads the catalogue again before each command and chunk", function()
    local dir = H.browsed_state()
    local out, err, code = H.sh(("%s repl %s/st"):format(bin, dir), table.concat({
      ".tables",
      ("assert(os.execute(%q))"):format(("%s run %s/more.lua %s/st"):format(bin, dir, dir)),
      ".tables",
      "p:relation('beta') ~= nil, beta:count(), alpha:count()",
    }, "\n") .. "\n")
    assert.equal(0, code, err)
    assert.equal([[ relation | kind  | rows
----------+-------+------
 alpha    | table |    1
true
"exit"
0
 relation | kind  | rows
----------+-------+------
 alpha    | table |    2
 beta     | table |    1
true
1
2
]], out)
  end)
end)

describe("runnel repl STATE_DIR FILE.lua that cannot be opened", function()
  after_each(H.cleanup)

  -- It said "error: …" and went on with the temporary pipeline as `p`,
  -- exit 0: a script piped in then ran on a state it did not name. A
  -- missing FILE.lua also left a new empty state at STATE_DIR.
  it("says why on stderr and exits 1, before reading any input", function()
    local dir = H.tmpdir()
    H.write(dir .. "/ok.lua", 'p:table("t", { {"id","int"}, key = "id" })\n')
    H.write(dir .. "/bad.lua", "p:table(\n")
    assert(os.execute(("mkdir %s/mine"):format(dir)))
    H.write(dir .. "/mine/notes.txt", "") -- the user's files, no state: refused
    local cases = {
      { ("%s/st %s/nosuch.lua"):format(dir, dir), ("cannot open %s/nosuch.lua"):format(dir) },
      { ("%s/st %s/bad.lua"):format(dir, dir), ("%s/bad.lua:2: unexpected symbol near <eof>"):format(dir) },
      { ("%s/nosuch.lua"):format(dir), ("cannot open %s/nosuch.lua"):format(dir) },
      { ("%s/ok.lua %s/ok.lua"):format(dir, dir), ("%s/ok.lua is a file; a state is a directory"):format(dir) },
      { ("%s/mine %s/ok.lua"):format(dir, dir), ("%s/mine"):format(dir) },
    }
    for _, case in ipairs(cases) do
      local out, err, code = H.sh(("%s repl %s"):format(bin, case[1]), 'print("read")\n')
      assert.equal(1, code, case[1])
      assert.equal("", out, case[1])
      assert.matches("^runnel: [^\n]*" .. case[2]:gsub("%p", "%%%0"), err)
    end
    assert.is_nil(H.read(dir .. "/st/data.mdb")) -- no state made for a script that cannot be read
  end)

  it("still goes on after a script that loads but raises (its error printed)", function()
    local dir = H.tmpdir()
    H.write(dir .. "/boom.lua", 'error("boom")\n')
    local out, err, code = H.sh(("%s repl %s/st %s/boom.lua"):format(bin, dir, dir), 'print("read")\n')
    assert.equal(0, code, err)
    assert.equal(("error: %s/boom.lua:1: boom\nread\n"):format(dir), out)
  end)
end)
