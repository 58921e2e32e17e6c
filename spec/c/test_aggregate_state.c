/* test_aggregate_state.c — aggregate states written before float sums were
 * exact (a float64 sum per group, no format mark) are still read: over a
 * table the state is rebuilt once from the rows, over a stream each old sum
 * is taken as the value it holds (aggregate.c, check_format). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aggregate.h"
#include "check.h"
#include "row.h"
#include "store.h"

static rn_rel *declare_input(rn_pipeline *p, bool stream)
{
  rn_err e;
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "id", 2, RN_T_INT, false, NULL, &e);
  rn_schema_add(s, "x", 1, RN_T_FLOAT, false, NULL, &e);
  int key = 0;
  if (!stream) rn_schema_set_key(s, &key, 1, "t", &e);
  rn_rel *r = NULL;
  CHECK(rn_declare_source(p, "t", stream ? RN_REL_STREAM : RN_REL_TABLE, s, &r) == 0);
  return r;
}

/* agg = t:aggregate{ s = sum("x"), a = avg("x") } */
static rn_rel *declare_agg(rn_pipeline *p, rn_rel *in)
{
  rn_agg_spec specs[2] = { { "s", RN_AGG_SUM, 1 }, { "a", RN_AGG_AVG, 1 } };
  rn_window w = { .kind = RN_WINDOW_NONE };
  rn_agg_fns fns = { 0 };
  rn_rel *out = NULL;
  CHECK(rn_declare_aggregate(p, "agg", in, NULL, 0, &w, specs, 2, &fns, &out) == 0);
  return out;
}

static int put(rn_rel *t, int (*fn)(rn_rel *, msgpack_object *, uint8_t *), int64_t id, double x)
{
  msgpack_object v[2];
  v[0].type = MSGPACK_OBJECT_POSITIVE_INTEGER;
  v[0].via.u64 = (uint64_t)id;
  v[1].type = MSGPACK_OBJECT_FLOAT64;
  v[1].via.f64 = x;
  uint8_t given[2] = { 1, 1 };
  return fn(t, v, given);
}

typedef struct result { double s, a; int rows; } result;

static int take_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  (void)id;
  result *r = ctx;
  msgpack_zone z;
  msgpack_zone_init(&z, 256);
  const msgpack_object *v = rn_row_unpack(row, len, 2, &z);
  if (v) { r->s = v[0].via.f64; r->a = v[1].via.f64; r->rows++; }
  msgpack_zone_destroy(&z);
  return 0;
}

static result read_agg(rn_rel *agg)
{
  result r = { 0, 0, 0 };
  CHECK(rn_aggregate_scan(agg, take_row, &r) == 0);
  return r;
}

/* Writes the global group's state as the previous version did,
 * |rid|rows|[[f64 sum, count], [f64 sum, count]]|, and drops the format mark. */
static void write_old_state(rn_pipeline *p, double sum, uint64_t count)
{
  MDB_txn *txn;
  MDB_dbi dbi;
  CHECK(mdb_txn_begin(p->store.env, NULL, 0, &txn) == 0);
  CHECK(mdb_dbi_open(txn, "ag:agg", 0, &dbi) == 0);
  CHECK(mdb_set_compare(txn, dbi, rn_store_key_cmp) == 0);
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  uint64_t head[2] = { 1, count };
  msgpack_sbuffer_write(&b, (const char *)head, 16);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, 2);
  for (int i = 0; i < 2; i++) {
    msgpack_pack_array(&pk, 2);
    msgpack_pack_double(&pk, sum);
    msgpack_pack_uint64(&pk, count);
  }
  char global = 0x00, format = (char)0xfc;
  MDB_val k = { 1, &global }, d = { b.size, b.data }, mark = { 1, &format };
  CHECK(mdb_put(txn, dbi, &k, &d, 0) == 0);
  CHECK(mdb_del(txn, dbi, &mark, NULL) == 0);
  CHECK(mdb_txn_commit(txn) == 0);
  msgpack_sbuffer_destroy(&b);
}

static void remove_dir(const char *dir)
{
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

/* Over a table: rebuilt from the rows, so the drift the old sum carried
 * (1e16 + 1 held as 1e16) is gone. */
static void test_old_table_state_is_rebuilt(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  rn_rel *t = declare_input(p, false);
  declare_agg(p, t);
  CHECK(put(t, rn_table_insert, 1, 1e16) == 0);
  CHECK(put(t, rn_table_insert, 2, 1.0) == 0);
  rn_pipeline_close(p);

  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  write_old_state(p, 1e16, 2);
  t = declare_input(p, false);
  rn_rel *agg = declare_agg(p, t);
  CHECK(put(t, rn_table_delete, 1, 0) == 0);
  result r = read_agg(agg);
  CHECK(r.rows == 1 && r.s == 1.0 && r.a == 1.0);
  rn_pipeline_close(p);

  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0); /* marked: not rebuilt again, still exact */
  t = declare_input(p, false);
  agg = declare_agg(p, t);
  CHECK(put(t, rn_table_insert, 3, 0.5) == 0);
  r = read_agg(agg);
  CHECK(r.rows == 1 && r.s == 1.5 && r.a == 0.75);
  rn_pipeline_close(p);
  remove_dir(dir);
}

/* Over a stream (nothing to rebuild from): the old sum is read as it is,
 * and new events add to it exactly. */
static void test_old_stream_state_is_read(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  rn_rel *t = declare_input(p, true);
  declare_agg(p, t);
  CHECK(put(t, rn_table_insert, 1, 8.0) == 0);
  rn_pipeline_close(p);

  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  write_old_state(p, 0.25, 1);
  t = declare_input(p, true);
  rn_rel *agg = declare_agg(p, t);
  CHECK(put(t, rn_table_insert, 2, 0.5) == 0);
  result r = read_agg(agg);
  CHECK(r.rows == 1 && r.s == 0.75 && r.a == 0.375);
  rn_pipeline_close(p);
  remove_dir(dir);
}

int main(void)
{
  RUN(test_old_table_state_is_rebuilt);
  RUN(test_old_stream_state_is_read);
  return CHECK_REPORT();
}
