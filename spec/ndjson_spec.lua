-- NDJSON sinks and p:run input (DESIGN §8, §9, §11, §12).
local runnel = require "runnel"
local H = require "helper"

local function write(path, lines) H.write(path, table.concat(lines, "\n") .. "\n") end

local function read(path) return assert(H.read(path)) end

describe("runnel.ndjson", function()
  after_each(H.cleanup)

  it("writes one object per change, names exactly, the verb first, DELETE with the key", function()
    local dir = H.tmpdir()
    local p = runnel.open()
    local t = p:table("odd", { {"@ID","int"}, {"MESSAGE.AMOUNT","float"}, {"Straße","string", null = true},
                               {"b","bytes", null = true}, {"l","list", null = true},
                               {"pos", { {"x","int"}, {"y","int", null = true} }, null = true}, key = "@ID" })
    t:sink(runnel.ndjson(dir .. "/out.ndjson"))
    t:sink(runnel.ndjson(dir .. "/plain.ndjson", { verb = false }))
    t:insert{ ["@ID"] = 1, ["MESSAGE.AMOUNT"] = 0.1, ["Straße"] = 'say "hi"\n\t\1', b = "\0\255", l = { 1, runnel.null, "x" },
              pos = { x = 2 } }
    t:update{ ["@ID"] = 1, ["MESSAGE.AMOUNT"] = 2 }
    t:delete{ ["@ID"] = 1 }
    p:close()
    assert.equal(
      '{"verb":"INSERT","@ID":1,"MESSAGE.AMOUNT":0.1,"Straße":"say \\"hi\\"\\n\\t\\u0001","b":"AP8=","l":[1,null,"x"],"pos":{"x":2,"y":null}}\n' ..
      '{"verb":"UPDATE","@ID":1,"MESSAGE.AMOUNT":2.0,"Straße":"say \\"hi\\"\\n\\t\\u0001","b":"AP8=","l":[1,null,"x"],"pos":{"x":2,"y":null}}\n' ..
      '{"verb":"DELETE","@ID":1}\n', read(dir .. "/out.ndjson"))
    assert.matches('^{"@ID":1,', read(dir .. "/plain.ndjson"))
  end)

  it("keeps cdc$ names through NDJSON", function()
    local dir = H.tmpdir()
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:cdc{}:sink(runnel.ndjson(dir .. "/cdc.ndjson", { verb = false }))
    t:insert{ k = 1 }
    p:close()
    assert.equal('{"cdc$seq":1,"cdc$batch_seq_no":0,"cdc$operation":2,"cdc$id":1,"k":1}\n', read(dir .. "/cdc.ndjson"))
  end)

  it("writes nothing for a group that rolls back", function()
    local dir = H.tmpdir()
    local p = runnel.open()
    local t = p:table("t", { {"k","int"}, key = "k" })
    t:sink(runnel.ndjson(dir .. "/out.ndjson"))
    pcall(p.batch, p, function() t:insert{ k = 1 }; t:insert{ k = 1 } end)
    t:insert{ k = 2 }
    p:close()
    assert.equal('{"verb":"INSERT","k":2}\n', read(dir .. "/out.ndjson"))
  end)
end)

describe("p:run", function()
  local dir, p, players
  before_each(function()
    dir = H.tmpdir()
    p = runnel.open()
    players = p:table("players", { {"id","int"}, {"name","string"}, {"team","int", null = true}, key = "id" })
  end)
  after_each(function() p:close(); H.cleanup() end)

  it("applies lines in groups of batch; update rows are patches, delete rows the key, null is null", function()
    write(dir .. "/in.ndjson", {
      '{"rel":"players","op":"insert","row":{"id":1,"name":"ann","team":7}}',
      '{"rel":"players","op":"insert","row":{"id":2.0,"name":"bob"}}',
      '',
      '{"rel":"players","op":"update","row":{"id":1,"team":null}}',
      '{"rel":"players","op":"upsert","row":{"id":3,"name":"cy"}}',
      '{"rel":"players","op":"delete","row":{"id":2}}',
    })
    local stats = p:run(runnel.ndjson_source(dir .. "/in.ndjson"), { batch = 2 })
    assert.same({ lines = 6, applied = 5, rejected = 0, groups = 3 }, stats)
    assert.equal(3, p:seq())
    assert.same({ id = 1, name = "ann" }, players:get(1))
    assert.is_nil(players:get(2))
    assert.equal("cy", players:get(3).name)
  end)

  it("stops at a bad line naming the file and line, rolling back its group only", function()
    write(dir .. "/in.ndjson", {
      '{"rel":"players","op":"insert","row":{"id":1,"name":"ann"}}',
      '{"rel":"players","op":"insert","row":{"id":2,"name":"bob"}}',
      '{"rel":"players","op":"insert","row":{"id":3,"name":"cy"}}',
      '{"rel":"players","op":"insert","row":{"id":4,"name":44}}',
    })
    local ok, err = pcall(p.run, p, runnel.ndjson_source(dir .. "/in.ndjson"), { batch = 2 })
    assert.is_false(ok)
    assert.equal(dir .. '/in.ndjson:4: players: column "name": expected string, got number', err)
    assert.equal(2, players:count()) -- the first group stays; the second is gone
    assert.is_nil(players:get(3))
    assert.is_false(p:in_group())
  end)

  it("skips bad lines into rejects with their line numbers and reasons, applying the rest", function()
    write(dir .. "/in.ndjson", {
      '{"rel":"players","op":"insert","row":{"id":1,"name":"ann"}}',
      '{not json',
      '{"rel":"nobody","op":"insert","row":{"id":1}}',
      '{"rel":"players","op":"shout","row":{"id":1}}',
      '{"rel":"players","op":"insert","row":{"id":1,"name":"dup"}}',
      '{"rel":"players","op":"update","row":{"id":9,"name":"x"}}',
      '{"rel":"players","op":"insert","row":{"id":2,"nme":"x"}}',
      '{"rel":"players","op":"insert","row":{"id":3,"name":"cy"}}',
      '["rel"]',
    })
    local stats = p:run(runnel.ndjson_source(dir .. "/in.ndjson"),
                        { batch = 4, on_error = "skip", rejects = dir .. "/rejects.txt" })
    assert.same({ lines = 9, applied = 2, rejected = 7, groups = 3 }, stats)
    assert.equal(2, players:count())
    local f = dir .. "/in.ndjson"
    assert.equal(table.concat({
      f .. ":2: malformed JSON at column 4: string or '}' expected near 'not'\t{not json",
      f .. ':3: unknown relation "nobody" (known: players)\t{"rel":"nobody","op":"insert","row":{"id":1}}',
      f .. ':4: players: unknown op "shout" (insert, update, upsert, delete)\t{"rel":"players","op":"shout","row":{"id":1}}',
      f .. ':5: players: insert: a row with key (id = 1) already exists\t{"rel":"players","op":"insert","row":{"id":1,"name":"dup"}}',
      f .. ':6: players: update: no row with key (id = 9)\t{"rel":"players","op":"update","row":{"id":9,"name":"x"}}',
      f .. ':7: players: unknown column "nme" (did you mean "name"?)\t{"rel":"players","op":"insert","row":{"id":2,"nme":"x"}}',
      f .. ':9: expected {"rel": name, "op": "insert"|"update"|"upsert"|"delete", "row": {…}}\t["rel"]',
    }, "\n") .. "\n", read(dir .. "/rejects.txt"))
  end)

  it("keeps the rest of a group when a line fails after writing (a callback raised)", function()
    players:filter(function(r) if r.name == "boom" then error("no booms") end return true end)
    local log = H.record(players)
    write(dir .. "/in.ndjson", {
      '{"rel":"players","op":"insert","row":{"id":1,"name":"ann"}}',
      '{"rel":"players","op":"insert","row":{"id":2,"name":"boom"}}',
      '{"rel":"players","op":"insert","row":{"id":3,"name":"cy"}}',
    })
    local stats = p:run(runnel.ndjson_source(dir .. "/in.ndjson"), { batch = 10, on_error = "skip" })
    assert.same({ lines = 3, applied = 2, rejected = 1, groups = 1 }, stats)
    assert.same({ "INSERT 1", "INSERT 2" }, H.verbs(log)) -- ids 1 and 2: the failed line used none
    assert.same({ 1, 3 }, { players:get(1).id, players:get(3).id })
  end)
end)

describe("runnel run --input", function()
  after_each(H.cleanup)

  it("applies a file through the pipeline the script returns", function()
    local dir = H.tmpdir()
    write(dir .. "/pipe.lua", {
      'local runnel = require "runnel"',
      'local p = runnel.open()',
      'local t = p:table("t", { {"k","int"}, {"v","string"}, key = "k" })',
      't:sink(runnel.ndjson(io.stdout, { verb = false }))',
      'return p',
    })
    local input = '{"rel":"t","op":"insert","row":{"k":1,"v":"a"}}\n{"rel":"t","op":"insert","row":{"k":2,"v":3}}\n'
    local out, err, code = H.sh(("%s run %s/pipe.lua --input - --on-error skip"):format(H.runnel_bin, dir), input)
    assert.equal(0, code)
    assert.equal('{"k":1,"v":"a"}\n', out)
    assert.equal('stdin:2: t: column "v": expected string, got number\t{"rel":"t","op":"insert","row":{"k":2,"v":3}}\n' ..
                 "runnel: stdin: 2 lines, 1 applied, 1 rejected, 1 group\n", err)
    out, err, code = H.sh(("%s run %s/pipe.lua --input -"):format(H.runnel_bin, dir), input)
    assert.equal(1, code)
    assert.equal('runnel: stdin:2: t: column "v": expected string, got number\n', err)
  end)
end)

describe("an NDJSON sink on a cdc relation", function()
  after_each(H.cleanup)
  it("adds no verb by default (every event is an INSERT; the event says what happened)", function()
    local runnel = require "runnel"
    local dir = H.tmpdir()
    local p = runnel.open()
    local t = p:table("t", { {"id","int"}, key = "id" })
    t:cdc{ format = "debezium" }:sink(runnel.ndjson(dir .. "/dbz.ndjson"))
    t:cdc{ format = "debezium" }:sink(runnel.ndjson(dir .. "/verb.ndjson", { verb = "verb" }))
    t:sink(runnel.ndjson(dir .. "/t.ndjson"))
    t:insert{ id = 1 }
    p:close()
    assert.equal('{"op":"c","before":null,"after":{"id":1},"source":{"relation":"t","seq":1,"id":1}}\n',
                 H.read(dir .. "/dbz.ndjson"))
    assert.matches('^{"verb":"INSERT","op":"c"', H.read(dir .. "/verb.ndjson"))
    assert.equal('{"verb":"INSERT","id":1}\n', H.read(dir .. "/t.ndjson"))
  end)
end)
