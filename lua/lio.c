/* lio.c — files for NDJSON sinks and p:run: a path, or a Lua file (io.stdout,
 * io.open(…)) kept alive by a registry reference while runnel uses it. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lbind.h"
#include "ndjson.h"
#include "sqlite.h"

typedef struct held { lpipe *lp; int ref; } held;

/* ---- Lua files runnel keeps the FILE* of ----
 * An NDJSON sink writes to its Lua file until the pipeline closes; p:run
 * reads its input (and writes rejects) until it returns, while sinks run.
 * f:close() meanwhile would free the FILE under runnel. So while runnel
 * holds a file, the handle's close function is held_close: Lua sees the
 * file closed at once, and the FILE is closed (by the io library's own
 * close function) when the last holder lets go.
 *     registry[HELD_FILES][handle] = { close = io's close function,
 *                                      n = holders, closed = Lua closed it } */
#define HELD_FILES "runnel.held_files"

/* The held entry of the handle at idx pushed (nil when not held), after
 * the HELD_FILES table. */
static int push_held_entry(lua_State *L, int idx)
{
  idx = lua_absindex(L, idx);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, HELD_FILES);
  lua_pushvalue(L, idx);
  return lua_rawget(L, -2);
}

/* f:close() while runnel holds f (called by the io library, f at 1). */
static int held_close(lua_State *L)
{
  if (push_held_entry(L, 1) == LUA_TTABLE) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "closed"); /* an existing field: raises nothing */
  }
  return luaL_fileresult(L, 1, NULL);
}

/* Holds the open Lua file at idx (lua_file gave its FILE*). May raise:
 * the entry is complete before the close function is swapped. The
 * standard files are left alone: Lua refuses to close them. */
static void hold_file(lua_State *L, int idx)
{
  luaL_Stream *st = lua_touserdata(L, idx);
  if (st->f == stdin || st->f == stdout || st->f == stderr) return;
  if (push_held_entry(L, idx) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_createtable(L, 0, 3);
    lua_pushcfunction(L, st->closef);
    lua_setfield(L, -2, "close");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "closed");
    lua_pushinteger(L, 0);
    lua_setfield(L, -2, "n");
    lua_pushvalue(L, idx);
    lua_pushvalue(L, -2);
    lua_rawset(L, -4);
  }
  lua_getfield(L, -1, "n");
  lua_Integer n = lua_tointeger(L, -1) + 1;
  lua_pop(L, 1);
  lua_pushinteger(L, n);
  lua_setfield(L, -2, "n");
  lua_pop(L, 2);
  st->closef = held_close;
}

/* Lets go of the handle at 1; the last holder gives the handle its close
 * function back, or closes the FILE when Lua closed the handle meanwhile. */
static int release_body(lua_State *L)
{
  luaL_Stream *st = lua_touserdata(L, 1);
  if (push_held_entry(L, 1) != LUA_TTABLE) return 0;
  lua_getfield(L, -1, "n");
  lua_Integer n = lua_tointeger(L, -1) - 1;
  lua_pop(L, 1);
  lua_pushinteger(L, n);
  lua_setfield(L, -2, "n");
  if (n > 0) return 0;
  lua_getfield(L, -1, "close");
  lua_CFunction close = lua_tocfunction(L, -1);
  lua_getfield(L, -2, "closed");
  bool closed = lua_toboolean(L, -1);
  lua_pop(L, 3);
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  lua_rawset(L, -3);
  if (!closed) { st->closef = close; return 0; }
  lua_pushcfunction(L, close); /* what f:close() would have done */
  lua_pushvalue(L, 1);
  lua_call(L, 1, 0);
  return 0;
}

/* Lets go of the Lua file at idx, raising nothing (a core free callback
 * calls it): an error closing it is written to stderr. */
static void release_file(lua_State *L, int idx)
{
  idx = lua_absindex(L, idx);
  lua_pushcfunction(L, release_body);
  lua_pushvalue(L, idx);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    fprintf(stderr, "runnel: closing a file: %s\n", lua_tostring(L, -1) ? lua_tostring(L, -1) : "error");
    lua_pop(L, 1);
  }
}

static void release_held(void *ctx)
{
  held *h = ctx;
  lua_State *L = h->lp->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, h->ref);
  release_file(L, -1);
  lua_pop(L, 1);
  luaL_unref(L, LUA_REGISTRYINDEX, h->ref);
  free(h);
}

/* The FILE* of a Lua file at idx, or NULL. */
static FILE *lua_file(lua_State *L, int idx)
{
  luaL_Stream *s = luaL_testudata(L, idx, LUA_FILEHANDLE);
  return s && s->closef ? s->f : NULL;
}

/* p:_ndjson_sink(rel, path|file, verb_field|false, id_field|nil) -> true | nil, err */
static int l_ndjson_sink(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *r = rn_lua_checkrel_of(L, 2, lp);
  const char *verb = lua_isstring(L, 4) ? lua_tostring(L, 4) : NULL;
  const char *id = lua_isstring(L, 5) ? lua_tostring(L, 5) : NULL;
  FILE *f = lua_file(L, 3);
  int rc;
  if (f) {
    held *h = malloc(sizeof *h);
    if (!h) return rn_lua_error(L, "out of memory");
    h->lp = lp;
    lua_pushvalue(L, 3);
    h->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    hold_file(L, 3); /* may raise: h would leak, but f is not held (out of memory only) */
    rc = rn_ndjson_sink(lp->p, r->rel, f, false, verb, id, release_held, h);
  } else if (lua_type(L, 3) == LUA_TSTRING) { /* exactly once across crashes: the path names it */
    rc = rn_ndjson_sink_path(lp->p, r->rel, rn_lua_checkpath(L, 3, "ndjson"), verb, id);
  } else {
    lua_pushnil(L);
    lua_pushfstring(L, "ndjson: expects a path or a file, got %s", luaL_typename(L, 3));
    return 2;
  }
  if (rc) return rn_lua_nil_error(L, rn_errmsg(lp->p));
  lua_pushboolean(L, 1);
  return 1;
}

/* The rejects file at path opened for writing, emptied, as fopen(path, "w")
 * but for the input itself: truncating it would lose the input before it
 * is read (errno EEXIST then, and the file is left as it was). */
static FILE *open_rejects(const char *path, FILE *in)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return NULL;
  struct stat rs, is;
  if (fstat(fd, &rs) == 0 && S_ISREG(rs.st_mode) && fstat(fileno(in), &is) == 0 && rs.st_dev == is.st_dev &&
      rs.st_ino == is.st_ino) {
    close(fd);
    errno = EEXIST;
    return NULL;
  }
  FILE *f;
  if ((S_ISREG(rs.st_mode) && ftruncate(fd, 0) != 0) || !(f = fdopen(fd, "w"))) {
    int why = errno;
    close(fd);
    errno = why;
    return NULL;
  }
  return f;
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
    const char *path = rn_lua_checkpath(L, 2, "run");
    if (strcmp(path, "-") == 0) in = stdin;
    else if (!(in = fopen(path, "r"))) return rn_lua_error(L, "run: cannot open %s: %s", path, strerror(errno));
    else own = true;
  }
  FILE *rejects = lua_file(L, 6); /* an open file (io.stderr) stays open */
  bool own_rejects = !rejects && lua_isstring(L, 6);
  if (own_rejects && !(rejects = open_rejects(lua_tostring(L, 6), in))) {
    int why = errno;
    if (own) fclose(in);
    if (why == EEXIST)
      return rn_lua_error(L, "run: the rejects file %s is the input itself", lua_tostring(L, 6));
    return rn_lua_error(L, "run: cannot open %s: %s", lua_tostring(L, 6), strerror(why));
  }
  lua_Integer max_rejects = luaL_optinteger(L, 8, 0);
  rn_run_opts o = { (size_t)luaL_optinteger(L, 4, 1000), lua_toboolean(L, 5), rejects, lua_toboolean(L, 7), name,
                    max_rejects > 0 ? (uint64_t)max_rejects : 0 };
  rn_run_stats st;
  bool hold_in = !own && lua_file(L, 2), hold_rejects = !own_rejects && rejects;
  if (hold_in) hold_file(L, 2); /* a sink may close them while the run reads and writes */
  if (hold_rejects) hold_file(L, 6);
  int rc = rn_run_ndjson(lp->p, in, &o, &st);
  if (hold_in) release_file(L, 2);
  if (hold_rejects) release_file(L, 6);
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
  if (rn_sqlite_sink(lp->p, r->rel, rn_lua_checkpath(L, 3, "sqlite"), rn_lua_checkname(L, 4, "sqlite"),
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
