/* test_join_damaged9.c — a join's fan-out index ("ji:", core/join.h)
 * damaged in the state: an entry whose left row runs past its end, or cut
 * before its head, is refused naming the join; it was read past its end
 * (runnel verify alone said so). */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "join_fixture.h"
#include "join.h"
#include "pipeline.h"
#include "row.h"
#include "store.h"

#include "join_kept_fixture.h"

/* The left row's length past the entry's end. */
static void too_long(MDB_val *v, char *buf)
{
  memcpy(buf, v->mv_data, v->mv_size);
  uint32_t llen = RN_JOIN_KEPT | 400;
  memcpy(buf + 8, &llen, 4);
  v->mv_data = buf;
}

/* Cut inside its head: |u64 result id|u32 left length| */
static void cut(MDB_val *v, char *buf)
{
  memcpy(buf, v->mv_data, 6);
  v->mv_size = 6;
  v->mv_data = buf;
}

static void check_refused(void (*damage)(MDB_val *v, char *buf))
{
  char dir[] = "/tmp/runnel_joindmg9_XXXXXX", want[300];
  CHECK(mkdtemp(dir) != NULL);
  rn_pipeline *p = open_state(dir);
  CHECK(put(teams, 1, "a", 0, false) == 0);
  CHECK(put(players, 10, NULL, 1, false) == 0);
  CHECK(put(players, 11, NULL, 1, false) == 0);
  rn_pipeline_close(p);
  rewrite_entries(dir, damage);
  p = open_state(dir);
  CHECK(put(teams, 1, "b", 0, true) == RN_ESTORE); /* the fan-out reads the entries */
  snprintf(want, sizeof want, "state damaged: %s: join \"tj\": an entry of its fan-out index is malformed", dir);
  CHECK(strcmp(rn_errmsg(p), want) == 0);
  if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
  CHECK(put(players, 10, NULL, 2, true) == RN_ESTORE); /* a left row's own entry */
  rn_pipeline_close(p);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

static void test_left_row_past_the_end(void)
{
  check_refused(too_long);
}

static void test_cut_head(void)
{
  check_refused(cut);
}

int main(void)
{
  RUN(test_left_row_past_the_end);
  RUN(test_cut_head);
  return CHECK_REPORT();
}
