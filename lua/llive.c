/* llive.c — a state that lives through deploys, from Lua: renames for the
 * next declaration (p:alter, was =), the lines of the changes applied. */
#include <string.h>

#include "evolve.h"
#include "lbind.h"
#include "notes.h"
#include "outbox.h"

/* p:_rename(rel, from, to, alter): applied when rel is next declared
 * (evolve.h); alter (p:alter's, not was ='s): refused once rel is declared. */
static int l_rename(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  const char *rel = luaL_checkstring(L, 2), *from = luaL_checkstring(L, 3), *to = luaL_checkstring(L, 4);
  int rc = lua_toboolean(L, 5) ? rn_evolve_alter(lp->p, rel, from, to) : rn_evolve_rename(lp->p, rel, from, to);
  return rc ? rn_lua_raise(L, lp) : 0;
}

/* p:_notes() -> { line… }, the schema changes applied since open. */
static int l_notes(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  const char *const *lines;
  int n = rn_notes(lp->p, &lines);
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushstring(L, lines[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* p:_take_notes() -> { line… }, the notes not yet told (notes.h), now
 * counted told; none when the host that opened p set a notes callback
 * (rn_open_opts): it is told them instead, here. */
static int l_take_notes(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  if (rn_notes_tell(lp->p)) {
    lua_newtable(L);
    return 1;
  }
  const char *const *lines;
  int n = rn_notes_pending(lp->p, &lines);
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushstring(L, lines[i]);
    lua_rawseti(L, -2, i + 1);
  }
  rn_notes_taken(lp->p, n); /* after the table is whole: Lua's memory error leaves them waiting */
  return 1;
}

/* p:drop(name): the relation's state removed (rn_drop). */
static int l_drop(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  const char *name = luaL_checkstring(L, 2);
  return rn_drop(lp->p, name) ? rn_lua_raise(L, lp) : 0;
}

/* p:drop_outbox(sink): a durable sink's record and waiting groups
 * dropped (rn_outbox_drop; runnel drop-outbox). */
static int l_drop_outbox(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  const char *sink = luaL_checkstring(L, 2);
  return rn_outbox_drop(lp->p, sink) ? rn_lua_raise(L, lp) : 0;
}

static int push_name(void *ctx, const char *name, const char *kind)
{
  lua_State *L = ctx;
  (void)kind;
  lua_pushstring(L, name);
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  return 0;
}

/* p:_undeclared() -> { name… } stored in the state, not declared in p. */
static int l_undeclared(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lua_newtable(L);
  return rn_undeclared(lp->p, push_name, L) ? rn_lua_raise(L, lp) : 1;
}

static const luaL_Reg live_methods[] = {
  { "_drop", l_drop },
  { "_undeclared", l_undeclared },
  { "drop_outbox", l_drop_outbox },
  { "_rename", l_rename },
  { "_notes", l_notes },
  { "_take_notes", l_take_notes },
  { NULL, NULL }
};

void rn_lua_live_open(lua_State *L, int methods)
{
  lua_pushvalue(L, methods);
  luaL_setfuncs(L, live_methods, 0);
  lua_pop(L, 1);
}
