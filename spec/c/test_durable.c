/* test_durable.c — rn_on_durable: the host learns when groups are in LMDB,
 * after every commit with sync, when the carried transaction commits with
 * nosync (rn_flush, close, the carry bounds). */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "push_fixture.h"
#include "runnel.h"

typedef struct heard {
  uint64_t seqs[16];
  int n;
} heard;

static void on_durable(void *ctx, uint64_t seq)
{
  heard *h = ctx;
  if (h->n < 16) h->seqs[h->n++] = seq;
}

static const rn_column_def cols[] = { { "k", "int", 0, NULL, 0, NULL } };
static const char *const key[] = { "k" };

static int insert(rn_pipeline *p, rn_rel *t, int64_t k)
{
  return insert_int(p, t, "k", k);
}

static rn_pipeline *open_at(const char *dir, bool nosync, int carry_groups, rn_rel **t)
{
  rn_open_opts o = { 0 };
  o.path = dir;
  o.nosync = nosync;
  o.carry_groups = carry_groups;
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  if (p) CHECK(rn_declare_table(p, "t", cols, 1, key, 1, t) == 0);
  return p;
}

static void test_sync_every_commit(void)
{
  char dir[] = "/tmp/runnel_durable_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_rel *t;
  rn_pipeline *p = open_at(dir, false, 0, &t);
  heard h = { { 0 }, 0 };
  CHECK(rn_on_durable(p, NULL, NULL) == RN_EINVAL);
  CHECK(rn_on_durable(p, on_durable, &h) == 0);
  CHECK(insert(p, t, 1) == 0);
  CHECK(insert(p, t, 1) == RN_EEXIST); /* rolled back: nothing to tell */
  CHECK(rn_begin(p) == 0);
  CHECK(insert(p, t, 2) == 0);
  CHECK(insert(p, t, 3) == 0);
  CHECK(rn_commit(p) == 0);
  CHECK(h.n == 2 && h.seqs[0] == 1 && h.seqs[1] == 2);
  rn_pipeline_close(p);
  CHECK(h.n == 2); /* close had nothing new */
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

static void test_nosync_when_carried_commit(void)
{
  char dir[] = "/tmp/runnel_durable_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_rel *t;
  rn_pipeline *p = open_at(dir, true, 3, &t);
  heard h = { { 0 }, 0 };
  CHECK(rn_on_durable(p, on_durable, &h) == 0);
  CHECK(insert(p, t, 1) == 0);
  CHECK(insert(p, t, 2) == 0);
  CHECK(h.n == 0);                          /* carried */
  CHECK(insert(p, t, 3) == 0);              /* the third: carry_groups reached */
  CHECK(h.n == 1 && h.seqs[0] == 3);
  CHECK(insert(p, t, 4) == 0);
  CHECK(rn_flush(p) == 0);
  CHECK(rn_flush(p) == 0);
  CHECK(h.n == 2 && h.seqs[1] == 4);
  CHECK(insert(p, t, 5) == 0);
  rn_pipeline_close(p);
  CHECK(h.n == 3 && h.seqs[2] == 5);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_sync_every_commit);
  RUN(test_nosync_when_carried_commit);
  return CHECK_REPORT();
}
