/* lmodule.c — the module runnel.core (require "runnel.core"), as Lua's
 * linit.c: luaopen_runnel_core builds it from the types' open functions
 * (lpipeline.c, lrelation.c) and holds the module-level functions. */
#include <sys/stat.h>
#include <time.h>

#include "json.h"
#include "lbind.h"

/* core._dsl(fn): fn is defined in a file of the DSL (runnel.lua and the
 * modules it loads); its chunk names frames rn_lua_where skips. */
static int l_dsl(lua_State *L)
{
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_Debug ar;
  lua_pushvalue(L, 1);
  lua_getinfo(L, ">S", &ar);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, RN_DSL_SOURCE);
  lua_pushboolean(L, 1);
  lua_setfield(L, -2, ar.source);
  return 0;
}

/* core._raise(msg, as_is): runnel.lua's error(), at the user's line, its
 * control bytes escaped as core messages have them (a declared name holding
 * a newline shows "\n"); as_is: a message made already, which may end with
 * a callback's own text. A value that is not a message (a table a user's
 * attach raised) passes as it is. */
static int l_raise(lua_State *L)
{
  if (lua_type(L, 1) != LUA_TSTRING) {
    lua_settop(L, 1);
    return lua_error(L);
  }
  if (lua_toboolean(L, 2)) return rn_lua_error_as_is(L, lua_tostring(L, 1));
  return rn_lua_error(L, "%s", lua_tostring(L, 1)); /* escaped */
}

/* runnel.json_decode(text) -> value | nil, err (JSON null: runnel.null) */
static int l_json_decode(lua_State *L)
{
  size_t len;
  luaL_checktype(L, 1, LUA_TSTRING); /* documented to raise: checklstring would read 42 as "42" */
  const char *text = lua_tolstring(L, 1, &len);
  msgpack_zone z;
  if (!rn_zone_init(&z, 1024)) return rn_lua_error(L, "json_decode: out of memory");
  msgpack_object v;
  rn_err e = { .code = RN_OK };
  if (rn_json_parse(text, len, &v, &z, &e)) {
    msgpack_zone_destroy(&z);
    return rn_lua_nil_error(L, e.msg);
  }
  rn_lua_pushvalue(L, &v, NULL);
  msgpack_zone_destroy(&z);
  return 1;
}

/* runnel.now() -> seconds on the monotonic clock (the default pipeline clock). */
static int l_now(lua_State *L)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec / 1e9);
  return 1;
}

/* core._exists(path) -> whether something is at path, looked at without
 * opening it: io.open waits for ever on a FIFO, and fails on a file the
 * user may not read, which the state's reader then names better. */
static int l_exists(lua_State *L)
{
  struct stat st;
  lua_pushboolean(L, stat(luaL_checkstring(L, 1), &st) == 0);
  return 1;
}

static int l_strerror(lua_State *L)
{
  lua_pushstring(L, rn_strerror((int)luaL_checkinteger(L, 1)));
  return 1;
}

RN_API int luaopen_runnel_core(lua_State *L);
RN_API int luaopen_runnel_core(lua_State *L)
{
  static const luaL_Reg module_funcs[] = {
    { "open", rn_lua_open }, { "strerror", l_strerror }, { "now", l_now }, { "json_decode", l_json_decode },
    { "_dsl", l_dsl }, { "_raise", l_raise }, { "inspect", rn_lua_inspect },
    { "state_version", rn_lua_state_version }, { "_exists", l_exists }, { NULL, NULL }
  };
  lua_newtable(L);
  rn_lua_pipeline_open(L, -1);
  rn_lua_relation_open(L);
  luaL_setfuncs(L, module_funcs, 0);
  lua_pushlightuserdata(L, RN_LUA_NULL);
  lua_setfield(L, -2, "null");
  lua_pushliteral(L, RN_VERSION);
  lua_setfield(L, -2, "version");
  luaL_getmetatable(L, RN_PIPELINE_MT);
  lua_getfield(L, -1, "__index");
  lua_setfield(L, -3, "Pipeline");
  lua_pop(L, 1);
  luaL_getmetatable(L, RN_RELATION_MT);
  lua_getfield(L, -1, "__index");
  lua_setfield(L, -3, "Relation");
  lua_pop(L, 1);
  return 1;
}
