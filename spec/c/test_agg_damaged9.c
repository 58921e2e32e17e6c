/* test_agg_damaged9.c — an aggregate's min/max value counts ("am:",
 * core/aggregate.h) damaged in the state: a count cut short is refused
 * naming the aggregate; it was read past its end, and a value whose rows
 * were gone stayed the minimum. */
#include <lmdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aggregate.h"
#include "check.h"
#include "row.h"
#include "store.h"

static rn_rel *declare_input(rn_pipeline *p)
{
  rn_err e;
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "id", 2, RN_T_INT, false, NULL, &e);
  rn_schema_add(s, "x", 1, RN_T_INT, false, NULL, &e);
  int key = 0;
  rn_schema_set_key(s, &key, 1, "t", &e);
  rn_rel *r = NULL;
  CHECK(rn_declare_source(p, "t", RN_REL_TABLE, s, &r) == 0);
  return r;
}

/* agg = t:aggregate{ m = min("x") } */
static rn_rel *declare_agg(rn_pipeline *p, rn_rel *in)
{
  rn_agg_spec specs[1] = { { "m", RN_AGG_MIN, 1 } };
  rn_window w = { .kind = RN_WINDOW_NONE };
  rn_agg_fns fns = { 0 };
  rn_rel *out = NULL;
  CHECK(rn_declare_aggregate(p, "agg", in, NULL, 0, &w, specs, 1, &fns, &out) == 0);
  return out;
}

static int put(rn_rel *t, int (*fn)(rn_rel *, msgpack_object *, uint8_t *), int64_t id, int64_t x)
{
  msgpack_object v[2];
  v[0].type = MSGPACK_OBJECT_POSITIVE_INTEGER;
  v[0].via.u64 = (uint64_t)id;
  v[1].type = MSGPACK_OBJECT_POSITIVE_INTEGER;
  v[1].via.u64 = (uint64_t)x;
  uint8_t given[2] = { 1, 1 };
  return fn(t, v, given);
}

/* Every "am:agg" count cut to its first 3 bytes. */
static void cut_counts(const char *dir)
{
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  MDB_cursor *cur;
  CHECK(mdb_env_create(&env) == 0);
  mdb_env_set_maxdbs(env, 64);
  CHECK(mdb_env_open(env, dir, 0, 0644) == 0);
  CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0);
  CHECK(mdb_dbi_open(txn, "am:agg", 0, &dbi) == 0);
  CHECK(mdb_set_compare(txn, dbi, rn_store_key_cmp) == 0);
  CHECK(mdb_cursor_open(txn, dbi, &cur) == 0);
  MDB_val k, v;
  int n = 0;
  for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT), n++) {
    char key[512], cut[3];
    memcpy(key, k.mv_data, k.mv_size);
    memcpy(cut, v.mv_data, 3);
    k.mv_data = key;
    v = (MDB_val){ 3, cut };
    CHECK(mdb_cursor_put(cur, &k, &v, MDB_CURRENT) == 0);
  }
  CHECK(n == 2);
  mdb_cursor_close(cur);
  CHECK(mdb_txn_commit(txn) == 0);
  mdb_env_close(env);
}

static void test_cut_count_is_refused(void)
{
  char dir[] = "/tmp/runnel_aggdmg9_XXXXXX", want[300];
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  rn_rel *t = declare_input(p);
  declare_agg(p, t);
  CHECK(put(t, rn_table_insert, 1, 5) == 0);
  CHECK(put(t, rn_table_insert, 2, 5) == 0);
  CHECK(put(t, rn_table_insert, 3, 9) == 0);
  rn_pipeline_close(p);
  cut_counts(dir); /* "am:agg" holds value 5 (count 2) and 9 (count 1): both cut */
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  t = declare_input(p);
  declare_agg(p, t);
  CHECK(put(t, rn_table_delete, 1, 5) == RN_ESTORE);
  snprintf(want, sizeof want, "state damaged: %s: aggregate \"agg\": a value's count is 3 bytes, not 8", dir);
  CHECK(strcmp(rn_errmsg(p), want) == 0);
  if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
  rn_pipeline_close(p);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_cut_count_is_refused);
  return CHECK_REPORT();
}
