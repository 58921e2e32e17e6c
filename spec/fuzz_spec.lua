-- Mutated input never crashes runnel or corrupts its state: p:run over
-- thousands of damaged NDJSON lines (byte flips, truncations, swapped
-- types, bogus structure) in skip mode. Under make asan this is also a
-- memory-safety check of the whole input path.
local runnel = require "runnel"
local H = require "helper"

describe("p:run on mutated input", function()
  after_each(H.cleanup)

  it("applies the good lines, rejects the rest with reasons, and keeps the state consistent", function()
    math.randomseed(99)
    local good = {
      '{"rel":"players","op":"insert","row":{"id":%d,"name":"p%d","team":%d,"tags":["a",null],"pos":{"x":1}}}',
      '{"rel":"players","op":"update","row":{"id":%d,"name":"q%d","team":%d}}',
      '{"rel":"players","op":"upsert","row":{"id":%d,"name":"u%d","team":%d}}',
      '{"rel":"players","op":"delete","row":{"id":%d}}',
    }
    local junk = { "\0", "\xff", '"', "{", "}", "[", "]", ":", ",", "null", "1e999", "-", "\\u0000", "\\ud800", "9999999999999999999999" }
    local lines = {}
    for i = 1, 3000 do
      local id = math.random(1, 50)
      local line = good[math.random(#good)]:format(id, id, math.random(1, 5))
      local r = math.random()
      if r < 0.15 then     -- flip bytes
        for _ = 1, math.random(1, 3) do
          local at = math.random(#line)
          line = line:sub(1, at - 1) .. string.char(math.random(0, 255)) .. line:sub(at + 1)
        end
      elseif r < 0.25 then -- truncate
        line = line:sub(1, math.random(#line))
      elseif r < 0.35 then -- splice in junk
        local at = math.random(#line)
        line = line:sub(1, at) .. junk[math.random(#junk)] .. line:sub(at + 1)
      elseif r < 0.40 then -- wrong types
        line = line:gsub('"name":"[^"]*"', '"name":' .. ({ "1", "[]", "{}", "true", "null" })[math.random(5)])
      end
      lines[i] = line:gsub("\n", " ")
    end
    local dir = H.tmpdir()
    local f = assert(io.open(dir .. "/in.ndjson", "wb"))
    f:write(table.concat(lines, "\n"), "\n")
    f:close()
    local p = runnel.open()
    local t = p:table("players", { {"id","int"}, {"name","string"}, {"team","int", null = true},
                                   {"tags","list", null = true}, {"pos", { {"x","int"} }, null = true}, key = "id" })
    local replay = {}
    t:sink(function(verb, row, old, info)
      if verb == "DELETE" then replay[info.id] = nil else replay[info.id] = row end
    end)
    local stats = p:run(runnel.ndjson_source(dir .. "/in.ndjson"),
                        { batch = 37, on_error = "skip", rejects = dir .. "/rejects.txt" })
    assert.equal(3000, stats.lines)
    assert.equal(3000, stats.applied + stats.rejected)
    assert.is_true(stats.rejected > 300 and stats.applied > 1000)
    local rejects = 0
    for line in io.lines(dir .. "/rejects.txt") do
      rejects = rejects + 1
      assert.matches("^" .. (dir .. "/in.ndjson"):gsub("%p", "%%%0") .. ":%d+: .+\t", line)
    end
    assert.equal(stats.rejected, rejects)
    local current = {}
    for row, id in t:rows() do current[id] = row end
    assert.same(current, replay) -- the sinks saw exactly what the state holds
    p:close()
  end)
end)
