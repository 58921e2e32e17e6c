-- A log sink's verb or id field named like a column its waiting groups
-- were committed with (round 25, found by a review of OUTBOX-11). Such
-- groups go out in their own columns (outbox.c (11)), but the verb and id
-- fields were checked against the declaration's columns only: an old
-- column of the same name was written beside them, each line holding the
-- key twice (a JSON reader keeps the last: the verb, or the id a reader
-- dedupes by, was lost). The delivery now fails naming the group, the
-- column and the field; the groups wait, and the sink declared with
-- another field delivers them.
local runnel = require "runnel"
local H = require "helper"

describe("a log sink's verb or id field named like a column of a waiting group's", function()
  local dir, out
  before_each(function() dir = H.tmpdir(); out = dir .. "/out.ndjson" end)
  after_each(H.cleanup)
  local function open() return (H.open_noting(dir .. "/s")) end

  -- Group 1 goes out; group 2 (k = 2, <col> = "b") waits behind a foreign
  -- incomplete line, mended after close.
  local function leave_waiting(col)
    local p = open()
    local t = p:table("t", { {"k","int"}, {col,"string"}, key = "k" })
    t:sink(runnel.ndjson(out))
    t:insert{ k = 1, [col] = "a" }
    H.write(out, H.read(out) .. '{"other":1')
    t:insert{ k = 2, [col] = "b" }
    p:close()
    H.write(out, H.read(out) .. "}\n")
  end

  local BEFORE = '{"verb":"INSERT","k":1,"%s":"a"}\n{"other":1}\n'

  for _, c in ipairs{ { "verb", "op", { verb = "op" } }, { "id", "ref", { id = "ref" } } } do
    local kind, col, opts = table.unpack(c)
    it("the " .. kind .. " field named as a dropped column: the delivery fails naming them, the group waits; "
       .. "another field delivers it", function()
      leave_waiting(col)
      local p = open()
      local t = p:table("t", { {"k","int"}, key = "k" })
      t:sink(runnel.ndjson(out, opts))
      local err = H.error_of(p.deliver, p)
      assert.equal("t: ndjson: " .. out .. ": group 2 waits in the columns it was committed with, and its column \"" .. col .. "\" is the "
                   .. "sink's " .. kind .. " field: each line would hold \"" .. col .. "\" twice; declare the sink "
                   .. "with another " .. kind .. " field until the waiting groups are out", err)
      assert.equal(1, select(2, next(p:stats().outbox)))
      p:close()
      assert.equal(BEFORE:format(col), H.read(out))
      p = open()
      t = p:table("t", { {"k","int"}, key = "k" })
      t:sink(runnel.ndjson(out))
      t:insert{ k = 3 }
      p:close()
      assert.equal(BEFORE:format(col) .. '{"verb":"INSERT","k":2,"' .. col .. '":"b"}\n{"verb":"INSERT","k":3}\n',
                   H.read(out))
    end)
  end
end)
