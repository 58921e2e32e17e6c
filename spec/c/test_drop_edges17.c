/* test_drop_edges17.c — a table dropped and declared again, as a C durable
 * subscriber and the open's id checks see it. The table declared again
 * numbers its rows after the dropped one's (drop.c, keep_ids): the
 * subscriber, given the dropped table's groups that waited in the outbox
 * after the drop, never meets an id twice. Its ids are from..from+n-1,
 * not 1..n, and counters damaged to look like 1..n (entries + 1) must
 * still be found at open, as they are for a table whose ids have gaps
 * (relation.c, check_keyed_ids): new keys would take ids rows hold. */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "damaged_fixture.h"
#include "pipeline.h"
#include "push_fixture.h"
#include "raw_meta_fixture.h"
#include "runnel.h"
#include "store.h"

typedef struct log {
  bool down;            /* fail every delivery */
  uint64_t id[32], seq[32];
  int verb[32];
  int n;
} log_t;

static int keep(void *ctx, const rn_event *ev)
{
  log_t *l = ctx;
  if (l->down) return -1;
  if (l->n < 32) l->id[l->n] = ev->id, l->seq[l->n] = ev->seq, l->verb[l->n++] = ev->verb;
  return 0;
}

static rn_rel *declare(rn_pipeline *p, log_t *l)
{
  rn_rel *t = NULL;
  CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
  if (t && l) CHECK(rn_subscribe_durable(p, t, "d", keep, l) == 0);
  return t;
}

static void test_durable_subscriber_meets_no_id_twice(void)
{
  char dir[] = "/tmp/runnel_drop17_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  log_t l = { 0 };
  rn_pipeline *p = open_at(dir);
  if (!p) return;
  rn_rel *t = declare(p, &l);
  CHECK(insert_int(p, t, "k", 1) == 0); /* group 1, id 1: taken */
  l.down = true;
  CHECK(delete_int(p, t, 1) == 0);      /* group 2: waits */
  CHECK(insert_int(p, t, "k", 2) == 0); /* group 3, id 2: waits */
  rn_pipeline_close(p);
  if (!(p = open_at(dir))) return;
  CHECK(rn_drop(p, "t") == 0);
  l.down = false;
  t = declare(p, &l);                   /* the waiting groups 2 and 3 */
  CHECK(insert_int(p, t, "k", 1) == 0); /* group 4: the new t's first row */
  rn_pipeline_close(p);
  static const uint64_t ids[] = { 1, 1, 2, 3 }, seqs[] = { 1, 2, 3, 4 };
  CHECK(l.n == 4);
  for (int i = 0; i < l.n && i < 4; i++) {
    CHECK(l.id[i] == ids[i] && l.seq[i] == seqs[i]);
    if (check_failed_now) fprintf(stderr, "change %d: group %llu, id %llu\n", i, (unsigned long long)l.seq[i],
                                  (unsigned long long)l.id[i]);
  }
  cleanup(dir);
}

/* t dropped with ids 1 to 3 given, declared again: keys 1 to 3 take ids
 * 4 to 6; its counters |7|3|seq|. Damaged to next id 4 (entries + 1, as a
 * table 1..n would hold, and the dropped one's next id, so nothing raises
 * it), key 4 would take id 4, which key 1 holds. */
static void test_counters_looking_like_1_to_n_are_refused(void)
{
  char dir[] = "/tmp/runnel_drop17_XXXXXX", want[600];
  CHECK(mkdtemp(dir) != NULL);
  rn_pipeline *p = open_at(dir);
  if (!p) return;
  rn_rel *t = declare(p, NULL);
  for (int k = 1; k <= 3; k++) CHECK(insert_int(p, t, "k", k) == 0);
  rn_pipeline_close(p);
  if (!(p = open_at(dir))) return;
  CHECK(rn_drop(p, "t") == 0);
  t = declare(p, NULL);
  for (int k = 1; k <= 3; k++) CHECK(insert_int(p, t, "k", k) == 0);
  CHECK(t && t->next_id == 7);
  uint64_t seq = rn_seq(p);
  rn_pipeline_close(p);
  if (!(p = open_at(dir))) return; /* as it is: opens */
  CHECK(declare(p, NULL) != NULL);
  rn_pipeline_close(p);
  put_counters(dir, 4, 3, seq);
  if (!(p = open_at(dir))) return;
  CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == RN_ESTORE);
  snprintf(want, sizeof want, "state damaged: %s: relation \"t\" holds row id 6, its counters say next id 4", dir);
  CHECK(strcmp(rn_errmsg(p), want) == 0);
  if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
  rn_pipeline_close(p);
  cleanup(dir);
}

int main(void)
{
  (void)make_gapped_state; /* the fixture's: no gapped table here, */
  (void)take_notes;        /* no notes, */
  (void)raw_entries;       /* and no database counted */
  RUN(test_durable_subscriber_meets_no_id_twice);
  RUN(test_counters_looking_like_1_to_n_are_refused);
  return CHECK_REPORT();
}
