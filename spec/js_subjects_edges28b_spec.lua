-- js_subjects_edges28b_spec.lua — JSSRC-5 (core/js_source.c) at its
-- edges: the overlap of NATS wildcards ("*" one token, ">" one or more at
-- the end) both ways, and subjects no message can have. "s..0" beside
-- "s.*.0" was said to overlap it, and alone was "a subject the stream does
-- not hold": an empty token, white space or a ">" before the last token
-- is no subject, said so before connecting. No server: every case is
-- refused, or not, before the source connects (to a port nothing serves).
local runnel = require "runnel"

local DEAD = "nats://127.0.0.1:1"

local function run_error(subjects)
  local p = runnel.open()
  p:stream("ev", { {"id","int"} })
  local ok, err = pcall(p.run, p, runnel.jetstream_source{ url = DEAD, stream = "S", subjects = subjects })
  p:close()
  assert(not ok, "expected an error")
  return (tostring(err):gsub("^[^:]*:%d+: ", ""))
end

local function overlap(a, b)
  return ("%s/S: stream S: subjects %s and %s overlap: a message of both would be applied twice"):format(DEAD, a, b)
end

describe("a jetstream source's subjects at the edges (28b)", function()
  local overlapping = {
    { "a.*", "a.>" }, { "a.>", "a.*" }, { ">", "x" }, { "x", ">" }, { ">", "*" }, { "*.b", "a.*" },
    { "a.>", "a.b.c" }, { "a.>", "a.*.*" }, { "*.*", "a.b" }, { "a.*.c", "*.b.>" },
  }
  for _, c in ipairs(overlapping) do
    it(("refuses %s beside %s"):format(c[1], c[2]), function()
      assert.equal(overlap(c[1], c[2]), run_error(c))
    end)
  end

  local apart = {
    { "a.b", "a.b.c" }, { "a.>", "a" }, { "a", "a.>" }, { "a.*.c", "a.b.d" }, { "*", "a.b" }, { "a.*", "a.b.c" },
    { "ab.>", "a.>" }, { "a*", "ab" }, { "a.b*", "a.bc" }, { "*.*", "a" },
  }
  for _, c in ipairs(apart) do
    it(("takes %s beside %s (it goes on to connect)"):format(c[1], c[2]), function()
      assert.matches("cannot connect", run_error(c), 1, true)
    end)
  end

  for _, bad in ipairs{ "s..0", "s.0.", ".s", "s. 0", "s.>.0", "s.\t0" } do
    it(("refuses the subject %q, alone or beside one it would seem to overlap"):format(bad), function()
      local want = ('%s/S: stream S: subject "%s" is no subject (empty tokens and white space are not allowed, '
                    .. 'and > only as the last token)'):format(DEAD, (bad:gsub("\t", "\\t"))) -- messages write a tab \t
      assert.equal(want, run_error{ bad })
      assert.equal(want, run_error{ "s.*.0", bad })
    end)
  end
end)
