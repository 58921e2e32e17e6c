/* lpipeline.c — the runnel.Pipeline userdata and the module's entry point. */
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aggregate.h"
#include "cdc.h"
#include "json.h"
#include "lbind.h"
#include "outbox.h"
#include "row.h"

#define RN_DSL_SOURCE "runnel.dsl_source" /* registry: the chunk name of runnel.lua */

/* core._dsl(fn): fn is defined in runnel.lua; its chunk names the DSL's
 * frames, which rn_lua_where skips. */
static int l_dsl(lua_State *L)
{
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_Debug ar;
  lua_pushvalue(L, 1);
  lua_getinfo(L, ">S", &ar);
  lua_pushstring(L, ar.source);
  lua_setfield(L, LUA_REGISTRYINDEX, RN_DSL_SOURCE);
  return 0;
}

void rn_lua_where(lua_State *L)
{
  lua_getfield(L, LUA_REGISTRYINDEX, RN_DSL_SOURCE);
  const char *dsl = lua_tostring(L, -1);
  lua_Debug ar;
  int level = 1;
  while (lua_getstack(L, level, &ar) && lua_getinfo(L, "Sl", &ar) && dsl && strcmp(ar.source, dsl) == 0)
    level++;
  lua_pop(L, 1);
  if (lua_getstack(L, level, &ar) && lua_getinfo(L, "Sl", &ar) && ar.currentline > 0)
    lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
  else
    lua_pushliteral(L, ""); /* called from C (pcall, a host), as luaL_where says */
}

int rn_lua_error(lua_State *L, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  rn_lua_where(L);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lua_concat(L, 2);
  return lua_error(L);
}

const char *rn_lua_checkname(lua_State *L, int idx, const char *what)
{
  size_t len;
  const char *name = luaL_checklstring(L, idx, &len);
  if (len == 0) rn_lua_error(L, "%s: a name must not be empty", what);
  if (memchr(name, '\0', len)) {
    luaL_Buffer b; /* the name with its NUL bytes shown as \0 */
    luaL_buffinit(L, &b);
    for (size_t i = 0; i < len; i++) {
      if (name[i]) luaL_addchar(&b, name[i]);
      else luaL_addstring(&b, "\\0");
    }
    luaL_pushresult(&b);
    rn_lua_error(L, "%s: the name \"%s\" holds a NUL byte (names hold none)", what, lua_tostring(L, -1));
  }
  return name;
}

/* core._raise(msg): runnel.lua's error(), at the user's line. A value that
 * is not a message (a table a user's attach raised) passes as it is. */
static int l_raise(lua_State *L)
{
  if (lua_type(L, 1) != LUA_TSTRING) {
    lua_settop(L, 1);
    return lua_error(L);
  }
  return rn_lua_error(L, "%s", lua_tostring(L, 1));
}

lpipe *rn_lua_checkpipe(lua_State *L, int idx)
{
  lpipe *lp = luaL_checkudata(L, idx, RN_PIPELINE_MT);
  if (!lp->p) rn_lua_error(L, "runnel: the pipeline is closed");
  lp->L = L;
  return lp;
}

int rn_lua_raise(lua_State *L, lpipe *lp)
{
  return rn_lua_error(L, "%s", lp->p ? rn_errmsg(lp->p) : "runnel: the pipeline is closed");
}

int rn_lua_fail(lua_State *L, lpipe *lp)
{
  rn_group_fail(lp->p, lp->p->err.code ? lp->p->err.code : RN_EINVAL, lp->p->err.msg);
  return rn_lua_raise(L, lp);
}

/* core.open(path|nil, nosync, clock|nil, map_size|nil, writemap) -> pipeline | nil, err */
static int l_open(lua_State *L)
{
  lua_Integer groups = luaL_optinteger(L, 6, 0), changes = luaL_optinteger(L, 7, 0);
  rn_open_opts opts = { .path = luaL_optstring(L, 1, NULL), .nosync = lua_toboolean(L, 2),
                        .map_size = (size_t)luaL_optinteger(L, 4, 0), .writemap = lua_toboolean(L, 5),
                        .carry_groups = groups > INT_MAX ? INT_MAX : groups < 0 ? 0 : (int)groups,
                        .carry_changes = changes < 0 ? 0 : (size_t)changes,
                        .carry_seconds = luaL_optnumber(L, 8, 0) };
  lpipe *lp = lua_newuserdatauv(L, sizeof *lp, 1);
  memset(lp, 0, sizeof *lp);
  lp->clock_ref = LUA_NOREF;
  luaL_setmetatable(L, RN_PIPELINE_MT); /* closed until open succeeds */
  char err[RN_ERRMSG_MAX];
  if (rn_pipeline_open(&opts, &lp->p, err, sizeof err) != 0) return rn_lua_nil_error(L, err);
  if (!msgpack_zone_init(&lp->zone, 4096)) { /* a failed zone cannot even be destroyed */
    rn_pipeline_close(lp->p);
    lp->p = NULL;
    return rn_lua_nil_error(L, "out of memory");
  }
  lp->L = L;
  lp->p->binding = lp; /* relinfos find their lua_State through it */
  if (!lua_isnoneornil(L, 3)) {
    lua_pushvalue(L, 3);
    lp->clock_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  rn_lua_opened(L, lp, -1);
  return 1;
}

static void free_relinfo(void *ctx)
{
  lrelinfo *ri = ctx;
  luaL_unref(ri->lp->L, LUA_REGISTRYINDEX, ri->names_ref);
  luaL_unref(ri->lp->L, LUA_REGISTRYINDEX, ri->slots_ref);
  free(ri);
}

/* The pipeline is gone (closed from Lua, or by its host): forget it. */
void rn_lua_detach(lpipe *lp)
{
  if (!lp->p) return;
  lp->p = NULL;
  luaL_unref(lp->L, LUA_REGISTRYINDEX, lp->clock_ref);
  lp->clock_ref = LUA_NOREF;
  msgpack_zone_destroy(&lp->zone);
}

/* Closes lp's pipeline unless a callback of it is running: 0, or -1 with
 * the refusal in p->err. A host's pipeline is the host's to close: Lua lets
 * go of it. */
static int close_pipe(lua_State *L, lpipe *lp)
{
  if (!lp->p) return 0;
  lp->L = L;
  if (lp->borrowed) return 0;
  if (lp->depth > 0) { /* the core cannot see every callback (a scan's): the binding counts them */
    rn_err_set(&lp->p->err, RN_EMISUSE, "close: not from inside a callback");
    return -1;
  }
  if (rn_pipeline_close(lp->p)) return -1; /* frees callback contexts and relinfos through lp->L */
  rn_lua_detach(lp);
  return 0;
}

/* close() and __close: safe to call twice; refused from inside a callback,
 * leaving the pipeline working. */
static int l_close(lua_State *L)
{
  lpipe *lp = luaL_checkudata(L, 1, RN_PIPELINE_MT);
  return close_pipe(L, lp) ? rn_lua_raise(L, lp) : 0;
}

/* __gc never raises: an unreachable pipeline has no callback running. */
static int l_gc(lua_State *L)
{
  close_pipe(L, luaL_checkudata(L, 1, RN_PIPELINE_MT));
  return 0;
}

static int l_tostring(lua_State *L)
{
  lpipe *lp = luaL_checkudata(L, 1, RN_PIPELINE_MT);
  if (!lp->p) lua_pushstring(L, "runnel.Pipeline (closed)");
  else lua_pushfstring(L, "runnel.Pipeline (%s%s)", lp->p->store.path, lp->p->store.temp ? ", temporary" : "");
  return 1;
}

/* Fills ri (index 1) for the relation at index 2: its names by slot and
 * slots by name, anchored in the registry. Every step may raise. */
static int relinfo_body(lua_State *L)
{
  lrelinfo *ri = lua_touserdata(L, 1);
  const rn_schema *s = ((rn_rel *)lua_touserdata(L, 2))->schema;
  lua_createtable(L, s->ncols, 0);
  lua_createtable(L, 0, s->ncols);
  for (int i = 0; i < s->ncols; i++) {
    ri->names[i] = lua_pushlstring(L, s->cols[i].name, s->cols[i].name_len);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -4, i + 1);
    lua_pushinteger(L, i + 1);
    lua_rawset(L, -3);
  }
  ri->slots_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  ri->names_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

int rn_lua_relinfo(lua_State *L, rn_rel *rel)
{
  if (rel->udata) return 0;
  lrelinfo *ri = malloc(sizeof *ri + sizeof *ri->names * (size_t)rel->schema->ncols);
  if (!ri) return rn_lua_error(L, "out of memory");
  ri->lp = rel->p->binding;
  ri->ncols = rel->schema->ncols;
  ri->slots_ref = ri->names_ref = LUA_NOREF;
  lua_pushcfunction(L, relinfo_body);
  lua_pushlightuserdata(L, ri);
  lua_pushlightuserdata(L, rel);
  if (lua_pcall(L, 2, 0, 0) != LUA_OK) { /* out of memory: ri would leak if it raised in place */
    luaL_unref(L, LUA_REGISTRYINDEX, ri->slots_ref);
    free(ri);
    return lua_error(L);
  }
  rel->udata = ri;
  rel->udata_free = free_relinfo;
  return 0;
}

/* A column spec is { name = s, type = s, null = b, default = v|nil,
 * has_default = b, fields = {specs…}|nil }, already checked by runnel.lua. */
static int add_column(lpipe *lp, lua_State *L, rn_schema *s, int spec, const char *rel, rn_err *e)
{
  lua_getfield(L, spec, "name");
  size_t nlen;
  const char *name = lua_tolstring(L, -1, &nlen);
  lua_getfield(L, spec, "type");
  rn_type type = RN_T_ANY;
  rn_type_parse(lua_tostring(L, -1), &type);
  lua_getfield(L, spec, "null");
  bool nullable = lua_toboolean(L, -1);
  lua_getfield(L, spec, "fields");
  rn_schema *fields = NULL;
  if (lua_istable(L, -1)) {
    fields = rn_lua_toschema(lp, L, lua_gettop(L), 0, rel, e);
    if (!fields) { lua_pop(L, 4); return e->code; }
  }
  int slot = rn_schema_add(s, name, nlen, type, nullable, fields, e);
  lua_pop(L, 4);
  if (slot < 0) {
    rn_err_prefix(e, rel);
    return e->code;
  }
  lua_getfield(L, spec, "has_default");
  bool has_default = lua_toboolean(L, -1);
  lua_getfield(L, spec, "default");
  int rc = 0;
  if (has_default) {
    msgpack_object v;
    rc = rn_lua_tovalue(lp, L, -1, &s->cols[slot], &v, 0);
    if (rc) *e = lp->p->err;
    else rc = rn_schema_set_default(s, slot, &v, rel, e);
  }
  lua_pop(L, 2);
  return rc;
}

rn_schema *rn_lua_toschema(lpipe *lp, lua_State *L, int cols_idx, int key_idx,
                           const char *rel, rn_err *e)
{
  rn_schema *s = rn_schema_new();
  if (!s) { rn_err_set(e, RN_ENOMEM, "out of memory"); return NULL; }
  lua_Integer n = (lua_Integer)lua_rawlen(L, cols_idx);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, cols_idx, i);
    int rc = add_column(lp, L, s, lua_gettop(L), rel, e);
    lua_pop(L, 1);
    if (rc) {
      rn_schema_free(s);
      return NULL;
    }
  }
  if (key_idx) {
    int nkey = (int)lua_rawlen(L, key_idx);
    int slots[nkey ? nkey : 1];
    for (int i = 0; i < nkey; i++) {
      lua_rawgeti(L, key_idx, i + 1);
      size_t len;
      const char *name = lua_tolstring(L, -1, &len);
      slots[i] = rn_schema_slot(s, name, len);
      if (slots[i] < 0) rn_err_set(e, RN_EINVAL, "%s: key column \"%s\" is not a declared column", rel, name);
      lua_pop(L, 1);
      if (slots[i] < 0) { rn_schema_free(s); return NULL; }
    }
    if (rn_schema_set_key(s, slots, nkey, rel, e)) { rn_schema_free(s); return NULL; }
  }
  return s;
}

/* p:_declare(kind, name, cols, key) -> relation | nil, err */
static int l_declare(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  const char *kind = luaL_checkstring(L, 2);
  const char *name = rn_lua_checkname(L, 3, kind);
  luaL_checktype(L, 4, LUA_TTABLE);
  rn_err e = { .code = RN_OK };
  rn_schema *s = rn_lua_toschema(lp, L, 4, lua_istable(L, 5) ? 5 : 0, name, &e);
  if (!s) return rn_lua_nil_error(L, e.msg);
  rn_rel *rel = NULL;
  int rc = rn_declare_source(lp->p, name, strcmp(kind, "stream") == 0 ? RN_REL_STREAM : RN_REL_TABLE, s, &rel);
  return rn_lua_declared(L, lp, rc, rel);
}

/* p:_cdc(in, name, preimage 0|1|2, postimage, format) -> relation | nil, err */
static int l_declare_cdc(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *in = rn_lua_checkrel_of(L, 2, lp);
  static const char *const formats[] = { "log", "debezium", "flink", NULL };
  rn_cdc_opts o = { (int)luaL_checkinteger(L, 4), lua_toboolean(L, 5),
                    (rn_cdc_format)luaL_checkoption(L, 6, "log", formats) };
  rn_rel *rel = NULL;
  int rc = rn_declare_cdc(lp->p, rn_lua_checkname(L, 3, "cdc"), in->rel, &o, &rel);
  return rn_lua_declared(L, lp, rc, rel);
}

static int l_begin(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  return rn_begin(lp->p) ? rn_lua_raise(L, lp) : 0;
}

static int l_commit(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  if (rn_commit(lp->p)) return rn_lua_raise(L, lp);
  lua_pushinteger(L, (lua_Integer)rn_seq(lp->p));
  return 1;
}

static int l_rollback(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  return rn_rollback(lp->p) ? rn_lua_raise(L, lp) : 0;
}

static int l_flush(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  return rn_flush(lp->p) ? rn_lua_raise(L, lp) : 0;
}

/* p:deliver(): delivers every group waiting for a durable sink; raises the
 * first failure (the groups stay committed and waiting). */
static int l_deliver(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  return rn_deliver(lp->p) ? rn_lua_raise(L, lp) : 0;
}

static void set_pending(void *ctx, const char *name, uint64_t groups)
{
  lua_State *L = ctx;
  rn_lua_setint(L, name, (lua_Integer)groups);
}

static int l_seq(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lua_pushinteger(L, (lua_Integer)rn_seq(lp->p));
  return 1;
}

static int l_in_group(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lua_pushboolean(L, lp->p->state != RN_IDLE);
  return 1;
}

/* { [aggregate name] = count(aggregate) } over the pipeline's aggregates. */
static void push_per_aggregate(lua_State *L, rn_pipeline *p, uint64_t (*count)(const rn_rel *))
{
  lua_newtable(L);
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    if (r->kind != RN_REL_AGGREGATE) continue;
    lua_pushinteger(L, (lua_Integer)count(r));
    lua_setfield(L, -2, r->name);
  }
}

/* { [relation name] = LMDB entries it keeps } (rows, indexes, operator state). */
static void push_state_entries(lua_State *L, rn_pipeline *p)
{
  lua_newtable(L);
  MDB_txn *txn;
  if (rn_store_reader(&p->store, &txn, &p->err)) return;
  for (int i = 0; i < p->nrels; i++) {
    lua_pushinteger(L, (lua_Integer)rn_store_entries(txn, p->rels[i]->name));
    lua_setfield(L, -2, p->rels[i]->name);
  }
  rn_store_reader_done(&p->store);
}

static int l_stats(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  const rn_stats *st = &lp->p->stats;
  lua_createtable(L, 0, 5);
  rn_lua_setint(L, "seq", (lua_Integer)rn_seq(lp->p));
  rn_lua_setint(L, "groups", (lua_Integer)st->groups);
  rn_lua_setint(L, "changes", (lua_Integer)st->changes);
  rn_lua_setint(L, "rollbacks", (lua_Integer)st->rollbacks);
  rn_lua_setint(L, "map_size", (lua_Integer)lp->p->store.mapsize);
  rn_lua_setint(L, "lmdb_commits", (lua_Integer)st->lmdb_commits);
  rn_lua_push_lookup_stats(L, lp->p);
  lua_setfield(L, -2, "lookups");
  push_per_aggregate(L, lp->p, rn_aggregate_late);
  lua_setfield(L, -2, "late");
  push_per_aggregate(L, lp->p, rn_aggregate_final);
  lua_setfield(L, -2, "final");
  push_state_entries(L, lp->p);
  lua_setfield(L, -2, "state");
  lua_newtable(L); /* groups waiting per durable sink */
  rn_outbox_pending(lp->p, set_pending, L);
  lua_setfield(L, -2, "outbox");
  return 1;
}

static int l_path(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lua_pushstring(L, lp->p->store.path);
  lua_pushboolean(L, lp->p->store.temp);
  return 2;
}

/* p:relations() -> { Relation… } in declaration order */
static int l_relations(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lua_createtable(L, lp->p->nrels, 0);
  for (int i = 0; i < lp->p->nrels; i++) {
    rn_lua_pushrel(L, 1, lp->p->rels[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static const luaL_Reg pipeline_methods[] = {
  { "_declare", l_declare },
  { "_filter", rn_lua_declare_filter },
  { "_map", rn_lua_declare_map },
  { "_sink", rn_lua_add_sink },
  { "_cdc", l_declare_cdc },
  { "_join", rn_lua_declare_join },
  { "_select", rn_lua_declare_select },
  { "_aggregate", rn_lua_declare_aggregate },
  { "begin", l_begin },
  { "commit", l_commit },
  { "rollback", l_rollback },
  { "seq", l_seq },
  { "flush", l_flush },
  { "deliver", l_deliver },
  { "on_durable", rn_lua_on_durable },
  { "in_group", l_in_group },
  { "stats", l_stats },
  { "path", l_path },
  { "relations", l_relations },
  { "close", l_close },
  { NULL, NULL }
};

static const luaL_Reg pipeline_meta[] = {
  { "__gc", l_gc },
  { "__close", l_close },
  { "__tostring", l_tostring },
  { NULL, NULL }
};

/* runnel.json_decode(text) -> value | nil, err (JSON null: runnel.null) */
static int l_json_decode(lua_State *L)
{
  size_t len;
  const char *text = luaL_checklstring(L, 1, &len);
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

static int l_strerror(lua_State *L)
{
  lua_pushstring(L, rn_strerror((int)luaL_checkinteger(L, 1)));
  return 1;
}

RN_API int luaopen_runnel_core(lua_State *L);
RN_API int luaopen_runnel_core(lua_State *L)
{
  luaL_newmetatable(L, RN_PIPELINE_MT);
  luaL_setfuncs(L, pipeline_meta, 0);
  luaL_newlib(L, pipeline_methods);
  int methods = lua_gettop(L);
  rn_lua_io_open(L, methods);
  rn_lua_relation_open(L);

  lua_newtable(L);
  rn_lua_lookup_open(L, methods, lua_gettop(L));
  lua_pushvalue(L, methods);
  lua_setfield(L, methods - 1, "__index"); /* the Pipeline metatable */
  lua_remove(L, methods);
  lua_remove(L, methods - 1);
  static const luaL_Reg module_funcs[] = {
    { "open", l_open }, { "strerror", l_strerror }, { "now", l_now }, { "json_decode", l_json_decode },
    { "_dsl", l_dsl }, { "_raise", l_raise }, { NULL, NULL }
  };
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
