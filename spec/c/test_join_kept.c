/* test_join_kept.c — a join with a joiner keeps the result it emitted in
 * its "ji:" entry (join.h, RN_JOIN_KEPT): a change calls the joiner once;
 * an entry from an older state, without the bit, has its old result made
 * again; runnel verify finds an entry whose left row runs past its end. */
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
#include "verify.h"

#include "join_kept_fixture.h"

/* As a state written before results were kept: no bit, no result. */
static void without_result(MDB_val *v, char *buf)
{
  uint32_t llen;
  memcpy(&llen, (char *)v->mv_data + 8, 4);
  CHECK((llen & RN_JOIN_KEPT) != 0);
  llen &= ~RN_JOIN_KEPT;
  memcpy(buf, v->mv_data, 12 + llen);
  memcpy(buf + 8, &llen, 4);
  v->mv_size = 12 + llen;
  v->mv_data = buf;
}

static void too_long(MDB_val *v, char *buf)
{
  memcpy(buf, v->mv_data, v->mv_size);
  uint32_t llen = RN_JOIN_KEPT | 400;
  memcpy(buf + 8, &llen, 4);
  v->mv_data = buf;
}

static void test_kept_results(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX", text[4096];
  CHECK(mkdtemp(dir) != NULL);
  rn_pipeline *p = open_state(dir);
  CHECK(put(teams, 1, "a", 0, false) == 0);
  CHECK(put(players, 10, NULL, 1, false) == 0);
  CHECK(put(players, 11, NULL, 1, false) == 0);
  joiner_calls = 0;
  CHECK(put(teams, 1, "b", 0, true) == 0); /* fan-out: the old results are read back */
  CHECK(joiner_calls == 2);
  CHECK(strcmp(last_old, "a") == 0);
  rn_pipeline_close(p);

  rewrite_entries(dir, without_result);
  joiner_calls = 0;
  p = open_state(dir); /* the same declaration: no rebuild */
  CHECK(joiner_calls == 0);
  joiner_calls = 0;
  CHECK(put(teams, 1, "c", 0, true) == 0); /* the old results are made again */
  CHECK(joiner_calls == 4);
  CHECK(strcmp(last_old, "b") == 0);
  joiner_calls = 0;
  CHECK(put(teams, 1, "d", 0, true) == 0); /* and were kept this time */
  CHECK(joiner_calls == 2);
  CHECK(strcmp(last_old, "c") == 0);
  rn_pipeline_close(p);

  FILE *out = fmemopen(text, sizeof text, "w");
  CHECK(rn_verify(dir, out) == 0);
  fclose(out);
  rewrite_entries(dir, too_long);
  out = fmemopen(text, sizeof text, "w");
  CHECK(rn_verify(dir, out) > 0);
  fclose(out);
  CHECK(strstr(text, "database \"ji:tj\": an entry's left row runs past its end") != NULL);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_kept_results);
  return CHECK_REPORT();
}
