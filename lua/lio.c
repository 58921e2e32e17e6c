/* lio.c — files for NDJSON sinks and p:run: a path, or a Lua file (io.stdout,
 * io.open(…)) kept alive by a registry reference while runnel uses it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lbind.h"
#include "ndjson.h"
#include "sqlite.h"

typedef struct held { lpipe *lp; int ref; } held;

static void release_held(void *ctx)
{
  held *h = ctx;
  luaL_unref(h->lp->L, LUA_REGISTRYINDEX, h->ref);
  free(h);
}

/* The FILE* of a Lua file at idx, or NULL. */
static FILE *lua_file(lua_State *L, int idx)
{
  luaL_Stream *s = luaL_testudata(L, idx, LUA_FILEHANDLE);
  return s && s->closef ? s->f : NULL;
}

/* p:_ndjson_sink(rel, path|file, verb_field|false) -> true | nil, err */
static int l_ndjson_sink(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *r = rn_lua_checkrel_of(L, 2, lp);
  const char *verb = lua_isstring(L, 4) ? lua_tostring(L, 4) : NULL;
  FILE *f = lua_file(L, 3);
  int rc;
  if (f) {
    held *h = malloc(sizeof *h);
    if (!h) return rn_lua_error(L, "out of memory");
    h->lp = lp;
    lua_pushvalue(L, 3);
    h->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    rc = rn_ndjson_sink(lp->p, r->rel, f, false, verb, release_held, h);
  } else if (lua_type(L, 3) == LUA_TSTRING) { /* exactly once across crashes: the path names it */
    rc = rn_ndjson_sink_path(lp->p, r->rel, rn_lua_checkname(L, 3, "ndjson"), verb);
  } else {
    lua_pushnil(L);
    lua_pushfstring(L, "ndjson: expects a path or a file, got %s", luaL_typename(L, 3));
    return 2;
  }
  if (rc) return rn_lua_nil_error(L, rn_errmsg(lp->p));
  lua_pushboolean(L, 1);
  return 1;
}

/* p:_run(path|file|"-", name, batch, skip, rejects_path|file|nil, progress, max_rejects|nil)
 *   -> stats (raises on error) */
static int l_run(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  FILE *in = lua_file(L, 2);
  bool own = false;
  const char *name = luaL_checkstring(L, 3);
  if (!in) {
    const char *path = rn_lua_checkname(L, 2, "run");
    if (strcmp(path, "-") == 0) in = stdin;
    else if (!(in = fopen(path, "r"))) return rn_lua_error(L, "run: cannot open %s: %s", path, strerror(errno));
    else own = true;
  }
  FILE *rejects = lua_file(L, 6); /* an open file (io.stderr) stays open */
  bool own_rejects = !rejects && lua_isstring(L, 6);
  if (own_rejects && !(rejects = fopen(lua_tostring(L, 6), "w"))) {
    if (own) fclose(in);
    return rn_lua_error(L, "run: cannot open %s: %s", lua_tostring(L, 6), strerror(errno));
  }
  lua_Integer max_rejects = luaL_optinteger(L, 8, 0);
  rn_run_opts o = { (size_t)luaL_optinteger(L, 4, 1000), lua_toboolean(L, 5), rejects, lua_toboolean(L, 7), name,
                    max_rejects > 0 ? (uint64_t)max_rejects : 0 };
  rn_run_stats st;
  int rc = rn_run_ndjson(lp->p, in, &o, &st);
  if (own) fclose(in);
  if (own_rejects) fclose(rejects);
  lp->L = L;
  if (rc) return rn_lua_raise(L, lp);
  rn_lua_push_run_stats(L, &st, "lines");
  return 1;
}

void rn_lua_push_run_stats(lua_State *L, const rn_run_stats *st, const char *lines)
{
  lua_createtable(L, 0, 4);
  rn_lua_setint(L, lines, (lua_Integer)st->lines);
  rn_lua_setint(L, "applied", (lua_Integer)st->applied);
  rn_lua_setint(L, "rejected", (lua_Integer)st->rejected);
  rn_lua_setint(L, "groups", (lua_Integer)st->groups);
}

/* p:_sqlite_sink(rel, path, table, busy_ms) -> true | nil, err */
static int l_sqlite_sink(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *r = rn_lua_checkrel_of(L, 2, lp);
  lua_Integer busy = luaL_optinteger(L, 5, -1);
  if (rn_sqlite_sink(lp->p, r->rel, rn_lua_checkname(L, 3, "sqlite"), rn_lua_checkname(L, 4, "sqlite"),
                     busy < 0 ? -1 : busy > INT32_MAX ? INT32_MAX : (int)busy))
    return rn_lua_nil_error(L, rn_errmsg(lp->p));
  lua_pushboolean(L, 1);
  return 1;
}

void rn_lua_io_open(lua_State *L, int methods)
{
  static const luaL_Reg io_methods[] = {
    { "_sqlite_sink", l_sqlite_sink }, { "_ndjson_sink", l_ndjson_sink }, { "_run", l_run }, { NULL, NULL }
  };
  rn_lua_setfuncs_at(L, methods, io_methods);
}
