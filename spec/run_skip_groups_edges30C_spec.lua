-- p:run with on_error = "skip" and batch = N: every N input lines form
-- one group, rejected lines counted. A line whose failure rolls the group
-- back (a joiner that raises) had its group's good lines applied again,
-- and the group counted only those and itself, forgetting lines rejected
-- earlier in it without a rollback (an unknown column): the group took
-- in lines of the next one, so where groups end depended on which kind
-- of failure a line met.
local runnel = require "runnel"
local H = require "helper"

describe("p:run skipping bad lines", function()
  after_each(H.cleanup)

  it("makes every N lines one group, whatever failed in it", function()
    local dir = H.tmpdir()
    local lines = {}
    for i = 1, 9 do
      local row = ('{"id":%d,"fk":1}'):format(i)
      if i == 2 or i == 5 then row = ('{"id":%d,"fk":1,"nope":1}'):format(i) end -- refused: no rollback
      lines[i] = '{"rel":"l","op":"insert","row":' .. row .. '}'
    end
    H.write(dir .. "/in.ndjson", table.concat(lines, "\n") .. "\n")
    local p = runnel.open()
    local r = p:table("r", { {"k","int"}, {"v","string"}, key = "k" })
    local l = p:table("l", { {"id","int"}, {"fk","int", null = true}, key = "id" })
    local j = l:join(r, { on = "fk", kind = "left",
      joiner = function(a, b) if a.id == 6 then error("no 6") end return { id = a.id, v = b and b.v } end,
      columns = { {"id","int"}, {"v","string", null = true}, key = "id" } })
    r:insert{ k = 1, v = "one" }
    local groups, open = {}, {}
    j:sink{ insert = function(row) open[#open + 1] = row.id end,
            commit = function(seq) groups[#groups + 1] = seq .. ":" .. table.concat(open, ","); open = {} end,
            rollback = function() open = {} end }
    local res = p:run(runnel.ndjson_source(dir .. "/in.ndjson"),
                      { batch = 3, on_error = "skip", rejects = dir .. "/rejects", progress = false })
    assert.same({ "2:1,3", "3:4", "4:7,8,9" }, groups)
    assert.same({ lines = 9, applied = 6, rejected = 3, groups = 3 }, res)
    local rejected = H.read(dir .. "/rejects")
    assert.truthy(rejected:find("in.ndjson:6: l.join: joiner: ", 1, true), rejected)
    p:close()
  end)
end)
