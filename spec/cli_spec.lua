-- The runnel command: run, the REPL (golden transcripts), errors.
local H = require "helper"

local bin = H.runnel_bin

local function script(text)
  local path = os.tmpname() .. ".lua"
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

describe("runnel run", function()
  it("runs a script with arg and ... as lua5.4 gives them", function()
    local path = script('print(arg[0] == ..., arg[1], arg[2], select("#", ...))\n' ..
                        'local runnel = require "runnel"\nprint(runnel._VERSION)\n')
    local out, err, code = H.sh(("%s run %s one two"):format(bin, path))
    os.remove(path)
    assert.equal("", err)
    assert.equal(0, code)
    assert.equal("false\tone\ttwo\t2\nrunnel 0.42\n", out)
  end)

  it("reports an error with the file and line and exits 1", function()
    local path = script('local runnel = require "runnel"\nlocal p = runnel.open()\n' ..
                        'local t = p:table("t", { {"id","int"}, key = "id" })\nt:insert{ id = "x" }\n')
    local out, err, code = H.sh(("%s run %s"):format(bin, path))
    os.remove(path)
    assert.equal("", out)
    assert.equal(1, code)
    assert.equal(("runnel: %s:4: t: column \"id\": expected int, got string\n"):format(path), err)
  end)

  it("says an empty script path is empty", function()
    -- before: "runnel: cannot open : No such file or directory" (Lua's loadfile)
    local out, err, code = H.sh(bin .. " run ''")
    assert.equal("", out)
    assert.equal(2, code)
    assert.equal("runnel: run: the script's path is empty: runnel run FILE.lua [ARGS…] (runnel help)\n", err)
  end)

  it("says which command is unknown and exits 2", function()
    local out, err, code = H.sh(bin .. " frobnicate")
    assert.equal(2, code)
    assert.equal("", out)
    assert.equal('runnel: unknown command "frobnicate" (runnel help lists the commands)\n', err)
    out, err, code = H.sh(bin .. " --frob x.lua")
    assert.equal(2, code)
    assert.equal("runnel: unknown option --frob (runnel help lists them)\n", err)
  end)
end)

describe("the runnel command's conventions", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  it("prints help and the version on stdout and exits 0", function()
    for _, cmd in ipairs{ "help", "--help", "-h" } do
      local out, err, code = H.sh(bin .. " " .. cmd)
      assert.equal(0, code, cmd)
      assert.equal("", err, cmd)
      assert.matches("Usage:\n  runnel [repl] [STATE_DIR] [FILE.lua]", out, 1, true)
      assert.matches("--max-rejects N", out, 1, true)
    end
    for _, cmd in ipairs{ "version", "--version" } do
      local out, err, code = H.sh(bin .. " " .. cmd)
      assert.equal(0, code, cmd)
      assert.equal("", err, cmd)
      assert.matches("^runnel %d+%.%d+ %(Lua 5%.4", out)
    end
  end)

  -- a pipeline script that returns p, and NDJSON input for it
  local function game(lines)
    H.write(dir .. "/game.lua", 'local runnel = require "runnel"\nlocal p = runnel.open()\n' ..
      'local players = p:table("players", { {"id","int"}, {"name","string"}, key = "id" })\n' ..
      'print("args", ...)\nreturn p\n')
    H.write(dir .. "/in.ndjson", table.concat(lines, "\n") .. "\n")
    return dir .. "/game.lua", dir .. "/in.ndjson"
  end
  local good = '{"rel":"players","op":"insert","row":{"id":1,"name":"ann"}}'

  it("runs `runnel game.lua` like `runnel run game.lua`, options before or after the script", function()
    local script, input = game{ good }
    local want = "runnel: " .. input .. ": 1 lines, 1 applied, 0 rejected, 1 group\n"
    for _, args in ipairs{ ("run %s --input %s a b"):format(script, input), ("%s --input %s a b"):format(script, input),
                           ("run --input %s %s a b"):format(input, script), ("--input %s %s a b"):format(input, script),
                           ("%s a --input %s b"):format(script, input) } do
      local out, err, code = H.sh(bin .. " " .. args)
      assert.equal(0, code, args)
      assert.equal("args\ta\tb\n", out, args)
      assert.equal(want, err, args)
    end
    local out = H.sh(("%s %s -- --input x"):format(bin, script))
    assert.equal("args\t--input\tx\n", out)
  end)

  it("refuses an option without its value or with a bad one, exit 2", function()
    local script = game{ good }
    for args, msg in pairs{
      ["--input"] = "runnel: --input needs a path (or - for stdin)\n",
      ["--batch"] = "runnel: --batch needs a number of lines\n",
      ["--batch x"] = 'runnel: --batch needs a number of lines, got "x"\n',
      ["--on-error maybe"] = 'runnel: --on-error takes stop or skip, got "maybe"\n',
      ["--rejects --input x"] = "runnel: --rejects needs a path\n",
      ["--max-rejects 0"] = 'runnel: --max-rejects needs a number of lines, got "0"\n',
    } do
      local out, err, code = H.sh(("%s run %s %s"):format(bin, script, args))
      assert.equal(2, code, args)
      assert.equal("", out, args)
      assert.equal(msg, err, args)
    end
  end)

  it("with --on-error skip writes the reasons to stderr, and --max-rejects stops the run", function()
    local script, input = game{ good, '{"rel":"nosuch","op":"insert","row":{}}',
                                '{"rel":"players","op":"insert","row":{"id":2,"nam":"bob"}}' }
    local _, err, code = H.sh(("%s %s --input %s --on-error skip"):format(bin, script, input))
    assert.equal(0, code)
    assert.equal(input .. ':2: unknown relation "nosuch" (known: players)\t{"rel":"nosuch","op":"insert","row":{}}\n' ..
                 input .. ':3: players: unknown column "nam" (did you mean "name"?)\t' ..
                 '{"rel":"players","op":"insert","row":{"id":2,"nam":"bob"}}\n' ..
                 "runnel: " .. input .. ": 3 lines, 1 applied, 2 rejected, 1 group\n", err)
    local _, err2, code2 = H.sh(("%s %s --input %s --on-error skip --max-rejects 1 --rejects %s/rej"):format(
      bin, script, input, dir))
    assert.equal(1, code2)
    assert.equal("runnel: " .. input .. ":3: more than 1 rejected lines: stopping (max_rejects)\n", err2)
  end)
end)

describe("the REPL", function()
  it("prints expressions, grids, each group's changes, and continues multi-line input", function()
    local input = table.concat({
      'local t = p:table("t", { {"id","int"}, {"name","string"}, key = "id" })',
      't:insert{ id = 1, name = "ann" }',
      'p:batch(function()',
      '  t:insert{ id = 2, name = "bob" }',
      '  t:update{ id = 1, name = "anna" }',
      'end)',
      't',
      '1 + 1, "two"',
      't:get(2)',
      '.tables',
      't:insert{ id = "x", name = "z" }',
      'p:seq()',
    }, "\n") .. "\n"
    local out, err, code = H.sh(bin, input)
    assert.equal("", err)
    assert.equal(0, code)
    assert.equal(table.concat({
      "t · group 1",
      " row id | verb   | id | name",
      "--------+--------+----+------",
      "      1 | INSERT |  1 | ann",
      "t · group 2",
      " row id | verb   | id | name",
      "--------+--------+----+------------",
      "      2 | INSERT |  2 | bob",
      "      1 | UPDATE |  1 | ann → anna",
      "2",
      " row id | id | name",
      "--------+----+------",
      "      1 |  1 | anna",
      "      2 |  2 | bob",
      "(2 rows)",
      "2",
      '"two"',
      '{id = 2, name = "bob"}',
      " relation | kind  | rows",
      "----------+-------+------",
      " t        | table |    2",
      'error: stdin:1: t: column "id": expected int, got string',
      "2",
      "",
    }, "\n"), out)
  end)

  it("shows a relation's schema and reports syntax errors without a traceback", function()
    local out = H.sh(bin, 'p:table("s", { {"k","string"}, {"n","int", default = 0}, key = "k" })\n.schema s\nx = = 1\n.nope\n')
    assert.matches('column | type   | null | key | default', out, 1, true)
    assert.matches(' n      | int    |      |     | 0', out, 1, true)
    assert.matches("error: stdin:1: unexpected symbol near '='", out, 1, true)
    assert.matches("unknown command .nope", out, 1, true)
    out = H.sh(bin, 's = p:table("s", { {"k","string"} })\n.schema nosuch\n')
    assert.equal('no relation "nosuch" (known: s)\n', out)
  end)
end)

describe("the REPL on a real state", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(H.cleanup)

  local DECL = 'players = p:table("players", { {"id","int"}, {"name","string"}, key = "id" })\n' ..
               'leaders = players:filter(function(r) return r.id < 10 end, "leaders")\n'

  it("runnel repl STATE_DIR FILE.lua: the script declares on the state, which keeps the rows", function()
    H.write(dir .. "/decl.lua", DECL)
    local out, err, code = H.sh(("%s repl %s/st %s/decl.lua"):format(bin, dir, dir),
                                'players:insert{ id = 1, name = "ann" }\n.tables\nselect(2, p:path())\n')
    assert.equal("", err)
    assert.equal(0, code)
    assert.matches("players · group 1", out, 1, true)
    assert.matches("leaders · group 1", out, 1, true)    -- grids follow p's relations
    assert.matches(" players  | table  |    1", out, 1, true)
    assert.matches("\nfalse\n", out, 1, true)             -- not a temporary state
    out = H.sh(("%s inspect %s/st"):format(bin, dir))
    assert.matches("players%s+|%s+table%s+|%s+1", out)
  end)

  it("runnel repl STATE_DIR alone browses an existing state read-only from its catalogue", function()
    H.write(dir .. "/decl.lua", DECL)
    H.sh(("%s repl %s/st %s/decl.lua"):format(bin, dir, dir), 'players:insert{ id = 1, name = "ann" }\n')
    local out, err, code = H.sh(("%s repl %s/st"):format(bin, dir), "p\n.tables\n.schema players\nplayers:count()\n")
    assert.equal("", err)
    assert.equal(0, code)
    assert.matches(("runnel.State (%s/st, read-only)"):format(dir), out, 1, true)
    assert.matches("players%s+|%s+table%s+|%s+1", out)
    assert.matches(" id     | int    |      | key |", out, 1, true)
    assert.matches("\n1\n", out, 1, true)
  end)

  it("runnel repl STATE_DIR browses a join and a top too, and says why a filter cannot be read", function()
    H.write(dir .. "/decl.lua", DECL .. 'teams = p:table("teams", { {"id","int"}, {"team","string"}, key = "id" })\n'
      .. 'roster = players:join(teams, { on = "id", kind = "left", name = "roster" })\n'
      .. 'first = players:top{ n = 1, order = { "name" }, name = "first" }\n')
    H.sh(("%s repl %s/st %s/decl.lua"):format(bin, dir, dir),
         'players:insert{ id = 1, name = "ann" }\nplayers:insert{ id = 2, name = "al" }\nteams:insert{ id = 2, team = "red" }\n')
    local out, err = H.sh(("%s repl %s/st"):format(bin, dir), "roster:get(2).team\nroster:count()\nfirst:get(2).rank\n"
      .. "leaders:count()\n")
    assert.matches('"red"\n2\n1\n', out, 1, true)
    assert.matches('"leaders" is a filter: a Lua function in the script that declares it chooses its rows', out .. err,
                   1, true)
  end)

  it(".open DIR FILE makes that state p, .load runs a script on p, .tables and grids follow", function()
    H.write(dir .. "/decl.lua", DECL)
    H.write(dir .. "/more.lua", 'teams = p:table("teams", { {"id","int"}, key = "id" })\nteams:insert{ id = 7 }\n')
    local out, err = H.sh(bin, ('t = p:table("t", { {"k","int"}, key = "k" })\n.open %s/st %s/decl.lua\n' ..
      'players:insert{ id = 1, name = "ann" }\n.load %s/more.lua\n.tables\n'):format(dir, dir, dir))
    assert.equal("", err)
    assert.matches(("`p` is the state at %s/st\n"):format(dir), out, 1, true)
    assert.matches("players · group 1", out, 1, true)
    assert.matches("teams · group 2", out, 1, true)
    assert.matches(" relation | kind   | rows\n----------+--------+------\n players  | table  |    1\n" ..
                   " leaders  | filter |\n teams    | table  |    1\n", out, 1, true)
    assert.is_nil(out:find(" t  ", 1, true)) -- the temporary pipeline is gone
  end)

  it("a failed .open leaves p as it was; .open of the state p is reopens it", function()
    H.write(dir .. "/decl.lua", DECL)
    local out, err = H.sh(bin, ('t = p:table("t", { {"k","int"}, key = "k" })\nt:insert{ k = 1 }\n' ..
      '.open %s/no/such/st\nt:insert{ k = 2 }\n.tables\n.open %s/st %s/decl.lua\n' ..
      'players:insert{ id = 1, name = "ann" }\n.open %s/st %s/decl.lua\n.tables\n'):format(dir, dir, dir, dir, dir))
    assert.equal("", err)
    assert.matches(("error: cannot create state directory %s/no/such/st"):format(dir), out, 1, true)
    assert.matches("t · group 2", out, 1, true) -- the temporary pipeline took the next change
    assert.matches(" relation | kind  | rows\n----------+-------+------\n t        | table |    2\n", out, 1, true)
    local _, reopened = out:gsub(("`p` is the state at %s/st\n"):format(dir:gsub("%p", "%%%0")), "")
    assert.equal(2, reopened) -- the REPL's own writer closed first, then the state opened again
    assert.matches(" players  | table  |    1\n", out, 1, true)
  end)

  it("a script that returns its own pipeline makes it p", function()
    H.write(dir .. "/own.lua", ('local runnel = require "runnel"\nlocal p = runnel.open(%q)\n' ..
      'local t = p:table("t", { {"k","int"}, key = "k" })\nt:insert{ k = 1 }\nreturn p\n'):format(dir .. "/own"))
    local out, err = H.sh(("%s repl %s/own.lua"):format(bin, dir), ".tables\np:relation('t'):insert{ k = 2 }\n")
    assert.equal("", err)
    assert.matches(" t        | table |    1", out, 1, true)
    assert.matches("t · group 2", out, 1, true)
  end)
end)

describe("the REPL's output", function()
  after_each(H.cleanup)

  local function repl(lines)
    local out, err, code = H.sh(bin, table.concat(lines, "\n") .. "\n")
    assert.equal("", err)
    assert.equal(0, code)
    return out
  end

  it("cuts change grids at .limit rows (20 by default) and says how many there were", function()
    local out = repl{
      't = p:table("t", { {"id","int"}, {"name","string"}, key = "id" })',
      'p:batch(function() for i = 1, 500 do t:insert{ id = i, name = "n" } end end)',
      ".limit 2",
      'p:batch(function() for i = 1, 5 do t:update{ id = i, name = "m" } end end)',
      "t",
    }
    assert.matches(" 20 | INSERT | 20 | n\n(500 changes, 20 shown)\n1\n", out, 1, true)
    assert.is_nil(out:find("| 21 | n", 1, true))
    assert.matches("limit 2\nt · group 2\n row id | verb   | id | name\n--------+--------+----+-------\n" ..
                   "      1 | UPDATE |  1 | n → m\n      2 | UPDATE |  2 | n → m\n(5 changes, 2 shown)\n2\n", out, 1, true)
    assert.matches("      2 |  2 | m\n(500 rows, 2 shown)\n", out, 1, true)
  end)

  it(".watch chooses the relations whose changes print; runnel.watch(rel) never prints a group twice", function()
    local out = repl{
      't = p:table("t", { {"id","int"}, key = "id" })',
      'u = p:table("u", { {"k","int"}, key = "k" })',
      ".watch off",
      "t:insert{ id = 1 }",
      ".watch u",
      "t:insert{ id = 2 }",
      "u:insert{ k = 1 }",
      ".watch on",
      "runnel.watch(u) == u",
      "u:insert{ k = 2 }",
    }
    assert.is_nil(out:find("t · group", 1, true))
    assert.matches("watch off\nwatch u\nu · group 3\n", out, 1, true)
    assert.matches("watch on\ntrue\nu · group 4\n id | verb   | k\n----+--------+---\n  2 | INSERT | 2\n", out, 1, true)
    assert.equal(1, select(2, out:gsub("u · group 4", "")))
  end)

  it("prints a derived relation's rows, rows in schema order, stats readably, runnel.show once", function()
    local out = repl{
      't = p:table("t", { {"name","string"}, {"score","int"}, {"id","int"}, key = "id" })',
      "top = t:filter(function(r) return r.score > 5 end)",
      ".watch off",
      't:insert{ id = 1, name = "ann", score = 9 }',
      't:insert{ id = 2, name = "bob", score = 1 }',
      "top",
      "t:get(1)",
      "p:stats()",
      "runnel.show(t)",
    }
    assert.matches(" row id | name | score | id\n--------+------+-------+----\n      1 | ann  |     9 |  1\n(1 row)\n", out, 1, true)
    assert.matches('{name = "ann", score = 9, id = 1}\n', out, 1, true)
    assert.matches("{\n  changes = 2,\n", out, 1, true)
    assert.matches("\n  seq = 2,\n", out, 1, true)
    assert.equal("      2 | bob  |     1 |  2\n(2 rows)\n", out:sub(-#"      2 | bob  |     1 |  2\n(2 rows)\n"))
  end)

  it("completes no private _method with Tab unless _ is typed", function()
    local out = repl{
      't = p:table("t", { {"id","int"}, key = "id" })',
      'table.concat(require("runnel.repl").complete("p:", 2), " ")',
      'table.concat(require("runnel.repl").complete("p:_de", 2), " ")',
      'table.concat(require("runnel.repl").complete("t:", 2), " ")',
    }
    local first, second = out:match('^(%b"")\n(%b"")\n')
    assert.matches('^"alter batch begin changes close commit', first)
    assert.is_nil(first:find('[" ]_'))
    assert.equal('"_declare"', second)
  end)
end)

describe("runnel.show in a script", function()
  after_each(H.cleanup)
  it("prints the grid, as in the REPL", function()
    local dir = H.tmpdir()
    H.write(dir .. "/s.lua", 'local runnel = require "runnel"\nlocal p = runnel.open()\n' ..
      'local t = p:table("t", { {"id","int"}, key = "id" })\nt:insert{ id = 1 }\nrunnel.show(t)\n' ..
      'print(#runnel.format(t))\n')
    local out, err, code = H.sh(("%s run %s/s.lua"):format(bin, dir))
    assert.equal("", err)
    assert.equal(0, code)
    assert.equal(" row id | id\n--------+----\n      1 |  1\n(1 row)\n47\n", out)
  end)
end)

describe("the REPL's temporary state", function()
  after_each(H.cleanup)
  it("is removed on os.exit and at the end of input, and the exit code is kept", function()
    local dir = H.tmpdir()
    local function path_of(file)
      local text = H.read(file)
      return text and text:match("^(%S+)$")
    end
    local _, _, code = H.sh(bin, ('io.open(%q, "w"):write((p:path())):close()\nos.exit(3)\n'):format(dir .. "/a"))
    assert.equal(3, code)
    local a = path_of(dir .. "/a")
    assert.truthy(a)
    assert.falsy(os.rename(a, a), "removed on os.exit")
    _, _, code = H.sh(bin, ('io.open(%q, "w"):write((p:path())):close()\n'):format(dir .. "/b"))
    assert.equal(0, code)
    local b = path_of(dir .. "/b")
    assert.falsy(os.rename(b, b), "removed at the end of input")
  end)
end)
