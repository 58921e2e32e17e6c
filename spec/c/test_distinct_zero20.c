/* test_distinct_zero20.c — a distinct row holding -0.0, as runnel before
 * 0.17 stored the zero of the copy that brought it in: the pipeline reads
 * it as 0.0 (its one form, distinct.c's DISTINCT-1), but runnel.attach and
 * the read API gave the stored -0.0, so one state showed two zeros for
 * one row, depending on who read it. */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "damaged_fixture.h"
#include "distinct.h"
#include "raw_meta_fixture.h"
#include "runnel.h"
#include "store.h"
#include "store_sink.h"

static const rn_column_def kx_cols[] = { { "k", "int", 0, NULL, 0, NULL }, { "x", "float", 0, NULL, 0, NULL } };

/* t {k = 1, x = 0.0} and its distinct d. */
static void make_state(const char *dir)
{
  rn_pipeline *p = open_at(dir);
  rn_rel *t = NULL, *d = NULL;
  if (!p) return;
  CHECK(rn_declare_table(p, "t", kx_cols, 2, k_key, 1, &t) == 0);
  CHECK(rn_declare_distinct(p, "d", t, &d) == 0);
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2);
  msgpack_pack_str_with_body(&pk, "k", 1);
  msgpack_pack_int64(&pk, 1);
  msgpack_pack_str_with_body(&pk, "x", 1);
  msgpack_pack_double(&pk, 0.0);
  CHECK(rn_insert(p, t, sb.data, sb.size) == 0);
  msgpack_sbuffer_destroy(&sb);
  rn_pipeline_close(p);
}

/* Every stored row of "dr:d" with its 0.0 written as -0.0; how many. */
static int sign_zeros(const char *dir)
{
  MDB_txn *txn;
  MDB_dbi meta, dbi;
  MDB_env *env = raw_open(dir, &txn, &meta);
  CHECK(mdb_dbi_open(txn, RN_DB_DISTINCT_ROWS "d", 0, &dbi) == 0);
  MDB_cursor *cur;
  CHECK(mdb_cursor_open(txn, dbi, &cur) == 0);
  MDB_val k, v;
  int n = 0;
  for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    char row[64];
    CHECK(v.mv_size <= sizeof row);
    if (v.mv_size > sizeof row) break;
    memcpy(row, v.mv_data, v.mv_size);
    char *z = memmem(row + 8, v.mv_size - 8, "\xcb\0\0\0\0\0\0\0\0", 9);
    if (!z) continue;
    z[1] = (char)0x80;
    MDB_val nv = { v.mv_size, row };
    CHECK(mdb_cursor_put(cur, &k, &nv, MDB_CURRENT) == 0);
    n++;
  }
  mdb_cursor_close(cur);
  raw_close(env, txn);
  return n;
}

typedef struct zeros { int rows, negative; } zeros;

static int count_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  (void)id;
  zeros *z = ctx;
  z->rows++;
  if (memmem(row, len, "\xcb\x80\0\0\0\0\0\0\0", 9)) z->negative++;
  return 0;
}

static int count_plain(void *ctx, const char *row, size_t len)
{
  return count_row(ctx, 0, row, len);
}

static void test_old_negative_zero_reads_as_zero_from_outside(void)
{
  char dir[] = "/tmp/runnel_zero20_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir);
  CHECK(sign_zeros(dir) == 1);
  rn_attached *a = NULL;
  rn_err e = { 0 };
  CHECK(rn_attach(dir, "d", NULL, &a, &e) == 0);
  if (check_failed_now) fprintf(stderr, "attach: %s\n", e.msg);
  if (a) {
    zeros each = { 0, 0 }, rows = { 0, 0 };
    CHECK(rn_attach_each(a, count_row, &each, &e) == 0);
    CHECK(rn_attach_rows(a, count_plain, &rows, &e) == 0);
    CHECK(each.rows == 1 && each.negative == 0);
    CHECK(rows.rows == 1 && rows.negative == 0);
    if (check_failed_now) fprintf(stderr, "each: %d rows, %d -0.0; rows: %d, %d\n", each.rows, each.negative,
                                  rows.rows, rows.negative);
    rn_attach_close(a);
  }
  cleanup(dir);
}

int main(void)
{
  (void)make_gapped_state; /* the fixture's, not used here */
  (void)take_notes;
  (void)raw_entries;
  (void)delete_int;
  (void)put_counters;
  (void)raw_get;
  (void)raw_put;
  RUN(test_old_negative_zero_reads_as_zero_from_outside);
  return CHECK_REPORT();
}
