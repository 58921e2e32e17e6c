-- (round 26) p:drop of a relation whose NDJSON (or JetStream) sink has
-- groups waiting said, as for every durable sink, that the relation must
-- be "declared again with its columns" for the sink to get them. Since
-- 0.37 a log sink delivers waiting groups in the columns they were
-- committed with, whatever the relation is declared with next; the note
-- now says so, and this pins that it is true.
local runnel = require "runnel"
local H = require "helper"

describe("dropping a relation whose NDJSON sink has a group waiting", function()
  after_each(H.cleanup)

  it("notes that declaring it again with any columns delivers it, and it does", function()
    local dir = H.tmpdir()
    local state, log, script = dir .. "/st", dir .. "/out.ndjson", dir .. "/crash.lua"
    H.ndjson_table_crash(script, state, log)
    assert(os.remove(log)) -- its lines gone with the file: written again at delivery
    local lines = {}
    local p = runnel.open{ path = state, notes = function(line) lines[#lines + 1] = line end }
    p:drop("t")
    assert.same({ ('drop "t": 1 group (1 row) since group 2 still waits for its durable sink to %s: t declared '
                   .. 'again (with any columns) and the sink gets them as they were committed, '
                   .. 'p:drop_outbox("t: durable sink to %s") drops them'):format(log, log) }, lines)
    local t = p:table("t", { {"id","int"}, {"b","int"}, key = "id" })
    t:sink(runnel.ndjson(log))
    t:insert{ id = 3, b = 7 }
    p:close()
    assert.equal('{"verb":"INSERT","id":2,"a":"y"}\n{"verb":"INSERT","id":3,"b":7}\n', H.text_of(log))
  end)
end)
