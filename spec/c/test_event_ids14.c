/* test_event_ids14.c — the ids a stream numbers its events with, which no
 * row of the state holds: counters lost, zeroed or older than the stream's
 * last events were taken as they were (ids given again, or id 0, meeting
 * earlier events in the logs its sinks keep), and a stream dropped and
 * declared again started again at id 1. */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "damaged_fixture.h"
#include "push_fixture.h"
#include "raw_meta_fixture.h"
#include "runnel.h"
#include "store.h"
#include "stream_ids_fixture.h"
#include "verify.h"

/* Three groups of one event each on a new state at dir. */
static void make_events(const char *dir)
{
  ids seen = { { 0 }, 0 };
  int rc;
  rn_pipeline *p = open_at(dir);
  if (!p) return;
  rn_rel *ev = stream_at(p, &seen, &rc);
  CHECK(rc == 0);
  for (int g = 1; g <= 3 && ev; g++) CHECK(insert_int(p, ev, "v", g) == 0);
  CHECK(seen.n == 3 && seen.id[2] == 3);
  rn_pipeline_close(p);
}

static void test_damaged_event_counters_are_refused(void)
{
  static const char *const said[] = {
    "the counters of relation \"ev\" are missing, but it gave events in group 3: it would give their ids again",
    "the counters of relation \"ev\" give id 0 (ids start at 1)",
  };
  for (int i = 0; i < 2; i++) {
    char dir[] = "/tmp/runnel_ids14_XXXXXX", want[512];
    CHECK(mkdtemp(dir) != NULL);
    make_events(dir);
    uint64_t counters[3] = { 4, 0, 3 }; /* |next_id|count|last seq| as group 3 left them */
    if (i == 0) raw_del(dir, "n:ev");
    if (i == 1) counters[0] = 0;
    if (i) raw_put(dir, "n:ev", counters, sizeof counters);
    char out[2048];
    FILE *f = fmemopen(out, sizeof out, "w");
    CHECK(rn_verify(dir, f) > 0);
    fclose(f);
    CHECK(strstr(out, i ? "damaged: relation \"ev\": its counters give id 0" :
                          "damaged: relation \"ev\": its counters are missing, but it gave events") != NULL);
    ids seen = { { 0 }, 0 };
    int rc;
    rn_pipeline *p = open_at(dir);
    if (!p) continue;
    stream_at(p, &seen, &rc);
    CHECK(rc == RN_ESTORE);
    snprintf(want, sizeof want, "state damaged: %s: %s", dir, said[i]);
    CHECK(strcmp(rn_errmsg(p), want) == 0);
    if (check_failed_now) fprintf(stderr, "case %d: %s\n", i, rn_errmsg(p));
    rn_pipeline_close(p);
    cleanup(dir);
  }
}

static void test_stream_declared_again_after_a_drop_goes_on_from_its_ids(void)
{
  char dir[] = "/tmp/runnel_ids14_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_events(dir);
  for (int round = 0; round < 2; round++) { /* a second drop keeps the higher mark */
    rn_pipeline *p = open_at(dir);
    if (!p) return;
    CHECK(rn_drop(p, "ev") == 0);
    ids seen = { { 0 }, 0 };
    int rc;
    rn_rel *ev = stream_at(p, &seen, &rc);
    CHECK(rc == 0);
    if (ev) CHECK(insert_int(p, ev, "v", 9) == 0);
    CHECK(seen.n == 1 && seen.id[0] == (uint64_t)(4 + round));
    if (check_failed_now) fprintf(stderr, "round %d: %d events, first id %llu\n", round, seen.n,
                                  (unsigned long long)seen.id[0]);
    rn_pipeline_close(p);
  }
  cleanup(dir);
}

int main(void)
{
  (void)make_gapped_state; /* the fixture's: no gapped table here, */
  (void)take_notes;        /* no notes, */
  (void)raw_entries;       /* and no database counted */
  RUN(test_damaged_event_counters_are_refused);
  RUN(test_stream_declared_again_after_a_drop_goes_on_from_its_ids);
  return CHECK_REPORT();
}
