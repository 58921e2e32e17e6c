/* join_kept_fixture.h — a join with a joiner over teams and players
 * (join_fixture.h's pid_tname_joiner, counting its calls), a sink noting
 * the old tname of the last UPDATE, and a rewrite of its "ji:" entries
 * straight in LMDB: for the C tests of the entries a join keeps
 * (test_join_kept.c, test_join_damaged9.c). Include it once per test. */
#ifndef JOIN_KEPT_FIXTURE_H
#define JOIN_KEPT_FIXTURE_H

#include <lmdb.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "join_fixture.h"
#include "join.h"
#include "pipeline.h"
#include "row.h"
#include "store.h"

static int joiner_calls;
static char last_old[64]; /* the tname of the last UPDATE's old row the sink saw */

static int sink(void *ctx, rn_rel *rel, const rn_change *c, const rn_sink_info *info, rn_err *e)
{
  (void)ctx; (void)info; (void)e;
  if (c->verb != RN_UPDATE) return 0;
  msgpack_zone z;
  msgpack_zone_init(&z, 256);
  const msgpack_object *o = rn_row_unpack(c->old, c->old_len, rel->schema->ncols, &z);
  snprintf(last_old, sizeof last_old, "%.*s", (int)o[1].via.str.size, o[1].via.str.ptr);
  msgpack_zone_destroy(&z);
  return 0;
}

static rn_rel *table(rn_pipeline *p, const char *name, const char *col, rn_type type)
{
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "id", 2, RN_T_INT, false, NULL, &p->err);
  rn_schema_add(s, col, strlen(col), type, false, NULL, &p->err);
  int key = 0;
  rn_schema_set_key(s, &key, 1, name, &p->err);
  rn_rel *r = NULL;
  CHECK(rn_declare_source(p, name, RN_REL_TABLE, s, &r) == 0);
  return r;
}

static rn_rel *teams, *players, *joined;

/* The state at dir opened, teams and players declared, then the join tj:
 * its declaration's code. */
static int declare_state(const char *dir, rn_pipeline **out)
{
  rn_open_opts opts = { .path = dir };
  CHECK(rn_pipeline_open(&opts, out, NULL, 0) == 0);
  rn_pipeline *p = *out;
  teams = table(p, "teams", "name", RN_T_STRING);
  players = table(p, "players", "team", RN_T_INT);
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "pid", 3, RN_T_INT, false, NULL, &p->err);
  rn_schema_add(s, "tname", 5, RN_T_STRING, true, NULL, &p->err);
  int key = 0, on = 1;
  rn_schema_set_key(s, &key, 1, "tj", &p->err);
  rn_join_spec spec = { RN_JOIN_LEFT, &on, 1, s, NULL, NULL, 0, NULL, NULL };
  rn_join_fns fns = { .joiner = pid_tname_joiner, .ctx = &joiner_calls };
  joined = NULL;
  return rn_declare_join(p, "tj", players, teams, &spec, &fns, &joined);
}

static rn_pipeline *open_state(const char *dir)
{
  rn_pipeline *p;
  CHECK(declare_state(dir, &p) == 0);
  CHECK(rn_sink_add(p, joined, false, sink, NULL, NULL, NULL) == 0);
  return p;
}

static int put(rn_rel *r, int64_t id, const char *name, int64_t team, bool update)
{
  msgpack_object v[2] = { { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = (uint64_t)id } };
  if (name) v[1] = (msgpack_object){ .type = MSGPACK_OBJECT_STR, .via.str = { (uint32_t)strlen(name), name } };
  else v[1] = (msgpack_object){ .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = (uint64_t)team };
  uint8_t given[2] = { 1, 1 };
  return update ? rn_table_update(r, v, given) : rn_table_insert(r, v, given);
}

/* Rewrites every "ji:tj" entry as fn makes it (an older state's, or damage). */
static void rewrite_entries(const char *dir, void (*fn)(MDB_val *v, char *buf))
{
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  MDB_cursor *cur;
  CHECK(mdb_env_create(&env) == 0);
  mdb_env_set_maxdbs(env, 64);
  CHECK(mdb_env_open(env, dir, 0, 0644) == 0);
  CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0);
  CHECK(mdb_dbi_open(txn, "ji:tj", 0, &dbi) == 0);
  CHECK(mdb_set_compare(txn, dbi, rn_store_key_cmp) == 0); /* runnel's key order (store.h) */
  CHECK(mdb_cursor_open(txn, dbi, &cur) == 0);
  MDB_val k, v;
  for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    char buf[512], key[512];
    memcpy(key, k.mv_data, k.mv_size); /* k points into the page the put rewrites */
    k.mv_data = key;
    fn(&v, buf);
    CHECK(mdb_cursor_put(cur, &k, &v, MDB_CURRENT) == 0);
  }
  mdb_cursor_close(cur);
  CHECK(mdb_txn_commit(txn) == 0);
  mdb_env_close(env);
}


#endif
