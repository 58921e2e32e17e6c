/* test_outbox.c — durable subscribers, rn_on_durable and rn_deliver from C
 * (OUTBOX-n in core/outbox.c). Uses only runnel.h. */
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "push_fixture.h"
#include "runnel.h"

static const rn_column_def cols[] = { { "id", "int", 0, NULL, 0, NULL } };
static const char *const key[] = { "id" };

typedef struct got {
  int n, fail;
  uint64_t seqs[16];
  int ndurable;
  uint64_t durable[16];
} got;

static int on_event(void *ctx, const rn_event *ev)
{
  got *g = ctx;
  if (g->fail) return 5;
  if (g->n < 16) g->seqs[g->n++] = ev->seq;
  return 0;
}

static void on_durable(void *ctx, uint64_t seq)
{
  got *g = ctx;
  if (g->ndurable < 16) g->durable[g->ndurable++] = seq;
}

static rn_pipeline *open_at(const char *dir, rn_rel **t)
{
  rn_open_opts o = { 0 };
  o.path = dir;
  o.nosync = 1;
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, t) == 0);
  return p;
}

/* A durable subscriber gets carried groups only once LMDB holds them. */
static void test_after_durability(void)
{
  char dir[] = "/tmp/runnel-outbox-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_rel *t;
  rn_pipeline *p = open_at(dir, &t);
  got g = { 0 };
  CHECK(rn_subscribe_durable(p, t, NULL, on_event, &g) == RN_EINVAL);
  CHECK(strstr(rn_errmsg(p), "needs a name") != NULL);
  CHECK(rn_subscribe_durable(p, t, "audit", on_event, &g) == 0);
  CHECK(rn_subscribe_durable(p, t, "audit", on_event, &g) == RN_EINVAL);
  CHECK(rn_on_durable(p, on_durable, &g) == 0);
  CHECK(insert_id(p, t, 1) == 0);
  CHECK(insert_id(p, t, 2) == 0);
  CHECK(g.n == 0 && g.ndurable == 0);            /* carried: not durable yet */
  CHECK(rn_flush(p) == 0);
  CHECK(g.n == 2 && g.seqs[0] == 1 && g.seqs[1] == 2);
  CHECK(g.ndurable == 1 && g.durable[0] == 2);
  g.fail = 1;                                    /* the subscriber refuses: the group stands */
  CHECK(insert_id(p, t, 3) == 0);
  CHECK(rn_flush(p) == 0);
  CHECK(rn_seq(p) == 3 && g.n == 2);
  CHECK(rn_deliver(p) == RN_ECALLBACK);
  CHECK(strstr(rn_errmsg(p), "subscriber returned 5") != NULL);
  g.fail = 0;
  CHECK(rn_deliver(p) == 0);
  CHECK(g.n == 3 && g.seqs[2] == 3);
  rn_pipeline_close(p);
  /* reopened: the marks were written at close, nothing comes twice */
  p = open_at(dir, &t);
  got again = { 0 };
  CHECK(rn_subscribe_durable(p, t, "audit", on_event, &again) == 0);
  CHECK(again.n == 0);
  CHECK(insert_id(p, t, 4) == 0);
  CHECK(rn_flush(p) == 0);
  CHECK(again.n == 1 && again.seqs[0] == 4);
  rn_pipeline_close(p);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_after_durability);
  return CHECK_REPORT();
}
