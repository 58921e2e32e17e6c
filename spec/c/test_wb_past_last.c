/* test_wb_past_last.c — the write-back layer (core/wb.c) answers "absent"
 * without mdb_get for a key past LMDB's last key of the database. LMDB's
 * last key must be read as it is at each ask: a write that reached LMDB
 * inside the transaction (through a cursor rn_wb_cursor_open gave) moves it,
 * and the layer must then find that key, whether it asks or has stopped
 * asking (a database whose misses are mostly below the last key). */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "store.h"
#include "wb.h"
#include "wb_fixture.h"

static MDB_val key_of(char *buf, int i)
{
  int n = snprintf(buf, 16, "k%07d", i);
  return (MDB_val){ (size_t)n, buf };
}

/* rn_wb_get of key i: 0 found (with value "v<i>"), MDB_NOTFOUND, or an error. */
static int get(rn_store *s, MDB_dbi dbi, int i)
{
  char kb[16], want[16];
  MDB_val k = key_of(kb, i), v;
  int rc = rn_wb_get(s, s->wtxn, dbi, &k, &v);
  int n = snprintf(want, sizeof want, "v%d", i);
  if (rc == 0 && (v.mv_size != (size_t)n || memcmp(v.mv_data, want, (size_t)n) != 0)) return -1;
  return rc;
}

/* Writes key i into LMDB itself, through a cursor the layer gave. */
static void put_through_cursor(rn_store *s, MDB_dbi dbi, int i)
{
  char kb[16], vb[16];
  MDB_val k = key_of(kb, i), v = { (size_t)snprintf(vb, sizeof vb, "v%d", i), vb };
  MDB_cursor *cur;
  CHECK(rn_wb_cursor_open(s, s->wtxn, dbi, true, &cur) == 0);
  CHECK(mdb_cursor_put(cur, &k, &v, 0) == 0);
  mdb_cursor_close(cur);
}

static void test_past_last_reads_lmdb_as_it_is(void)
{
  char dir[] = "/tmp/rn_wb_lastXXXXXX";
  rn_store s;
  rn_err e = { 0 };
  MDB_dbi dbi;
  wb_store_open(&s, dir, &dbi);

  /* An empty database: every key is past its (absent) last one. */
  CHECK(rn_store_begin(&s, &e) == 0);
  CHECK(get(&s, dbi, 5) == MDB_NOTFOUND);
  for (int i = 0; i < 100; i++) {
    char kb[16], vb[16];
    MDB_val k = key_of(kb, i * 10), v = { (size_t)snprintf(vb, sizeof vb, "v%d", i * 10), vb };
    CHECK(rn_wb_put(&s, s.wtxn, dbi, &k, &v, MDB_NOOVERWRITE) == 0);
  }
  CHECK(rn_store_commit(&s, &e) == 0); /* not kept: the next reads go to LMDB */

  CHECK(rn_store_begin(&s, &e) == 0);
  CHECK(get(&s, dbi, 2000) == MDB_NOTFOUND); /* past the last (990) */
  CHECK(get(&s, dbi, 500) == 0);             /* below it: found */
  CHECK(get(&s, dbi, 505) == MDB_NOTFOUND);  /* below it: absent */
  put_through_cursor(&s, dbi, 3000);         /* LMDB's last moves inside the transaction */
  CHECK(get(&s, dbi, 3000) == 0);
  CHECK(get(&s, dbi, 2500) == MDB_NOTFOUND);
  CHECK(get(&s, dbi, 3001) == MDB_NOTFOUND);
  char kb[16], vb[16] = "v3000";
  MDB_val k = key_of(kb, 3000), v = { 5, vb };
  CHECK(rn_wb_put(&s, s.wtxn, dbi, &k, &v, MDB_NOOVERWRITE) == MDB_KEYEXIST);

  /* Misses below the last key: the layer stops asking, and still answers right. */
  for (int i = 0; i < 200; i++) CHECK(get(&s, dbi, 1 + i * 3) == ((i * 3 + 1) % 10 == 0 ? 0 : MDB_NOTFOUND));
  for (int i = 0; i < 200; i++) CHECK(get(&s, dbi, 1001 + i * 3) == MDB_NOTFOUND);
  put_through_cursor(&s, dbi, 4000);
  CHECK(get(&s, dbi, 4000) == 0);
  for (int i = 0; i < 100; i++) CHECK(get(&s, dbi, 5000 + i) == MDB_NOTFOUND);
  put_through_cursor(&s, dbi, 9000);
  CHECK(get(&s, dbi, 9000) == 0);
  CHECK(rn_store_commit_keep(&s, &e) == 0);

  /* The next transaction: what the last one wrote is there. */
  CHECK(rn_store_begin(&s, &e) == 0);
  CHECK(get(&s, dbi, 3000) == 0);
  CHECK(get(&s, dbi, 4000) == 0);
  CHECK(get(&s, dbi, 9000) == 0);
  CHECK(get(&s, dbi, 9001) == MDB_NOTFOUND);
  rn_store_abort(&s);

  wb_store_close(&s, dir);
}

int main(void)
{
  RUN(test_past_last_reads_lmdb_as_it_is);
  return CHECK_REPORT();
}
