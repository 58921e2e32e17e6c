-- p:run over a pipe whose writer pauses in the middle of a line. The
-- lines read whole before the pause are applied and committed at once (a
-- group ends "when the input pauses", docs/api.md), not when the partial
-- line is finished. Before, stdio's buffer held the partial line, so the
-- run did not see the pause and getline waited inside it: the complete
-- lines stayed uncommitted, unseen by sinks, for as long as the writer
-- paused.
local H = require "helper"
local runnel = require "runnel"

local function line(id, note)
  return ('{"rel":"t","op":"insert","row":{"id":%d,"note":"%s"}}'):format(id, note)
end

describe("p:run on a pipe that pauses mid-line", function()
  after_each(H.cleanup)

  it("commits the complete lines before the partial one during the pause", function()
    local dir = H.tmpdir()
    local marker = dir .. "/seen2"
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"note","string"}, key = "id" })
    local seqs = {}
    t:sink(function(_, row, _, info)
      seqs[row.id] = info.seq
      if row.id == 2 then io.open(marker, "w"):close() end
    end)
    local l3 = line(3, "seen")
    local head = line(1, "a") .. "\n" .. line(2, "b") .. "\n" .. l3:sub(1, 20)
    local cmd = ([[sh -c 'printf "%%s" "$1"; i=0; while [ ! -e "$2" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done;
      if [ -e "$2" ]; then printf "%%s\n" "$3"; else printf "%%s\n" "$4"; fi' sh '%s' '%s' '%s' '%s']])
      :format(head, marker, l3:sub(21), line(3, "timeout"):sub(21))
    local f = assert(io.popen(cmd, "r"))
    local stats = p:run(runnel.ndjson_source(f))
    f:close()
    assert.same({ lines = 3, applied = 3, rejected = 0, groups = 2 }, stats)
    assert.equal("seen", t:get(3).note) -- the writer saw lines 1 and 2 committed while it paused
    assert.equal(seqs[1], seqs[2])    -- one group: lines 1 and 2 …
    assert.is_true(seqs[3] > seqs[2]) -- … then line 3 in the next
    assert.equal(2, p:seq())
    p:close()
  end)

  it("keeps lines split across several writes whole", function()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, {"note","string"}, key = "id" })
    local l1, l2 = line(1, "a"), line(2, "b")
    local cmd = ([[sh -c 'printf "%%s" "$1"; sleep 0.05; printf "%%s\n%%s" "$2" "$3"; sleep 0.05; printf "%%s\n" "$4"' ]]
      .. [[sh '%s' '%s' '%s' '%s']]):format(l1:sub(1, 10), l1:sub(11), l2:sub(1, 5), l2:sub(6))
    local f = assert(io.popen(cmd, "r"))
    local stats = p:run(runnel.ndjson_source(f))
    f:close()
    assert.equal(2, stats.lines)
    assert.equal(2, stats.applied)
    assert.equal("a", t:get(1).note)
    assert.equal("b", t:get(2).note)
    p:close()
  end)
end)
