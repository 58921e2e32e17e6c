-- A UTF-8 byte order mark where p:run reads none (round 20): after the
-- spaces that start a line it said "malformed JSON at column 3: invalid
-- token near '<BOM>'", the mark itself invisible on a terminal.
local H = require "helper"
local runnel = require "runnel"

describe("p:run and a UTF-8 BOM", function()
  local dir, p, t, path
  before_each(function()
    dir = H.tmpdir()
    path = dir .. "/in.ndjson"
    p = runnel.open()
    t = p:table("t", { {"id","int"}, key = "id" })
  end)
  after_each(function() p:close(); H.cleanup() end)

  local bom, line = "\xEF\xBB\xBF", '{"rel":"t","op":"insert","row":{"id":1}}\n'

  it("after the spaces that start the first line or another, says so", function()
    local why = ": a UTF-8 byte order mark (BOM) follows the spaces that start the line: only the first bytes of the "
                .. "input may be one"
    assert.equal(path .. ":1" .. why, H.ndjson_run_error(p, path, "  " .. bom .. line))
    assert.equal(path .. ":2" .. why, H.ndjson_run_error(p, path, line .. " \t" .. bom .. line))
    assert.equal(0, t:count())
  end)

  it("inside a line is the JSON error it was", function()
    local err = H.ndjson_run_error(p, path, '{"rel":' .. bom .. '"t"}\n')
    assert.equal(path .. ":1: malformed JSON", err:sub(1, #path + 18))
  end)
end)
