/* lpipeline.c — the runnel.Pipeline userdata: opening, groups, stats,
 * declarations (dispatched to the files that make each kind), closing. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "cdc.h"
#include "distinct.h"
#include "envs.h"
#include "evolve_code.h"
#include "lbind.h"
#include "outbox.h"
#include "row.h"
#include "wb.h"

/* core.open(path|nil, nosync, clock|nil, map_size|nil, writemap, groups, changes, seconds, write_back|nil,
 *           page_share|nil, max_readers|nil) -> pipeline | nil, err */
int rn_lua_open(lua_State *L)
{
  lua_Integer groups = luaL_optinteger(L, 6, 0), changes = luaL_optinteger(L, 7, 0);
  rn_open_opts opts = { .path = lua_isnoneornil(L, 1) ? NULL : rn_lua_checkpath(L, 1, "open"), /* no NUL: C would cut it */
                        .nosync = lua_toboolean(L, 2),
                        .map_size = (size_t)luaL_optinteger(L, 4, 0), .writemap = lua_toboolean(L, 5),
                        .carry_groups = groups > INT_MAX ? INT_MAX : groups < 0 ? 0 : (int)groups,
                        .carry_changes = changes < 0 ? 0 : (size_t)changes,
                        .carry_seconds = luaL_optnumber(L, 8, 0),
                        .write_back = lua_isnil(L, 9) ? 0 : lua_toboolean(L, 9) ? 1 : -1, /* 9: write_back */
                        .carry_page_share = lua_isnoneornil(L, 10) ? 0 /* 10: carry.page_share (0: off) */
                                          : luaL_checkinteger(L, 10) <= 0 ? -1
                                          : luaL_checkinteger(L, 10) > INT_MAX ? INT_MAX : (int)luaL_checkinteger(L, 10),
                        .max_readers = (unsigned)luaL_optinteger(L, 11, 0) }; /* runnel.open checked its range */
  lpipe *lp = lua_newuserdatauv(L, sizeof *lp, 1);
  memset(lp, 0, sizeof *lp);
  lp->clock_ref = LUA_NOREF;
  luaL_setmetatable(L, RN_PIPELINE_MT); /* closed until open succeeds */
  char err[RN_ERRMSG_MAX];
  /* Attaches of the state that are garbage but not yet collected would
   * refuse the writer (envs.h), and so would a pipeline on it that was
   * dropped without close: collected first. */
  void *writer = NULL;
  rn_err werr = { .code = RN_OK };
  if (opts.path && (rn_envs_readers(opts.path) || rn_envs_writer(opts.path, &writer, &werr) || writer))
    lua_gc(L, LUA_GCCOLLECT);
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
  rn_lua_gc_default(L);
  return 1;
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
/* -1: refused, nothing closed (lp->p->err says why); 1: closed, but the
 * groups it carried were lost (lost says which); 0: closed. */
static int close_pipe(lua_State *L, lpipe *lp, char *lost, size_t lostlen)
{
  if (!lp->p) return 0;
  lp->L = L;
  if (lp->depth > 0) { /* the core cannot see every callback (a scan's): the binding counts them */
    rn_err_set(&lp->p->err, RN_EMISUSE, "close: not from inside a callback");
    return -1;
  }
  if (lp->borrowed) return 0; /* refused as any from a callback (above), else let go */
  int rc = rn_pipeline_close_report(lp->p, lost, lostlen); /* frees callback contexts and relinfos through lp->L */
  if (rc == RN_EMISUSE) return -1;
  rn_lua_detach(lp);
  return rc ? 1 : 0;
}

/* close() and __close: safe to call twice; refused from inside a callback,
 * leaving the pipeline working. */
static int l_close(lua_State *L)
{
  lpipe *lp = luaL_checkudata(L, 1, RN_PIPELINE_MT);
  if (lp->p) rn_lua_not_in_finalizer(L);
  char lost[RN_ERRMSG_MAX];
  int rc = close_pipe(L, lp, lost, sizeof lost);
  if (rc < 0) return rn_lua_raise(L, lp);
  return rc ? rn_lua_error_as_is(L, lost) : 0;
}

/* __gc never raises: an unreachable pipeline has no callback running,
 * unless the Lua state closes under one (os.exit(code, true) in a sink or
 * a mapper): the pipeline cannot be closed then (its frames are below), and
 * the process ends, so a temporary state's directory is removed now.
 * Groups its close could not commit are said on stderr. */
static int l_gc(lua_State *L)
{
  char lost[RN_ERRMSG_MAX];
  lpipe *lp = luaL_checkudata(L, 1, RN_PIPELINE_MT);
  int rc = close_pipe(L, lp, lost, sizeof lost);
  if (rc > 0) fprintf(stderr, "runnel: %s\n", lost);
  if (rc < 0 && lp->p->carried) { /* the process ends with them uncommitted: said, as a close's loss is */
    uint64_t seq = lp->p->seq, durable = seq - lp->p->carried;
    fprintf(stderr, "runnel: %s: groups %llu to %llu, carried in LMDB's open transaction (sync = false), are lost: "
            "the Lua state closed inside a callback (os.exit in it), where the pipeline cannot be closed; the "
            "state holds group %llu\n", lp->p->store.path, (unsigned long long)durable + 1, (unsigned long long)seq,
            (unsigned long long)durable);
  }
  if (rc < 0) rn_store_remove_temp(&lp->p->store);
  return 0;
}

static int l_tostring(lua_State *L)
{
  lpipe *lp = luaL_checkudata(L, 1, RN_PIPELINE_MT);
  if (!lp->p) lua_pushstring(L, "runnel.Pipeline (closed)");
  else lua_pushfstring(L, "runnel.Pipeline (%s%s)", lp->p->store.path, lp->p->store.temp ? ", temporary" : "");
  return 1;
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

/* p:_distinct(in, name) -> relation | nil, err */
static int l_declare_distinct(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *in = rn_lua_checkrel_of(L, 2, lp);
  rn_rel *rel = NULL;
  int rc = rn_declare_distinct(lp->p, rn_lua_checkname(L, 3, "distinct"), in->rel, &rel);
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

/* outbox[shown] = groups (the table at -3); the keys before 0.21 in the
 * table at -1, the __index of the first: a sum for "(unnamed)". */
static void set_pending(void *ctx, const char *shown, const char *key, uint64_t groups)
{
  lua_State *L = ctx;
  lua_pushinteger(L, (lua_Integer)groups);
  lua_setfield(L, -4, shown);
  lua_getfield(L, -1, key);
  lua_Integer before = lua_tointeger(L, -1);
  lua_pop(L, 1);
  rn_lua_setint(L, key, before + (lua_Integer)groups);
}

/* outbox_unsynced[shown] = groups, in the table on top. */
static void set_unsynced(void *ctx, const char *shown, uint64_t groups)
{
  lua_State *L = ctx;
  lua_pushinteger(L, (lua_Integer)groups);
  lua_setfield(L, -2, shown);
}

/* The sinks the state keeps groups for that p did not declare (OUTBOX-10):
 * outbox[shown] = groups in the table at -2, and a row of their list, the
 * table at -1. */
static int set_undeclared(void *ctx, const rn_outbox_kept *k)
{
  lua_State *L = ctx;
  lua_pushinteger(L, (lua_Integer)k->groups);
  lua_setfield(L, -3, k->shown);
  rn_lua_push_waiting(L, k);
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  return 0;
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

static void set_entries(void *ctx, const char *name, uint64_t entries)
{
  lua_State *L = ctx;
  lua_pushinteger(L, (lua_Integer)entries);
  lua_setfield(L, -2, name);
}

static int l_stats(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  const rn_stats *st = &lp->p->stats;
  lua_createtable(L, 0, lp->p->nrels);
  if (rn_state_entries(lp->p, set_entries, L)) return rn_lua_raise(L, lp); /* first: it may grow the map, replay */
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
  lua_rotate(L, -2, 1); /* the entries, made first, into the result */
  lua_setfield(L, -2, "state");
  lua_newtable(L); /* groups waiting per durable sink */
  lua_createtable(L, 0, 1); /* its metatable */
  lua_newtable(L); /* the keys before 0.21, still read */
  rn_outbox_pending(lp->p, set_pending, L);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_newtable(L); /* outbox_undeclared: the groups no declared sink collects */
  if (rn_outbox_undeclared(lp->p, set_undeclared, L)) return rn_lua_raise(L, lp);
  lua_setfield(L, -3, "outbox_undeclared");
  lua_setfield(L, -2, "outbox");
  lua_newtable(L); /* outbox_unsynced: groups delivered, not known to be on disk */
  rn_outbox_unsynced(lp->p, set_unsynced, L);
  lua_setfield(L, -2, "outbox_unsynced");
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

/* p:_code(name, fingerprint [, code|false]) -> true [, told, old code|nil
 * [, why]] | nil, err: before relation name is declared, its functions'
 * fingerprint (evolve_code.h); a filter's or map's function to run again
 * (code; false: it cannot be). told ("kept", "unkept", "absent" or nil)
 * and old code: what its sinks' rows came from, when they are to be told a
 * change; kept without old code: why the state's copy is not run. */
static int l_code(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  const char *name = luaL_checkstring(L, 2);
  size_t len;
  const char *fingerprint = luaL_checklstring(L, 3, &len);
  if (lua_isnoneornil(L, 4)) {
    if (rn_code_record(lp->p, name, fingerprint, len)) return rn_lua_nil_error(L, rn_errmsg(lp->p));
    lua_pushboolean(L, 1);
    return 1;
  }
  rn_code_again again = { RN_CODE_UNKEPT, NULL, 0, NULL }, told;
  if (lua_type(L, 4) == LUA_TSTRING) {
    again.kind = RN_CODE_KEPT;
    again.code = (char *)lua_tolstring(L, 4, &again.len);
  }
  if (rn_code_record_again(lp->p, name, fingerprint, len, &again, &told)) return rn_lua_nil_error(L, rn_errmsg(lp->p));
  static const char *const kinds[] = { NULL, "kept", "unkept", "absent" };
  lua_pushboolean(L, 1);
  if (told.kind == RN_CODE_NONE) return 1;
  lua_pushstring(L, kinds[told.kind]);
  if (told.code) lua_pushlstring(L, told.code, told.len); /* a copy: free it before anything may raise */
  else lua_pushnil(L);
  free(told.code);
  if (!told.why) return 3;
  lua_pushstring(L, told.why);
  return 4;
}

/* p:_batches(n): how many p:batch(fn) calls run now (runnel.lua's count). */
static int l_batches(lua_State *L)
{
  lpipe *lp = luaL_checkudata(L, 1, RN_PIPELINE_MT); /* closed too: the batch's guard runs on every way out */
  lp->batches = (int)luaL_checkinteger(L, 2);
  return 0;
}

static const luaL_Reg pipeline_methods[] = {
  { "_batches", l_batches },
  { "_code", l_code },
  { "_declare", l_declare },
  { "_filter", rn_lua_declare_filter },
  { "_map", rn_lua_declare_map },
  { "_sink", rn_lua_add_sink },
  { "_cdc", l_declare_cdc },
  { "_distinct", l_declare_distinct },
  { "_top", rn_lua_declare_top }, { "_index", rn_lua_declare_index }, /* lorder.c */
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

void rn_lua_pipeline_open(lua_State *L, int module)
{
  module = lua_absindex(L, module);
  luaL_newmetatable(L, RN_PIPELINE_MT);
  luaL_setfuncs(L, pipeline_meta, 0);
  luaL_newlib(L, pipeline_methods);
  int methods = lua_gettop(L);
  rn_lua_io_open(L, methods);
  rn_lua_live_open(L, methods);
  rn_lua_jetstream_open(L, methods);
  rn_lua_lookup_open(L, methods, module);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}
