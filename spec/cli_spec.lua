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
    assert.equal("false\tone\ttwo\t2\nrunnel 0.8\n", out)
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

  it("prints usage for unknown commands", function()
    local _, err, code = H.sh(bin .. " frobnicate")
    assert.equal(2, code)
    assert.matches("usage: runnel run", err)
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
      " id | verb   | id | name",
      "----+--------+----+------",
      "  1 | INSERT |  1 | ann",
      "t · group 2",
      " id | verb   | id | name",
      "----+--------+----+------------",
      "  2 | INSERT |  2 | bob",
      "  1 | UPDATE |  1 | ann → anna",
      "2",
      " id | id | name",
      "----+----+------",
      "  1 |  1 | anna",
      "  2 |  2 | bob",
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
  end)
end)
