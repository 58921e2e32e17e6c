/* llookup.c — lookups and stores from Lua: p:_lookup with its three kinds
 * of source, p:_store_sink, runnel.attach readers, and the pipeline clock. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "key.h"
#include "lbind.h"
#include "lookup.h"
#include "ndjson.h"
#include "row.h"
#include "sqlite.h"
#include "store_sink.h"

#define RN_ATTACHED_MT "runnel.Attached"
#define OPEN_STATES "runnel.open_states" /* registry: realpath -> pipeline (weak) */

/* ---- the clock: runnel.open{ clock = fn } ---- */

typedef struct clock_call { lpipe *lp; double *now; } clock_call;

static int clock_body(lua_State *L, void *ud, rn_err *e)
{
  clock_call *c = ud;
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->lp->clock_ref);
  lua_call(L, 0, 1);
  if (lua_type(L, -1) != LUA_TNUMBER)
    return rn_err_set(e, RN_ECALLBACK, "clock: returned %s, expected a number of seconds", luaL_typename(L, -1));
  *c->now = lua_tonumber(L, -1);
  if (!isfinite(*c->now)) /* NaN would make every entry stale, an infinity every one fresh or stale for good */
    return rn_err_set(e, RN_ECALLBACK, "clock: returned %s, expected a finite number of seconds",
                      *c->now != *c->now ? "nan" : lua_tostring(L, -1)); /* tostring: "-nan" on x86 */
  return 0;
}

/* The pipeline's clock: a clock that raises or returns no number fails
 * the lookup that asked the time. */
static int lua_clock(void *ctx, double *now, rn_err *e)
{
  lpipe *lp = ctx;
  clock_call c = { lp, now };
  return rn_lua_protect(lp, lp->L, clock_body, &c, NULL, "clock", e);
}

/* Called by l_open: the clock, and the state registered by its path so that
 * runnel.attach in this process shares its LMDB environment. */
void rn_lua_opened(lua_State *L, lpipe *lp, int pidx)
{
  if (lp->clock_ref != LUA_NOREF) {
    lp->p->clock = lua_clock;
    lp->p->clock_ctx = lp;
  }
  char real[PATH_MAX];
  if (!lp->p->store.path || !realpath(lp->p->store.path, real)) return;
  pidx = lua_absindex(L, pidx);
  if (luaL_getsubtable(L, LUA_REGISTRYINDEX, OPEN_STATES) == 0) {
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "v");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
  }
  lua_pushvalue(L, pidx);
  lua_setfield(L, -2, real);
  lua_pop(L, 1);
}

/* The pipeline of this process that has the state at path open, or NULL. */
static rn_pipeline *open_env(lua_State *L, const char *path)
{
  char real[PATH_MAX];
  rn_pipeline *env = NULL;
  if (!realpath(path, real)) return NULL;
  luaL_getsubtable(L, LUA_REGISTRYINDEX, OPEN_STATES);
  if (lua_getfield(L, -1, real) == LUA_TUSERDATA) {
    lpipe *lp = luaL_testudata(L, -1, RN_PIPELINE_MT);
    if (lp && lp->p) env = lp->p;
  }
  lua_pop(L, 2);
  return env;
}

/* ---- Lua function sources ---- */

typedef struct lsource { lpipe *lp; int ref; } lsource;

static void free_lsource(void *ctx)
{
  lsource *s = ctx;
  luaL_unref(s->lp->L, LUA_REGISTRYINDEX, s->ref);
  free(s);
}

typedef struct fetch_call {
  lsource *src;
  rn_rel *lk;
  const msgpack_object *key;
  int nkey;
  msgpack_sbuffer *row;
  int *found;
} fetch_call;

/* fn(key) -> row | nil; key is a scalar for a one-column key, else a table.
 * Protected (rn_lua_protect). */
static int fetch_body(lua_State *L, void *ud, rn_err *e)
{
  fetch_call *c = ud;
  lpipe *lp = c->src->lp;
  rn_rel *lk = c->lk;
  const rn_schema *ls = lk->schema;
  int nkey = c->nkey;
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->src->ref);
  if (nkey == 1) {
    rn_lua_pushvalue(L, &c->key[0], &ls->cols[ls->key_slots[0]]);
  } else {
    lua_createtable(L, 0, nkey);
    for (int i = 0; i < nkey; i++) {
      rn_lua_pushvalue(L, &c->key[i], &ls->cols[ls->key_slots[i]]);
      lua_setfield(L, -2, ls->cols[ls->key_slots[i]].name);
    }
  }
  lua_call(L, 1, 1);
  *c->found = !lua_isnil(L, -1);
  if (!*c->found) return 0;
  msgpack_object *vals;
  uint8_t *given;
  int rc = rn_lua_torow(lp, L, -1, lk, &vals, &given);
  for (int i = 0; !rc && i < nkey; i++) /* the key is the one asked for */
    if (!given[ls->key_slots[i]]) { vals[ls->key_slots[i]] = c->key[i]; given[ls->key_slots[i]] = 1; }
  if (!rc) rc = rn_row_normalize(ls, lk->name, RN_ROW_FULL, vals, given, &lp->p->scratch, e);
  if (!rc) rn_row_pack(ls, vals, c->row);
  else rn_lookup_bad_row(lk, c->key, e);
  return rc;
}

static int lua_fetch(void *ctx, rn_rel *lk, const msgpack_object *key, int nkey, msgpack_sbuffer *row,
                     int *found, rn_err *e)
{
  lsource *s = ctx;
  fetch_call c = { s, lk, key, nkey, row, found };
  return rn_lua_protect(s->lp, s->lp->L, fetch_body, &c, lk->name, "source", e);
}

/* p:_lookup(name, cols, key, kind, a, b, cached, ttl, size, missing) -> relation | nil, err
 *   kind "function": a = fn; "sqlite": a = path, b = table; "attach": a = path, b = store */
static int l_lookup(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  const char *name = rn_lua_checkname(L, 2, "lookup");
  luaL_checktype(L, 3, LUA_TTABLE);
  const char *kind = luaL_checkstring(L, 5);
  if (strcmp(kind, "function") == 0) luaL_checktype(L, 6, LUA_TFUNCTION);
  else { rn_lua_checkpath(L, 6, name); rn_lua_checkname(L, 7, name); } /* before anything is allocated */
  rn_err e = { .code = RN_OK };
  rn_schema *s = rn_lua_toschema(lp, L, 3, lua_istable(L, 4) ? 4 : 0, name, &e);
  if (!s) goto fail;
  rn_lookup_fetch fetch = NULL;
  void *ctx = NULL;
  rn_free_fn free_ctx = NULL;
  if (strcmp(kind, "function") == 0) {
    lsource *src = malloc(sizeof *src);
    if (!src) { rn_schema_free(s); return rn_lua_error(L, "out of memory"); }
    src->lp = lp;
    lua_pushvalue(L, 6);
    src->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    fetch = lua_fetch;
    ctx = src;
    free_ctx = free_lsource;
  } else if (strcmp(kind, "sqlite") == 0) {
    if (rn_sqlite_source(luaL_checkstring(L, 6), luaL_checkstring(L, 7), s, name, &fetch, &ctx, &free_ctx, &e)) {
      rn_schema_free(s);
      goto fail;
    }
  } else {
    const char *path = luaL_checkstring(L, 6);
    rn_attached *a;
    if (rn_attach(path, luaL_checkstring(L, 7), open_env(L, path), &a, &e)) { rn_schema_free(s); goto fail; }
    if (rn_lookup_attach_source(a, &fetch, &ctx, &free_ctx)) {
      rn_attach_close(a);
      rn_schema_free(s);
      return rn_lua_error(L, "out of memory");
    }
  }
  rn_lookup_opts o = { lua_toboolean(L, 8), luaL_optnumber(L, 9, 0), (size_t)luaL_optinteger(L, 10, 0),
                       lua_toboolean(L, 11) };
  rn_rel *rel = NULL;
  int rc = rn_declare_lookup(lp->p, name, s, fetch, ctx, free_ctx, &o, &rel);
  return rn_lua_declared(L, lp, rc, rel);
fail:
  return rn_lua_nil_error(L, e.msg);
}

/* p:_store_sink(rel, name) -> true | nil, err */
static int l_store_sink(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *r = rn_lua_checkrel_of(L, 2, lp);
  if (rn_store_sink(lp->p, r->rel, rn_lua_checkname(L, 3, "store"))) return rn_lua_nil_error(L, rn_errmsg(lp->p));
  lua_pushboolean(L, 1);
  return 1;
}

/* ---- runnel.attach(path, store): a reader ---- */

typedef struct lattached {
  rn_attached *a;         /* NULL once closed */
  msgpack_zone zone;
  char *path, *name;      /* what it reads: a lookup opens its own reader of it */
} lattached;

static lattached *check_attached(lua_State *L)
{
  lattached *la = luaL_checkudata(L, 1, RN_ATTACHED_MT);
  if (!la->a) rn_lua_error(L, "runnel: the attached store is closed");
  rn_lua_not_in_finalizer(L);
  return la;
}

/* check_attached for a read of its rows (get, rows, count, range, rank).
 *
 * Reads of attached states as dependencies (evolve_reads.h): an attach of
 * the state of the pipeline whose function runs now (runnel.attach(path)
 * of its own path, read from inside its mapper, joiner, filter …) reads
 * that pipeline's relation of the same name: the read is noted as
 * other:get's is, and the reader is rebuilt when that relation changes.
 * An attach of another state cannot be a dependency of that kind: its
 * relation evolves when its own pipeline declares it, which rebuilds
 * nothing here, and its rows change as that pipeline runs, unobserved (as
 * a lookup's source). What can be seen is taken at the reader's
 * declaration instead: an attach a function holds (an upvalue, or one of
 * a local helper function's) counts in the function's fingerprint by its
 * state's real path, its name and what identifies what it reads
 * (rn_attach_identity: kind and columns, declaration, functions, its last
 * rebuild), so attaching another relation or state, or the same relation
 * declared again otherwise or rebuilt there since (over an input that
 * changed, say), rebuilds the reader at its next declaration ("its
 * function changed"). Not seen: an attach held in a table, a global or
 * made inside the function; the attached rows' own changes; what the
 * other pipeline changes while ours runs (seen at our next declaration);
 * a store of our own state (not a relation: nothing is noted for one). */
static lattached *read_attached(lua_State *L)
{
  lattached *la = check_attached(L);
  if (lua_getiuservalue(L, 1, 1) == LUA_TUSERDATA) { /* the pipeline of this process that has its state open */
    lpipe *lp = luaL_testudata(L, -1, RN_PIPELINE_MT);
    rn_rel *rel = lp && lp->p && lp->fn_rel && strcmp(rn_attach_kind(la->a), "store") != 0 ? rn_find(lp->p, la->name)
                                                                                          : NULL;
    if (rel) rn_lua_note_read(L, lp, rel);
  }
  lua_pop(L, 1);
  return la;
}

/* core._attached_identity(v, p) -> what identifies attach v now (its
 * state's real path, its name, rn_attach_identity's bytes; only the first
 * two for an attach of p's own state, whose reads are noted), or nil when
 * v is not an attach: runnel.lua's function fingerprint (read_attached). */
static int l_attached_identity(lua_State *L)
{
  lattached *la = luaL_testudata(L, 1, RN_ATTACHED_MT);
  if (!la) return 0;
  bool own = lua_getiuservalue(L, 1, 1) == LUA_TUSERDATA && lua_rawequal(L, -1, 2);
  lua_settop(L, 1);
  char real[PATH_MAX];
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, la->path && realpath(la->path, real) ? real : la->path ? la->path : "");
  luaL_addchar(&b, '\x1f');
  luaL_addstring(&b, la->name ? la->name : "");
  luaL_addchar(&b, '\x1f');
  if (own || !la->a) {
    luaL_addstring(&b, own ? "own" : "closed");
    luaL_pushresult(&b);
    return 1;
  }
  rn_lua_not_in_finalizer(L);
  msgpack_sbuffer id;
  msgpack_sbuffer_init(&id);
  rn_err e = { .code = RN_OK };
  if (rn_attach_identity(la->a, &id, &e)) {
    msgpack_sbuffer_destroy(&id);
    return rn_lua_error_as_is(L, e.msg);
  }
  luaL_addlstring(&b, id.data ? id.data : "", id.size);
  msgpack_sbuffer_destroy(&id);
  luaL_pushresult(&b);
  return 1;
}

static int l_attach(lua_State *L)
{
  const char *path = rn_lua_checkpath(L, 1, "attach"), *name = rn_lua_checkname(L, 2, "attach");
  lattached *la = lua_newuserdatauv(L, sizeof *la, 1);
  la->a = NULL;
  la->path = strdup(path);
  la->name = strdup(name);
  bool zone = rn_zone_init(&la->zone, 1024);
  luaL_setmetatable(L, RN_ATTACHED_MT);
  if (!la->path || !la->name || !zone) return rn_lua_error(L, "out of memory");
  rn_err e = { .code = RN_OK };
  rn_pipeline *env = open_env(L, path);
  if (rn_attach(path, name, env, &la->a, &e)) return rn_lua_error_as_is(L, e.msg);
  if (env) { /* keep the pipeline whose environment it shares alive */
    char real[PATH_MAX];
    if (realpath(path, real)) {
      luaL_getsubtable(L, LUA_REGISTRYINDEX, OPEN_STATES);
      lua_getfield(L, -1, real);
      lua_setiuservalue(L, -3, 1);
      lua_pop(L, 1);
    }
  }
  return 1;
}

/* att:_source() -> path, store (what p:lookup needs to read it) */
static int l_attached_source(lua_State *L)
{
  lattached *la = check_attached(L);
  lua_pushstring(L, la->path);
  lua_pushstring(L, la->name);
  return 2;
}

/* Raises, when the relation was dropped or declared again since la was
 * attached, what rn_attach_get would say: a key refused against the
 * columns attached is not the caller's mistake then. */
static void raise_if_stale(lua_State *L, const lattached *la)
{
  msgpack_sbuffer id;
  msgpack_sbuffer_init(&id);
  rn_err e = { .code = RN_OK };
  int rc = rn_attach_identity(la->a, &id, &e);
  msgpack_sbuffer_destroy(&id);
  if (rc) rn_lua_error_as_is(L, e.msg);
}

/* A key given as a table names columns of s only (t:get refuses the others
 * too: a misspelt column would be a key column missing, or silently unread). */
static void check_key_names(lua_State *L, int at, const lattached *la, const rn_schema *s)
{
  lua_pushnil(L);
  while (lua_next(L, at)) {
    lua_pop(L, 1);
    size_t len = 0; /* clang cannot see that rn_lua_error does not return */
    const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
    if (!name || rn_schema_slot(s, name, len) < 0) {
      raise_if_stale(L, la);
      s = rn_attach_schema(la->a); /* the check may have opened the attach again, freeing s */
    }
    if (!name) rn_lua_error(L, "attach %s: get: a key table is keyed by column names, got a %s key", la->name,
                            luaL_typename(L, -1));
    char quoted[256];
    if (rn_schema_slot(s, name, len) < 0)
      rn_lua_error(L, "attach %s: get: unknown column %s", la->name, rn_json_quote(quoted, sizeof quoted, name, len));
  }
}

/* Pushes a stored row as NDJSON sinks write it (runnel query --format
 * ndjson and csv print the same): { line = "{…}", text of column 1, … },
 * each column's text its JSON value (bytes in base64, maps as objects). */
static void push_json(lua_State *L, lattached *la, const rn_schema *s, const char *row, size_t len)
{
  const msgpack_object *v = rn_row_unpack(row, len, s->ncols, &la->zone); /* NULL: damaged, line nil */
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  lua_createtable(L, s->ncols, 1);
  for (int i = 0; v && i < s->ncols; i++) {
    b.size = 0;
    rn_json_value(&b, &v[i], &s->cols[i]);
    lua_pushlstring(L, b.data ? b.data : "", b.size);
    lua_rawseti(L, -2, i + 1);
  }
  b.size = 0;
  if (v && rn_ndjson_line(s, row, len, false, NULL, NULL, NULL, NULL, &la->zone, &b) == 0 && b.size)
    lua_pushlstring(L, b.data, b.size - 1); /* without its newline */
  else
    lua_pushnil(L);
  lua_setfield(L, -2, "line");
  msgpack_sbuffer_destroy(&b);
}

/* att:get(key) -> row | nil, in one read transaction; with json, the row's
 * JSON (push_json) too: att:_get_json(key) -> row, json | nil */
static int attached_get(lua_State *L, bool json)
{
  lattached *la = read_attached(L);
  const rn_schema *s = rn_attach_schema(la->a);
  if (lua_istable(L, 2)) {
    check_key_names(L, 2, la, s);
    s = rn_attach_schema(la->a); /* the check may have opened the attach again */
  } else if (s->nkey > 1) { /* as a table's get says it */
    raise_if_stale(L, la);
    return rn_lua_error(L, "attach %s: get: a key is a table of its key columns, got %s", la->name,
                        luaL_typename(L, 2));
  }
  msgpack_sbuffer k, row;
  msgpack_sbuffer_init(&k);
  msgpack_sbuffer_init(&row);
  rn_err e = { .code = RN_OK };
  int rc = 0;
  char where[RN_NAME_MAX + 16]; /* a key of the wrong type: "attach NAME: get: column …" */
  snprintf(where, sizeof where, "attach %s: get", la->name);
  for (int i = 0; i < s->nkey && !rc; i++) {
    const rn_column *c = &s->cols[s->key_slots[i]];
    msgpack_object v;
    if (lua_istable(L, 2)) lua_getfield(L, 2, c->name); else lua_pushvalue(L, 2);
    size_t len;
    if (lua_type(L, -1) == LUA_TSTRING) {
      v.type = MSGPACK_OBJECT_STR;
      v.via.str.ptr = lua_tolstring(L, -1, &len);
      v.via.str.size = (uint32_t)len;
    } else if (lua_isinteger(L, -1)) {
      lua_Integer x = lua_tointeger(L, -1);
      if (x >= 0) { v.type = MSGPACK_OBJECT_POSITIVE_INTEGER; v.via.u64 = (uint64_t)x; }
      else { v.type = MSGPACK_OBJECT_NEGATIVE_INTEGER; v.via.i64 = x; }
    } else if (lua_isnumber(L, -1)) {
      v.type = MSGPACK_OBJECT_FLOAT64;
      v.via.f64 = lua_tonumber(L, -1);
    } else if (lua_isboolean(L, -1)) {
      v.type = MSGPACK_OBJECT_BOOLEAN;
      v.via.boolean = lua_toboolean(L, -1);
    } else {
      v.type = MSGPACK_OBJECT_NIL;
    }
    rc = v.type == MSGPACK_OBJECT_NIL
           ? rn_err_set(&e, RN_EINVAL, "attach %s: get: key column \"%s\" is missing", la->name, c->name)
           : rn_value_normalize(c, &v, &la->zone, where, &e);
    if (!rc) rn_key_append(&k, &v);
    lua_pop(L, 1);
  }
  if (rc) { /* a key of the wrong type, or the columns attached no longer the relation's */
    msgpack_sbuffer_destroy(&k);
    msgpack_sbuffer_destroy(&row);
    msgpack_zone_clear(&la->zone);
    raise_if_stale(L, la);
    return rn_lua_error_as_is(L, e.msg);
  }
  int found = 0;
  rc = rn_attach_get(la->a, k.data, k.size, &row, &found, &e);
  msgpack_sbuffer_destroy(&k);
  if (rc) {
    msgpack_sbuffer_destroy(&row);
    msgpack_zone_clear(&la->zone);
    return rn_lua_error_as_is(L, e.msg);
  }
  if (!found) {
    lua_pushnil(L);
    if (json) lua_pushnil(L);
  } else {
    s = rn_attach_schema(la->a); /* the read may have opened the attach again, freeing s (store_sink.c, reopen) */
    const msgpack_object *v = rn_row_unpack(row.data, row.size, s->ncols, &la->zone);
    lua_createtable(L, 0, s->ncols);
    for (int i = 0; v && i < s->ncols; i++) {
      if (v[i].type == MSGPACK_OBJECT_NIL) continue;
      rn_lua_pushvalue(L, &v[i], &s->cols[i]);
      lua_setfield(L, -2, s->cols[i].name);
    }
    if (json) push_json(L, la, s, row.data, row.size);
  }
  msgpack_sbuffer_destroy(&row);
  msgpack_zone_clear(&la->zone);
  return json ? 2 : 1;
}

static int l_attached_get(lua_State *L) { return attached_get(L, false); }
static int l_attached_get_json(lua_State *L) { return attached_get(L, true); }

typedef struct rows_ctx {
  lua_State *L;
  lattached *la;
  int n;
  bool json;              /* also each row's JSON (push_json) */
  lua_Integer max;        /* stop after this many rows (json_one); < 0: all */
} rows_ctx;

enum { ENOUGH = 1 };      /* json_one's stop: not an error */

/* Appends the row to the list on top of the stack. */
static int push_row(void *ctx, const char *row, size_t len)
{
  rows_ctx *r = ctx;
  const rn_schema *s = rn_attach_schema(r->la->a);
  const msgpack_object *v = rn_row_unpack(row, len, s->ncols, &r->la->zone);
  lua_createtable(r->L, 0, s->ncols);
  for (int i = 0; v && i < s->ncols; i++) {
    if (v[i].type == MSGPACK_OBJECT_NIL) continue;
    rn_lua_pushvalue(r->L, &v[i], &s->cols[i]);
    lua_setfield(r->L, -2, s->cols[i].name);
  }
  lua_rawseti(r->L, -2, ++r->n);
  if (r->json) { /* the JSON list is above the rows */
    push_json(r->L, r->la, s, row, len);
    lua_rawseti(r->L, -3, r->n);
  }
  msgpack_zone_clear(&r->la->zone);
  return 0;
}

/* Appends the row to the list on top, and its id to the list below it. */
static int push_one(void *ctx, uint64_t id, const char *row, size_t len)
{
  rows_ctx *r = ctx;
  lua_pushinteger(r->L, (lua_Integer)id);
  lua_rawseti(r->L, -3, r->n + 1); /* the ids, below the rows */
  return push_row(ctx, row, len);
}

/* As push_one with the JSON list between the ids and the rows; stops
 * (ENOUGH) once it has r->max rows. */
static int json_one(void *ctx, uint64_t id, const char *row, size_t len)
{
  rows_ctx *r = ctx;
  if (r->max >= 0 && r->n >= r->max) return ENOUGH;
  lua_pushinteger(r->L, (lua_Integer)id);
  lua_rawseti(r->L, -4, r->n + 1);
  return push_row(ctx, row, len);
}

/* for row, id in rows do: the list's own metatable keeps the ids and the position. */
static int rows_next(lua_State *L)
{
  lua_getmetatable(L, 1);
  lua_getfield(L, -1, "at");
  lua_Integer at = lua_tointeger(L, -1) + 1;
  lua_pop(L, 1);
  if (lua_rawgeti(L, 1, at) == LUA_TNIL) return 1;
  lua_pushinteger(L, at);
  lua_setfield(L, -3, "at");
  lua_getfield(L, -2, "ids");
  lua_rawgeti(L, -1, at);
  lua_remove(L, -2);
  return 2;
}

/* att:rows() -> { row… } in key order, all from one committed group; also an
 * iterator (for row, id in att:rows() do, as rel:rows(); id 0 for a store's rows). */
static int l_attached_rows(lua_State *L)
{
  lattached *la = read_attached(L);
  rows_ctx r = { L, la, 0, false, -1 };
  rn_err e = { .code = RN_OK };
  lua_newtable(L); /* the ids */
  lua_newtable(L); /* the rows */
  luaL_checkstack(L, 8, "rows");
  if (rn_attach_each(la->a, push_one, &r, &e)) return rn_lua_error_as_is(L, e.msg);
  lua_createtable(L, 0, 3);
  lua_pushvalue(L, -3);
  lua_setfield(L, -2, "ids");
  lua_pushcfunction(L, rows_next);
  lua_setfield(L, -2, "__call");
  lua_setmetatable(L, -2);
  return 1;
}

/* att:_rows_json([max]) -> rows, ids, json: att:rows()'s rows and ids as
 * plain lists (the first max only), and each row's JSON (push_json), from
 * one read transaction (runnel query). */
static int l_attached_rows_json(lua_State *L)
{
  lattached *la = read_attached(L);
  rows_ctx r = { L, la, 0, true, luaL_optinteger(L, 2, -1) };
  rn_err e = { .code = RN_OK };
  lua_settop(L, 1);
  lua_newtable(L); /* the ids */
  lua_newtable(L); /* the JSON */
  lua_newtable(L); /* the rows */
  luaL_checkstack(L, 8, "rows");
  int rc = rn_attach_each(la->a, json_one, &r, &e);
  if (rc && rc != ENOUGH) return rn_lua_error_as_is(L, e.msg);
  lua_rotate(L, -3, 1); /* rows, ids, json */
  return 3;
}

static int count_one(void *ctx, uint64_t id, const char *row, size_t len)
{
  (void)id, (void)row, (void)len;
  ++*(lua_Integer *)ctx;
  return 0;
}

/* att:columns() -> { { name, type, key = true? }… } in column order; att:kind() */
static int l_attached_columns(lua_State *L)
{
  lattached *la = check_attached(L);
  const rn_schema *s = rn_attach_schema(la->a);
  lua_createtable(L, s->ncols, 0);
  for (int i = 0; i < s->ncols; i++) {
    lua_createtable(L, 0, 3);
    lua_pushstring(L, s->cols[i].name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, s->cols[i].fields ? "struct" : rn_type_name(s->cols[i].type));
    lua_setfield(L, -2, "type");
    lua_pushboolean(L, s->cols[i].is_key);
    lua_setfield(L, -2, "key");
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushstring(L, rn_attach_kind(la->a));
  return 2;
}

static int l_attached_index_count(lua_State *L);

static const char *const RANGE_OPTS[] = { "from", "to", "offset", "limit", NULL };
static const char *const COUNT_OPTS[] = { "from", "to", NULL };

/* Checks the options table at 2 of an attached index's read (what): its
 * keys, its bounds and (range) its offset and limit, into *offset, *limit. */
static void check_attached_opts(lua_State *L, lattached *la, const char *what, const char *const *allowed,
                                lua_Integer *offset, lua_Integer *limit)
{
  if (!lua_isnoneornil(L, 2) && !lua_istable(L, 2))
    rn_lua_error(L, "attach %s: %s: expects an options table, got %s", la->name, what, luaL_typename(L, 2));
  lua_settop(L, 2);
  const char *who = lua_pushfstring(L, "attach %s", la->name); /* kept at 3 while checking */
  if (lua_isnil(L, 2)) return;
  rn_lua_check_read_opts(L, 2, who, what, allowed);
  lua_getfield(L, 2, "from");
  rn_lua_check_bound(L, -1, who, what, "from");
  lua_getfield(L, 2, "to");
  rn_lua_check_bound(L, -1, who, what, "to");
  if (offset) {
    lua_getfield(L, 2, "offset");
    *offset = rn_lua_read_count_opt(L, -1, who, what, "offset");
    lua_getfield(L, 2, "limit");
    *limit = rn_lua_read_count_opt(L, -1, who, what, "limit");
  }
  lua_settop(L, 2);
}

/* "a" or "an" before an attached relation's kind ("an aggregate", "an index"). */
static const char *kind_article(const char *kind)
{
  return kind[0] && strchr("aeiou", kind[0]) ? "an" : "a";
}

/* Raises for read what (range, rank) of an attached relation that is no
 * index: it has no order ("attach players: range: players is a table;
 * range needs an index"; the core would call any of them a store). */
static void need_index(lua_State *L, lattached *la, const char *what)
{
  if (rn_attach_is_index(la->a)) return;
  const char *kind = rn_attach_kind(la->a);
  rn_lua_error(L, "attach %s: %s: %s is %s %s; %s needs an index", la->name, what, la->name, kind_article(kind), kind,
               what);
}

/* att:count() -> rows, in one read transaction; an attached index counts
 * the rows between its bounds (att:count{ from =, to = }). */
static int l_attached_count(lua_State *L)
{
  lattached *la = read_attached(L);
  if (rn_attach_is_index(la->a)) return l_attached_index_count(L);
  check_attached_opts(L, la, "count", COUNT_OPTS, NULL, NULL);
  if (lua_istable(L, 2)) { /* bounds would be ignored: only an index has an order to bound */
    lua_getfield(L, 2, "from");
    lua_getfield(L, 2, "to");
    if (!lua_isnil(L, -1) || !lua_isnil(L, -2))
      return rn_lua_error(L, "attach %s: count: from and to need an index; %s is %s %s", la->name, la->name,
                          kind_article(rn_attach_kind(la->a)), rn_attach_kind(la->a));
  }
  lua_settop(L, 1);
  rn_err e = { .code = RN_OK };
  lua_Integer n = 0;
  if (rn_attach_each(la->a, count_one, &n, &e)) return rn_lua_error_as_is(L, e.msg);
  lua_pushinteger(L, n);
  return 1;
}

/* ---- an attached index (rel:index{} in another process): att:range{},
 * att:count{}, att:rank(v), as idx:… reads, from one committed group ---- */

/* The bound at idx (nil, a value, or a sequence for the first order
 * columns) into vals, converted against the index's columns. */
static void attached_bound(lua_State *L, lattached *la, int idx, msgpack_object *vals, rn_index_bound *b)
{
  b->vals = vals;
  b->n = 0;
  if (lua_isnil(L, idx)) return;
  bool seq = lua_type(L, idx) == LUA_TTABLE;
  int n = seq ? (int)luaL_len(L, idx) : 1;
  if (n > RN_TOP_COLS) rn_lua_error(L, "attach %s: a bound of %d values", la->name, n);
  for (int i = 0; i < n; i++) {
    if (seq) lua_rawgeti(L, idx, i + 1); /* the bound table keeps strings alive */
    else lua_pushvalue(L, idx);
    int t = lua_type(L, -1);
    if ((t != LUA_TNUMBER && t != LUA_TSTRING && t != LUA_TBOOLEAN && t != LUA_TLIGHTUSERDATA) ||
        rn_lua_tovalue(NULL, L, -1, NULL, &vals[i], 0)) /* a scalar: no pipeline needed */
      rn_lua_error(L, "attach %s: bound value #%d must be a number, string, boolean or runnel.null", la->name, i + 1);
    lua_pop(L, 1);
  }
  b->n = n;
}

static int push_indexed(void *ctx, uint64_t id, const char *row, size_t len)
{
  (void)id;
  return push_row(ctx, row, len);
}

/* Walks the attached index with the bounds at 2 and 3; pushes the rows
 * (collect) or nothing. Returns the count. */
static uint64_t attached_walk(lua_State *L, lattached *la, rn_index_walk *w, bool collect, bool rank)
{
  msgpack_object from_vals[RN_TOP_COLS], to_vals[RN_TOP_COLS];
  rn_index_bound from, to;
  attached_bound(L, la, 2, from_vals, &from);
  if (!rank) attached_bound(L, la, 3, to_vals, &to);
  rows_ctx r = { L, la, 0, false, -1 };
  if (collect) {
    lua_newtable(L);
    luaL_checkstack(L, 8, "range");
    w->fn = push_indexed;
    w->ctx = &r;
  }
  rn_err e = { .code = RN_OK };
  if (rn_attach_index(la->a, &from, rank ? NULL : &to, w, &e)) rn_lua_error_as_is(L, e.msg);
  msgpack_zone_clear(&la->zone);
  return w->count;
}

/* Puts opts (at 2: a table or nil) fields from and to at 2 and 3, offset
 * and limit at 4 and 5. */
static void spread_opts(lua_State *L, const char *what)
{
  if (!lua_isnoneornil(L, 2) && !lua_istable(L, 2)) rn_lua_error(L, "%s: expects an options table", what);
  lua_settop(L, 2);
  if (lua_isnil(L, 2)) { lua_newtable(L); lua_replace(L, 2); }
  lua_getfield(L, 2, "to");
  lua_getfield(L, 2, "offset");
  lua_getfield(L, 2, "limit");
  lua_getfield(L, 2, "from");
  lua_replace(L, 2); /* the values (and a bound's own table) are on the stack now */
}

static int next_row(lua_State *L)
{
  lua_Integer i = lua_tointeger(L, lua_upvalueindex(2)) + 1;
  lua_pushinteger(L, i);
  lua_replace(L, lua_upvalueindex(2));
  lua_rawgeti(L, lua_upvalueindex(1), i);
  return 1;
}

/* att:range{ from =, to =, offset =, limit = } -> iterator of rows in index order */
static int l_attached_range(lua_State *L)
{
  lattached *la = read_attached(L);
  need_index(L, la, "range");
  lua_Integer offset = 0, limit = 0;
  check_attached_opts(L, la, "range", RANGE_OPTS, &offset, &limit);
  spread_opts(L, "range"); /* limit at 5 */
  /* limit = 0: no row (the walk's 0 is no limit), its bounds still checked
   * by the walk: one row, counted only */
  bool none = limit == 0 && !lua_isnil(L, 5);
  rn_index_walk w = { .offset = (uint64_t)offset, .limit = none ? 1 : (uint64_t)limit };
  attached_walk(L, la, &w, !none, false);
  if (none) lua_newtable(L);
  lua_pushinteger(L, 0);
  lua_pushcclosure(L, next_row, 2);
  return 1;
}

/* att:count{ from =, to = } -> the rows between */
static int l_attached_index_count(lua_State *L)
{
  lattached *la = read_attached(L);
  check_attached_opts(L, la, "count", COUNT_OPTS, NULL, NULL);
  spread_opts(L, "count");
  rn_index_walk w = { 0 };
  lua_pushinteger(L, (lua_Integer)attached_walk(L, la, &w, false, false));
  return 1;
}

/* att:rank(values) -> 1 + the rows before values */
static int l_attached_rank(lua_State *L)
{
  lattached *la = read_attached(L);
  need_index(L, la, "rank");
  rn_index_walk w = { .before = true };
  lua_settop(L, 2);
  if (lua_isnil(L, 2)) return rn_lua_error(L, "attach %s: rank: expects a value or a list of values, got nil", la->name);
  lua_pushfstring(L, "attach %s", la->name);
  rn_lua_check_bound(L, 2, lua_tostring(L, 3), "rank", "values");
  lua_settop(L, 2);
  lua_pushinteger(L, (lua_Integer)attached_walk(L, la, &w, false, true) + 1);
  return 1;
}

static int l_attached_close(lua_State *L)
{
  lattached *la = luaL_checkudata(L, 1, RN_ATTACHED_MT);
  if (la->path) { /* not yet closed: path is set from the start */
    rn_attach_close(la->a);
    la->a = NULL;
    rn_zone_destroy(&la->zone);
    free(la->path);
    free(la->name);
    la->path = la->name = NULL;
  }
  return 0;
}

/* att:close(): as __gc, but not from another object's finalizer (it may
 * run inside a read of att). */
static int l_attached_close_method(lua_State *L)
{
  lattached *la = luaL_checkudata(L, 1, RN_ATTACHED_MT);
  if (la->path) rn_lua_not_in_finalizer(L);
  return l_attached_close(L);
}

/* p:stats().lookups: { [name] = { hits, misses, evictions, source_calls } } */
void rn_lua_push_lookup_stats(lua_State *L, rn_pipeline *p)
{
  lua_newtable(L);
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    if (r->kind != RN_REL_LOOKUP) continue;
    const rn_lookup_stats *st = rn_lookup_stats_of(r);
    lua_createtable(L, 0, 4);
    rn_lua_setint(L, "hits", (lua_Integer)st->hits);
    rn_lua_setint(L, "misses", (lua_Integer)st->misses);
    rn_lua_setint(L, "evictions", (lua_Integer)st->evictions);
    rn_lua_setint(L, "source_calls", (lua_Integer)st->source_calls);
    lua_setfield(L, -2, r->name);
  }
}

void rn_lua_lookup_open(lua_State *L, int methods, int module)
{
  static const luaL_Reg lookup_methods[] = {
    { "_lookup", l_lookup }, { "_store_sink", l_store_sink }, { NULL, NULL }
  };
  static const luaL_Reg module_funcs[] = { { "attach", l_attach }, { "_attached_identity", l_attached_identity },
                                           { NULL, NULL } };
  static const luaL_Reg attached_methods[] = {
    { "get", l_attached_get }, { "_source", l_attached_source }, { "rows", l_attached_rows },
    { "_get_json", l_attached_get_json }, { "_rows_json", l_attached_rows_json },
    { "count", l_attached_count }, { "columns", l_attached_columns }, { "close", l_attached_close_method },
    { "range", l_attached_range }, { "rank", l_attached_rank }, /* an index */
    { NULL, NULL }
  };
  static const luaL_Reg attached_meta[] = {
    { "__gc", l_attached_close }, { "__close", l_attached_close }, { NULL, NULL }
  };
  rn_lua_setfuncs_at(L, methods, lookup_methods);
  rn_lua_setfuncs_at(L, module, module_funcs);
  luaL_newmetatable(L, RN_ATTACHED_MT);
  luaL_setfuncs(L, attached_meta, 0);
  luaL_newlib(L, attached_methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}
