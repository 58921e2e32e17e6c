/* test_event_counters20.c — a stream's counters damaged lower: next id
 * rewritten below the ids its events already took, or the whole record put
 * back as an earlier group left it. runnel verify said the state was whole
 * and an open took the counters as they were, giving the ids of earlier
 * events again (they meet those events in the logs the sinks keep). */
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

/* Three groups of one event each (ids 1, 2, 3) on a new state at dir, and
 * a group rolled back in between (its id is not used up). */
static void make_events(const char *dir)
{
  ids seen = { { 0 }, 0 };
  int rc;
  rn_pipeline *p = open_at(dir);
  if (!p) return;
  rn_rel *ev = stream_at(p, &seen, &rc);
  CHECK(rc == 0);
  for (int g = 1; g <= 3 && ev; g++) {
    CHECK(insert_int(p, ev, "v", g) == 0);
    CHECK(rn_begin(p) == 0);
    CHECK(insert_int(p, ev, "v", 10 * g) == 0);
    CHECK(rn_rollback(p) == 0);
  }
  CHECK(seen.n == 3 && seen.id[2] == 3); /* a subscriber is told of committed groups only */
  rn_pipeline_close(p);
}

static void read_counters(const char *dir, uint64_t c[3])
{
  size_t len;
  char *v = raw_get(dir, "n:ev", &len);
  CHECK(v && len == 24);
  memset(c, 0, 24);
  if (v && len == 24) memcpy(c, v, 24);
  free(v);
}

/* The verify report of dir, into out. */
static int verify_into(const char *dir, char *out, size_t len)
{
  FILE *f = fmemopen(out, len, "w");
  int damages = rn_verify(dir, f);
  fclose(f);
  return damages;
}

static void test_whole_event_counters_verify_and_open(void)
{
  char dir[] = "/tmp/runnel_counters20_XXXXXX", out[2048];
  CHECK(mkdtemp(dir) != NULL);
  make_events(dir);
  CHECK(verify_into(dir, out, sizeof out) == 0);
  if (check_failed_now) fprintf(stderr, "%s", out);
  ids seen = { { 0 }, 0 };
  int rc;
  rn_pipeline *p = open_at(dir);
  if (!p) return;
  rn_rel *ev = stream_at(p, &seen, &rc);
  CHECK(rc == 0);
  if (ev) CHECK(insert_int(p, ev, "v", 4) == 0);
  CHECK(seen.n == 1 && seen.id[0] == 4);
  rn_pipeline_close(p);
  CHECK(verify_into(dir, out, sizeof out) == 0);
  cleanup(dir);
}

static void test_event_counters_gone_back_are_refused(void)
{
  static const char *const said[] = {
    "the counters of relation \"ev\" give next id 2, but it gave 3 events: it would give their ids again",
    "the counters of relation \"ev\" are as of group 2, but it gave events in group 3: it would give their ids "
    "again",
  };
  static const char *const reported[] = {
    "damaged: relation \"ev\": its counters give next id 2, but it gave 3 events: it would give their ids again",
    "damaged: relation \"ev\": its counters are as of group 2, but it gave events in group 3: it would give "
    "their ids again",
  };
  for (int i = 0; i < 2; i++) {
    char dir[] = "/tmp/runnel_counters20_XXXXXX", want[512], out[2048];
    CHECK(mkdtemp(dir) != NULL);
    make_events(dir);
    uint64_t c[3];
    read_counters(dir, c);
    if (i == 0) c[0] = 2;                          /* next id only, rewritten lower */
    else c[0] = 3, c[1] = c[1] ? c[1] - 1 : 0, c[2] = 2; /* the record as group 2 left it */
    raw_put(dir, "n:ev", c, sizeof c);
    CHECK(verify_into(dir, out, sizeof out) > 0);
    CHECK(strstr(out, reported[i]) != NULL);
    if (check_failed_now) fprintf(stderr, "case %d: %s", i, out);
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
    uint64_t after[3];
    read_counters(dir, after); /* refused, not repaired behind the user's back */
    CHECK(memcmp(after, c, sizeof c) == 0);
    cleanup(dir);
  }
}

int main(void)
{
  (void)make_gapped_state; /* the fixture's: no gapped table here, */
  (void)take_notes;        /* no notes, */
  (void)raw_entries;       /* no database counted, */
  (void)delete_int;        /* no row deleted */
  (void)put_counters;
  RUN(test_whole_event_counters_verify_and_open);
  RUN(test_event_counters_gone_back_are_refused);
  return CHECK_REPORT();
}
