-- The Lua module (require "runnel") for LuaRocks: `luarocks make` builds
-- runnel.core with the project's Makefile (make rock) and installs it with
-- the DSL's Lua files (make rock-install). The runnel command and the C
-- library install with `make install`.
rockspec_format = "3.0"
package = "runnel"
version = "0.42-1"
source = {
  url = "git+https://github.com/runnel/runnel.git",
  tag = "v0.42",
}
description = {
  summary = "A stream processor that lives inside your program",
  detailed = [[
    A C core keeps tables in LMDB, gives every row a stable id, and sends each
    change through the relations you derive from it; Lua 5.4 scripts declare
    the schemas, the per-row functions, and what sinks do with each verb.
  ]],
  license = "MIT",
  homepage = "https://github.com/runnel/runnel",
}
dependencies = {
  "lua >= 5.4, < 5.5",
}
external_dependencies = {
  LMDB = { header = "lmdb.h" },
  MSGPACK = { header = "msgpack.h" },
  JANSSON = { header = "jansson.h" },
  SQLITE = { header = "sqlite3.h" },
}
build = {
  type = "make",
  build_target = "rock",
  install_target = "rock-install",
  -- the Makefile finds Lua 5.4's headers with pkg-config lua5.4
  build_variables = {
    BUILD = "build/rock",
  },
  install_variables = {
    BUILD = "build/rock",
    INST_LIBDIR = "$(LIBDIR)",
    INST_LUADIR = "$(LUADIR)",
  },
}
