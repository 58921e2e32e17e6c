-- Packaging: the licence, `luarocks make` into a temporary tree (the
-- module where the Lua ecosystem expects it, usable from a stock lua5.4),
-- make install / uninstall, and the man page made from `runnel help`.
local H = require "helper"

local function exists(path) return os.rename(path, path) ~= nil end

-- make install builds `all` first: under make asan it must see the flags
-- make asan built build/asan with, or it would rebuild that tree without
-- the sanitizers in the middle of the run.
local BUILD = os.getenv("BUILD") or "build"
local MAKE_VARS = ("BUILD=%s"):format(BUILD) ..
  (os.getenv("ASAN") and " OPT='-O1 -g $(SAN)' LDFLAGS='$(SAN)'" or "")

-- Shell commands here run tools (make, sed, luarocks, a stock lua5.4)
-- without make asan's preloaded sanitizer runtime, which would report
-- their own leaks; the sanitized runnel binary carries its runtime itself.
local function sh(cmd) return H.sh("env -u LD_PRELOAD sh -c '" .. cmd:gsub("'", "'\\''") .. "'") end

describe("packaging", function()
  after_each(H.cleanup)

  it("has an MIT licence by the runnel authors", function()
    local text = H.read(H.root .. "/LICENSE")
    assert.matches("^MIT License\n\nCopyright %(c%) %d+ the runnel authors\n", text)
    assert.matches('THE SOFTWARE IS PROVIDED "AS IS"', text, 1, true)
  end)

  it("builds runnel.pc with the version of core/runnel.h, also after the version changes", function()
    local header = H.read(H.root .. "/core/runnel.h")
    local version = header:match('#define RN_VERSION "([^"]+)"')
    local pc = H.read(H.root .. "/" .. BUILD .. "/runnel.pc")
    assert.equal(version, pc:match("\nVersion: ([^\n]+)"))
  end)

  it("luarocks make installs the module into a tree, where a stock lua5.4 requires it", function()
    assert.truthy(os.execute("command -v luarocks >/dev/null 2>&1"), "luarocks is needed (make deps installs it)")
    local dir = H.tmpdir()
    local src, tree = dir .. "/src", dir .. "/tree"
    local rockspec = sh("ls " .. H.root .. "/runnel-*.rockspec"):gsub("\n$", "")
    assert.matches("/runnel%-%d+%.%d+%-%d+%.rockspec$", rockspec)
    sh(("mkdir -p %s && cd %s && cp -rp Makefile core lua scripts %s %s/"):format(src, H.root, rockspec, src))
    -- The objects make all built with the same flags are reused (their times
    -- kept, so make sees them up to date; other flags rebuild them): the
    -- check is where luarocks puts the module, not a second compile.
    -- (from the plain build tree: make test builds it; a sanitized one would not match)
    sh(("mkdir -p %s/build/rock && cd %s/build && cp -rp core lua gen .flags %s/build/rock/ 2>/dev/null"):format(
      src, H.root, src))
    local out, err, code = sh(("cd %s && MAKEFLAGS=-j2 luarocks --lua-version 5.4 --tree %s make %s"):format(
      src, tree, rockspec:match("[^/]+$")))
    assert.equal(0, code, out .. err)
    assert.truthy(exists(tree .. "/lib/lua/5.4/runnel/core.so"))
    assert.truthy(exists(tree .. "/share/lua/5.4/runnel.lua"))
    assert.truthy(exists(tree .. "/share/lua/5.4/runnel/view.lua"))
    assert.falsy(exists(tree .. "/share/lua/5.4/runnel/repl.lua"))
    -- a clean environment: only the tree's paths, from a directory outside the sources
    H.write(dir .. "/use.lua", 'local runnel = require "runnel"\nlocal p = runnel.open()\n' ..
      'local t = p:table("t", { {"id","int"}, key = "id" })\nt:insert{ id = 1 }\n' ..
      'print(t:count(), package.searchpath("runnel.core", package.cpath))\np:close()\n')
    out, err, code = sh(("cd %s && env -u LUA_PATH -u LUA_CPATH sh -c 'eval \"$(luarocks --lua-version 5.4 " ..
      "--tree %s path)\" && lua5.4 use.lua'"):format(dir, tree))
    assert.equal("", err)
    assert.equal(0, code)
    assert.equal("1\t" .. tree .. "/lib/lua/5.4/runnel/core.so\n", out)
  end)

  it("make install puts no repl.lua, and make uninstall removes every file install made", function()
    local dest = H.tmpdir()
    local _, err, code = sh(("cd %s && make -s install uninstall %s PREFIX=/usr DESTDIR=%s >/dev/null"):format(
      H.root, MAKE_VARS, dest))
    assert.equal(0, code, err)
    assert.equal("", sh(("find %s -type f -o -type l"):format(dest)))
    sh(("cd %s && make -s install %s PREFIX=/usr DESTDIR=%s >/dev/null"):format(H.root, MAKE_VARS, dest))
    assert.truthy(exists(dest .. "/usr/share/man/man1/runnel.1"))
    assert.truthy(exists(dest .. "/usr/share/lua/5.4/runnel.lua"))
    assert.falsy(exists(dest .. "/usr/share/lua/5.4/runnel/repl.lua"))
  end)

  -- The README's host build against an installed prefix, linked against
  -- librunnel.so and against librunnel.a: the static link needs every
  -- library of the core (nats.c too) in runnel.pc's Requires.private.
  it("builds scripts/host/host.c with pkg-config runnel against make install, shared and static", function()
    local dir = H.tmpdir()
    local prefix = dir .. "/prefix"
    local _, err, code = sh(("cd %s && make -s install %s PREFIX=%s >/dev/null"):format(H.root, MAKE_VARS, prefix))
    assert.equal(0, code, err)
    local san = os.getenv("ASAN") and " -fsanitize=address,undefined" or ""
    local pc = ("PKG_CONFIG_PATH=%s/lib/pkgconfig pkg-config"):format(prefix)
    local builds = {
      shared = ("cc%s %s/scripts/host/host.c $(%s --cflags --libs runnel) -o %s/host_shared"):format(san, H.root, pc, dir),
      static = ("cc%s %s/scripts/host/host.c $(%s --cflags runnel) $(%s --static --libs runnel | " ..
                "sed \"s/-lrunnel/-Wl,-Bstatic -lrunnel -Wl,-Bdynamic/\") -o %s/host_static"):format(san, H.root, pc, pc, dir),
    }
    for _, kind in ipairs{ "shared", "static" } do
      local out
      out, err, code = sh(builds[kind])
      assert.equal(0, code, kind .. ": " .. out .. err)
      out, err, code = sh(("cd %s && LD_LIBRARY_PATH=%s/lib %s/host_%s 5 20 0"):format(H.root, prefix, dir, kind))
      assert.equal(0, code, kind .. ": " .. err)
      assert.matches("leaderboard: %d+ inserts", out)
    end
  end)

  it("has a man page made from runnel help: every command and option of the help is in it", function()
    local help = sh(H.runnel_bin .. " help")
    local man = H.read(H.root .. "/" .. BUILD .. "/runnel.1")
    assert.matches('^%.TH RUNNEL 1 "[%d-]*" "runnel [%d.]+" "User Commands"\n%.SH NAME\nrunnel \\%- a stream processor', man)
    local n = 0
    for option in help:gmatch("\n  (%-%-[%w-]+)") do
      n = n + 1
      assert.matches(".B " .. option:gsub("%-", "\\-"), man, 1, true)
    end
    assert.is_true(n >= 6)
    for _, section in ipairs{ "SYNOPSIS", "COMMANDS", "OPTIONS", "FILES", "EXIT STATUS" } do
      assert.matches("\n.SH " .. section .. "\n", man, 1, true)
    end
  end)
end)
