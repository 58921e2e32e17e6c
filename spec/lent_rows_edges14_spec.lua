-- Rows lent to a join's mapper or joiner are valid only during the call
-- (DESIGN §9; lua/lrow.c). The decoding state is reused call after call;
-- each call that could keep its Row gets a new one, so a Row kept from an
-- earlier call raises when read during a later call, instead of reading
-- that later call's row (before: it read the current row).
local runnel = require "runnel"
local H = require "helper"

local STALE = H.STALE_ROW

local setup, read = H.lent_tables, H.read_id

describe("a Row kept from an earlier call", function()
  it("raises when a mapper reads it during a later call", function()
    local p, L, R = setup()
    local kept, seen = nil, {}
    L:join(R, { mapper = function(row)
      if kept then seen[#seen + 1] = read(kept) end
      kept = row
      return row.fk
    end, name = "j" })
    L:insert{ id = 1, fk = 1 }
    L:insert{ id = 2, fk = 2 }
    assert.same({ STALE }, seen)
    assert.equal(STALE, read(kept))
    assert.equal("row of L (its call has returned)", tostring(kept))
    p:close()
  end)

  it("raises when a joiner reads it during a later call, left or right", function()
    local p, L, R = setup()
    local kl, kr, seen = nil, nil, {}
    L:join(R, { on = "fk", name = "j", columns = { {"id","int"}, {"n","string"}, key = "id" },
      joiner = function(l, r)
        if kl then seen[#seen + 1] = read(kl) .. " / " .. read(kr) end
        kl, kr = l, r
        return { id = l.id, n = r.n }
      end })
    L:insert{ id = 1, fk = 1 }
    L:insert{ id = 2, fk = 2 }
    assert.same({ STALE .. " / " .. STALE }, seen)
    p:close()
  end)

  it("returned by a later call fails that call's group, naming the join", function()
    local p, L, R = setup()
    local kept
    local j = L:join(R, { on = "fk", name = "j", columns = { {"id","int"}, {"fk","int"}, key = "id" },
      joiner = function(l) local k = kept; kept = l; return k or l end })
    L:insert{ id = 1, fk = 1 }
    local line = debug.getinfo(1, "l").currentline - 2 -- the joiner's, named since 0.36
    assert.equal(("joiner returned a bad row: j: %s (the joiner at spec/lent_rows_edges14_spec.lua:%d)"):format(STALE, line),
                 H.error_of(L.insert, L, { id = 2, fk = 2 }))
    assert.equal(1, j:count())
    p:close()
  end)

  it("handed to a helper and read later raises too; rows read within the call stay right", function()
    local p, L, R = setup()
    local log = {}
    local function note(row) log[#log + 1] = row end
    local j = L:join(R, { mapper = function(row) note(row); return row.fk end, name = "j",
      columns = { {"id","int"}, {"n","string"}, key = "id" },
      joiner = function(l, r) note(l); return { id = l.id, n = r.n } end })
    for i = 1, 5 do L:insert{ id = i, fk = i % 2 + 1 } end
    for _, row in ipairs(log) do assert.equal(STALE, read(row)) end
    assert.same({ id = 3, n = "two" }, j:get(3))
    p:close()
  end)
end)
