/* test_outbox_damaged14.c — an outbox damaged where the declaration and
 * the delivery did not look: a row inside an entry that does not read as
 * a row of its relation (it reached a subscriber as a row it was not, or
 * as nothing, and was marked taken), and a durable sink's mark moved past
 * a group waiting for it (the declaration deleted the group unsaid, while
 * runnel verify called it damaged). */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "damaged_fixture.h"
#include "key.h"
#include "outbox.h"
#include "pipeline.h"
#include "push_fixture.h"
#include "raw_meta_fixture.h"
#include "runnel.h"
#include "store.h"
#include "verify.h"

static void put_be64_at(char *at, uint64_t v)
{
  for (int i = 7; i >= 0; i--, v >>= 8) at[i] = (char)(v & 0xff);
}

static int refuse(void *ctx, const rn_event *ev)
{
  (void)ctx;
  (void)ev;
  return 1;
}

static int count(void *ctx, const rn_event *ev)
{
  (void)ev;
  ++*(int *)ctx;
  return 0;
}

/* Groups 1..n of table t (one int column k) wait for durable sink
 * "audit", whose first delivery failed. */
static void make_waiting(const char *dir, int n)
{
  rn_pipeline *p = open_at(dir);
  rn_rel *t = NULL;
  if (!p) return;
  CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
  CHECK(rn_subscribe_durable(p, t, "audit", refuse, NULL) == 0);
  for (int k = 1; k <= n; k++) CHECK(insert_int(p, t, "k", k) == 0);
  rn_pipeline_close(p);
}

/* Runs runnel verify on dir; its output into out. */
static int verify_says(const char *dir, char *out, size_t n)
{
  FILE *f = fmemopen(out, n, "w");
  int rc = rn_verify(dir, f);
  fclose(f);
  return rc;
}

static void test_row_that_is_not_its_relations_is_not_delivered(void)
{
  /* the row {k = 1} is |0x91 0x01|: one that claims two columns, a string
   * cut short, and a bool in the int column */
  static const char *const rows[] = { "\x92\x01", "\x91\xa1", "\x91\xc3" };
  for (int i = 0; i < 3; i++) {
    char dir[] = "/tmp/runnel_outbox14_XXXXXX", out[4096];
    CHECK(mkdtemp(dir) != NULL);
    make_waiting(dir, 1);
    MDB_txn *txn;
    MDB_dbi meta, outbox;
    MDB_env *env = raw_open(dir, &txn, &meta);
    CHECK(mdb_dbi_open(txn, RN_DB_OUTBOX, 0, &outbox) == 0);
    char key[16], entry[256];
    put_be64_at(key, rn_hash64("sink:audit", 10));
    put_be64_at(key + 8, 1);
    MDB_val k = { 16, key }, v;
    CHECK(mdb_get(txn, outbox, &k, &v) == 0 && v.mv_size <= sizeof entry);
    memcpy(entry, v.mv_data, v.mv_size);
    char *row = memmem(entry, v.mv_size, "\xc4\x02\x91\x01", 4);
    CHECK(row != NULL);
    if (row) memcpy(row + 2, rows[i], 2);
    v.mv_data = entry;
    CHECK(mdb_put(txn, outbox, &k, &v, 0) == 0);
    raw_close(env, txn);

    if (i < 2) { /* its bytes alone say so: verify sees it */
      CHECK(verify_says(dir, out, sizeof out) > 0);
      CHECK(strstr(out, "damaged: the outbox entry of group 1 is not a list of whole changes") != NULL);
      if (check_failed_now) fprintf(stderr, "row %d: verify said: %s\n", i, out);
    }
    rn_pipeline *p = open_at(dir);
    rn_rel *t = NULL;
    int seen = 0;
    if (!p) continue;
    CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
    CHECK(rn_subscribe_durable(p, t, "audit", count, &seen) == 0);
    CHECK(rn_deliver(p) == RN_ESTORE);
    CHECK(strcmp(rn_errmsg(p), "t: outbox: group 1 is damaged") == 0);
    CHECK(seen == 0);
    if (check_failed_now) fprintf(stderr, "row %d: %d delivered: %s\n", i, seen, rn_errmsg(p));
    rn_pipeline_close(p);
    CHECK(raw_entries(dir, RN_DB_OUTBOX) == 1); /* still waiting: not taken */
    cleanup(dir);
  }
}

static void test_mark_past_a_waiting_group_is_refused(void)
{
  char dir[] = "/tmp/runnel_outbox14_XXXXXX", want[1024], out[4096];
  CHECK(mkdtemp(dir) != NULL);
  make_waiting(dir, 3); /* groups 1..3 wait; the mark says 0 delivered */
  size_t len;
  char *rec = raw_get(dir, "od:sink:audit", &len);
  CHECK(rec && len == 24);
  if (!rec) return;
  uint64_t delivered = 2;
  memcpy(rec + 8, &delivered, 8);
  raw_put(dir, "od:sink:audit", rec, len);
  free(rec);
  CHECK(verify_says(dir, out, sizeof out) > 0);

  rn_pipeline *p = open_at(dir);
  rn_rel *t = NULL;
  int seen = 0;
  if (!p) return;
  CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
  CHECK(rn_subscribe_durable(p, t, "audit", count, &seen) == RN_ESTORE);
  snprintf(want, sizeof want, "state damaged: %s: the mark of durable subscriber audit says groups up to 2 were "
           "delivered, but group 1 waits for it (runnel verify shows it); to go on, drop what waits for it "
           "(p:drop_outbox or runnel drop-outbox) or give the sink a new name", dir);
  CHECK(strcmp(rn_errmsg(p), want) == 0);
  if (check_failed_now) fprintf(stderr, "said: %s\n", rn_errmsg(p));
  CHECK(rn_deliver(p) == 0 && seen == 0);
  rn_pipeline_close(p);
  CHECK(raw_entries(dir, RN_DB_OUTBOX) == 3); /* none deleted unsaid */

  /* dropped on purpose, the sink goes on from the next group */
  p = open_at(dir);
  if (!p) return;
  CHECK(rn_outbox_drop(p, "sink:audit") == 0);
  if (check_failed_now) fprintf(stderr, "drop: %s\n", rn_errmsg(p));
  CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
  CHECK(rn_subscribe_durable(p, t, "audit", count, &seen) == 0);
  CHECK(insert_int(p, t, "k", 9) == 0);
  CHECK(rn_deliver(p) == 0 && seen == 1);
  rn_pipeline_close(p);
  cleanup(dir);
}

int main(void)
{
  (void)make_gapped_state; /* the fixture's: no gapped table here, */
  (void)take_notes;        /* and no notes */
  RUN(test_row_that_is_not_its_relations_is_not_delivered);
  RUN(test_mark_past_a_waiting_group_is_refused);
  return CHECK_REPORT();
}
