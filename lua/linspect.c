/* linspect.c — runnel.inspect(path): what a state holds, read from its
 * catalogue in one LMDB read transaction (rn_inspect), for the REPL's
 * read-only browsing and for scripts that look at a state from outside. */
#include "lbind.h"

static int push_relation(void *ctx, const rn_inspect_relation *r)
{
  lua_State *L = ctx;
  if (!lua_checkstack(L, 4)) return RN_ENOMEM;
  lua_createtable(L, 0, 5);
  lua_pushstring(L, r->name);
  lua_setfield(L, -2, "name");
  lua_pushstring(L, r->kind);
  lua_setfield(L, -2, "kind");
  lua_pushstring(L, r->columns);
  lua_setfield(L, -2, "columns");
  if (r->rows >= 0) rn_lua_setint(L, "rows", (lua_Integer)r->rows);
  rn_lua_setint(L, "next_id", (lua_Integer)r->next_id);
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  return 0;
}

/* runnel.inspect(path) -> { seq = n, relations = { { name, kind, columns,
 * rows (nil for relations without a count), next_id }… } } in name order.
 * Raises when path holds no readable state. */
int rn_lua_inspect(lua_State *L)
{
  const char *path = luaL_checkstring(L, 1);
  lua_createtable(L, 0, 2);
  lua_newtable(L);
  rn_inspect_state st;
  char err[1024] = "";
  int rc = rn_inspect(path, push_relation, L, &st, err, sizeof err);
  if (rc) return rn_lua_error(L, "inspect: %s", err[0] ? err : rn_strerror(rc));
  lua_setfield(L, -2, "relations");
  rn_lua_setint(L, "seq", (lua_Integer)st.seq);
  return 1;
}
