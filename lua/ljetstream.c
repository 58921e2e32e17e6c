/* ljetstream.c — the JetStream sink and source for Lua (jetstream.h);
 * runnel/io.lua checks the options and calls these. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "jetstream.h"
#include "lbind.h"

/* p:_jetstream_sink(rel, url, subject, verb_field|false, id|nil, timeout) -> true | nil, err */
static int l_jetstream_sink(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *r = rn_lua_checkrel_of(L, 2, lp);
  /* names with a NUL byte are refused: C would read them cut short (another subject) */
  rn_js_sink_opts o = { rn_lua_checkname(L, 3, "jetstream"), rn_lua_checkname(L, 4, "jetstream"),
                        lua_isstring(L, 5) ? rn_lua_checkname(L, 5, "jetstream") : NULL,
                        lua_isnoneornil(L, 6) ? NULL : rn_lua_checkname(L, 6, "jetstream"),
                        luaL_optnumber(L, 7, 0) };
  if (rn_jetstream_sink(lp->p, r->rel, &o)) return rn_lua_nil_error(L, rn_errmsg(lp->p));
  lua_pushboolean(L, 1);
  return 1;
}

/* p:_run_jetstream(url, stream, {subjects…}, batch, idle, limit, name) -> stats (raises on error) */
static int l_run_jetstream(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  luaL_checktype(L, 4, LUA_TTABLE);
  int n = (int)lua_rawlen(L, 4);
  const char **subjects = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *subjects, 0); /* freed by Lua */
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, 4, i + 1);
    subjects[i] = rn_lua_checkname(L, -1, "jetstream_source");
    lua_pop(L, 1); /* the string stays alive in the table */
  }
  rn_js_source_opts o = { rn_lua_checkname(L, 2, "jetstream_source"), rn_lua_checkname(L, 3, "jetstream_source"),
                          subjects, n,
                          (size_t)luaL_optinteger(L, 5, 100), luaL_optnumber(L, 6, 0),
                          (uint64_t)luaL_optinteger(L, 7, 0), luaL_checkstring(L, 8) };
  rn_run_stats st;
  int rc = rn_run_jetstream(lp->p, &o, &st);
  lp->L = L;
  if (rc) return rn_lua_raise(L, lp);
  rn_lua_push_run_stats(L, &st, "messages");
  return 1;
}

/* p:_js_position(stream, subject) -> seq | nil, err */
static int l_js_position(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  uint64_t seq;
  if (rn_js_position(lp->p, rn_lua_checkname(L, 2, "jetstream position"), rn_lua_checkname(L, 3, "jetstream position"), &seq))
    return rn_lua_nil_error(L, rn_errmsg(lp->p));
  lua_pushinteger(L, (lua_Integer)seq);
  return 1;
}

/* p:state_id() -> 32 hex digits */
static int l_state_id(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  char id[33];
  if (rn_state_id(lp->p, id)) return rn_lua_nil_error(L, rn_errmsg(lp->p));
  lua_pushstring(L, id);
  return 1;
}

/* Lua states that loaded runnel.core: the last one to close tears nats.c
 * down if it was used (its library state and threads), so a Lua host
 * leaks nothing. */
static atomic_int nats_users;

static int release_nats(lua_State *L)
{
  (void)L;
  if (atomic_fetch_sub(&nats_users, 1) == 1) rn_js_shutdown();
  return 0;
}

/* A userdata in the registry whose __gc runs when the state closes, after
 * the pipelines made later (finalizers run newest first). */
static void hold_nats(lua_State *L)
{
  lua_newuserdatauv(L, 1, 0);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, release_nats);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, "runnel.nats");
  atomic_fetch_add(&nats_users, 1);
}

void rn_lua_jetstream_open(lua_State *L, int methods)
{
  hold_nats(L);
  static const luaL_Reg js_methods[] = {
    { "_jetstream_sink", l_jetstream_sink }, { "_run_jetstream", l_run_jetstream },
    { "_js_position", l_js_position }, { "state_id", l_state_id }, { NULL, NULL }
  };
  rn_lua_setfuncs_at(L, methods, js_methods);
}
