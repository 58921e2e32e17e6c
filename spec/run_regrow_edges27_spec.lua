local runnel = require "runnel"
local H = require "helper"

describe("rev27d p:run counts through regrows", function()
  teardown(H.cleanup)
  for _, sync in ipairs{ false, true } do
    for _, wb in ipairs{ false, true } do
      it(("sync=%s wb=%s"):format(tostring(sync), tostring(wb)), function()
        local dir = H.tmpdir()
        local lines = {}
        local pad = string.rep("p", 300)
        for i = 1, 3000 do
          if i % 10 == 0 then lines[#lines + 1] = '{"rel":"t","op":"update","row":{"k":"none' .. i .. '","pad":"x"}}'
          else lines[#lines + 1] = ('{"rel":"t","op":"insert","row":{"k":"r%d","pad":"%s"}}'):format(i, pad) end
        end
        H.write(dir .. "/in.ndjson", table.concat(lines, "\n") .. "\n")
        local p = runnel.open{ path = dir .. "/st", sync = sync, write_back = wb, map_size = 1 << 16, notes = false }
        local t = p:table("t", { {"k","string"}, {"pad","string"}, key = "k" })
        local st = p:run(runnel.ndjson_source(dir .. "/in.ndjson"), { batch = 1000, on_error = "skip",
                                                                      rejects = dir .. "/rej", progress = false })
        local s = p:stats()
        assert((not sync and wb) or s.map_size > 1 << 20, "grew")
        assert.same({ lines = 3000, applied = 2700, rejected = 300, groups = 3 },
                    { lines = st.lines, applied = st.applied, rejected = st.rejected, groups = st.groups })
        assert.equal(2700, s.changes)
        assert.equal(2700, t:changes().inserts) -- a regrow's replay counted once
        assert.equal(3, s.groups)
        assert.equal(0, s.rollbacks)
        p:close()
        local rej = select(2, H.text_of(dir .. "/rej"):gsub("\n", ""))
        assert.equal(300, rej)
      end)
    end
  end
end)
