/* linspect.c — runnel.inspect(path): what a state holds, read from its
 * catalogue in one LMDB read transaction (rn_inspect), and the groups
 * waiting for its durable sinks in another (rn_inspect_outbox), for the
 * REPL's read-only browsing and for scripts that look at a state from
 * outside. */
#include "lbind.h"
#include "outbox.h"

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

void rn_lua_push_waiting(lua_State *L, const rn_outbox_kept *k)
{
  lua_createtable(L, 0, 8);
  lua_pushstring(L, k->shown);
  lua_setfield(L, -2, "sink");
  lua_pushstring(L, k->key);
  lua_setfield(L, -2, "key");
  if (k->relation[0]) {
    lua_pushstring(L, k->relation);
    lua_setfield(L, -2, "relation");
  }
  if (k->relation_gone) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "relation_gone");
  }
  rn_lua_setint(L, "groups", (lua_Integer)k->groups);
  rn_lua_setint(L, "rows", (lua_Integer)k->rows);
  rn_lua_setint(L, "since", (lua_Integer)k->since);
  rn_lua_setint(L, "seen", (lua_Integer)k->seen);
}

/* A sink with groups waiting, appended to the list on top of the stack
 * (runnel inspect lists the same ones). */
static int push_waiting(void *ctx, const rn_outbox_kept *k)
{
  lua_State *L = ctx;
  if (!k->groups) return 0;
  if (!lua_checkstack(L, 4)) return RN_ENOMEM;
  rn_lua_push_waiting(L, k);
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  return 0;
}

/* runnel.inspect(path) -> { seq = n, relations = { { name, kind, columns,
 * rows (nil for relations without a count), next_id }… } in name order,
 * outbox_waiting = { { sink, key, relation, groups, rows, since, seen,
 * relation_gone }… } in key order: the durable sinks groups wait for }.
 * Raises when path holds no readable state. */
int rn_lua_inspect(lua_State *L)
{
  const char *path = rn_lua_checkpath(L, 1, "inspect"); /* no NUL: C would cut it and read another state */
  lua_createtable(L, 0, 2);
  lua_newtable(L);
  rn_inspect_state st;
  char err[1024] = "";
  int rc = rn_inspect(path, push_relation, L, &st, err, sizeof err);
  if (rc) return rn_lua_error(L, "inspect: %s", err[0] ? err : rn_strerror(rc));
  lua_setfield(L, -2, "relations");
  rn_lua_setint(L, "seq", (lua_Integer)st.seq);
  lua_newtable(L);
  if ((rc = rn_inspect_outbox(path, push_waiting, L, err, sizeof err)))
    return rn_lua_error(L, "inspect: %s", err[0] ? err : rn_strerror(rc));
  lua_setfield(L, -2, "outbox_waiting");
  return 1;
}

/* runnel.state_version(path) -> a number that changes whenever the state
 * does (rn_state_version): changed when runnel.inspect would read
 * something new. Raises as runnel.inspect does. */
int rn_lua_state_version(lua_State *L)
{
  const char *path = rn_lua_checkpath(L, 1, "state_version");
  uint64_t version = 0;
  char err[1024] = "";
  int rc = rn_state_version(path, &version, err, sizeof err);
  if (rc) return rn_lua_error(L, "state_version: %s", err[0] ? err : rn_strerror(rc));
  lua_pushinteger(L, (lua_Integer)version);
  return 1;
}
