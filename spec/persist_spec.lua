-- State across close and reopen (DESIGN §2, §5, §12).
local runnel = require "runnel"
local H = require "helper"

local function exists(path)
  local ok = os.rename(path, path)
  return ok ~= nil
end

describe("a pipeline's state", function()
  after_each(H.cleanup)

  local function declare(p)
    return p:table("players", { {"id","int"}, {"name","string"}, key = "id" }),
           p:table("notes", { {"text","string"} })
  end

  it("is restored on reopen: rows, counts, ids and the sequence number", function()
    local dir = H.tmpdir()
    local p = runnel.open(dir)
    local players, notes = declare(p)
    players:insert{ id = 2, name = "bob" }
    players:insert{ id = 1, name = "ann" }
    notes:insert{ text = "hi" }
    notes:insert{ text = "hi" }
    p:close()

    p = runnel.open{ path = dir, sync = false }
    players, notes = declare(p)
    assert.equal(4, p:seq()) -- four changes, each its own group
    assert.equal(2, players:count())
    assert.equal(2, notes:count())
    assert.same({ id = 1, name = "ann" }, players:get(1))
    assert.equal(2, players:id_of(1))
    local texts = {}
    for row, id in notes:rows() do texts[#texts + 1] = id .. row.text end
    assert.same({ "1hi", "2hi" }, texts)
    players:insert{ id = 3, name = "cy" }
    assert.equal(3, players:id_of(3))
    assert.equal(5, p:seq())
    p:close()
  end)

  it("refuses a relation declared again as another kind, saying what differs", function()
    local dir = H.tmpdir()
    local p = runnel.open(dir)
    declare(p)
    p:close()
    p = runnel.open{ path = dir, notes = false }
    local err = H.error_of(p.stream, p, "notes", { {"text","string"} })
    assert.equal(('relation "notes": the state at %s holds it as kind table, declared now as kind stream; '
                  .. 'drop it first (p:drop("notes") or runnel drop %s notes)'):format(dir, dir), err)
    p:close()
  end)

  it("is removed at close when temporary", function()
    local p = runnel.open()
    local path, temp = p:path()
    assert.is_true(temp)
    assert.is_true(exists(path))
    p:close()
    assert.is_false(exists(path))
    assert.equal("runnel: the pipeline is closed", H.error_of(p.seq, p))
  end)

  it("creates a missing directory and accepts an existing empty one", function()
    local dir = H.tmpdir()
    local p = runnel.open(dir .. "/sub")
    p:close()
    p = runnel.open(dir .. "/sub")
    p:close()
  end)

  it("is released by close, so one process can reopen it while relations linger", function()
    local dir = H.tmpdir()
    local p = runnel.open(dir)
    local players = declare(p)
    players:insert{ id = 1, name = "ann" }
    local iter, state = players:rows() -- an iteration left open
    p:close()
    assert.equal("runnel: players: the pipeline of this relation is closed", H.error_of(players.count, players))
    assert.is_nil(iter(state))
    p = runnel.open(dir)
    assert.equal(1, declare(p):count())
    p:close()
  end)

  it("closes with a to-be-closed variable", function()
    local path
    do
      local p <close> = runnel.open()
      path = p:path()
    end
    assert.is_false(exists(path))
  end)
end)
