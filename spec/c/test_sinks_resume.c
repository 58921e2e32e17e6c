/* test_sinks_resume.c — a durable C subscriber that fails on the k-th
 * change of a group gets, on retry, the changes after the last one it
 * returned 0 for, each once, with the same ev->n (OUTBOX-9 in
 * core/outbox.c); so after a close and an open. Uses only runnel.h. */
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
  int n;
  uint64_t fail_at;       /* refuse the change with this ev->n (0: none) */
  uint64_t seq[32], pos[32];
} got;

static int on_event(void *ctx, const rn_event *ev)
{
  got *g = ctx;
  if (ev->n == g->fail_at) return 7;
  if (g->n < 32) { g->seq[g->n] = ev->seq; g->pos[g->n++] = ev->n; }
  return 0;
}

static rn_pipeline *open_at(const char *dir, rn_rel **t)
{
  rn_open_opts o = { 0 };
  o.path = dir;
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, t) == 0);
  return p;
}

static int insert_group(rn_pipeline *p, rn_rel *t, int from, int n)
{
  int rc = rn_begin(p);
  for (int i = 0; i < n && !rc; i++) rc = insert_id(p, t, from + i);
  return rc ? rc : rn_commit(p);
}

static void test_resumes_after_last_taken(void)
{
  char dir[] = "/tmp/runnel-resume-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_rel *t;
  rn_pipeline *p = open_at(dir, &t);
  got g = { .fail_at = 4 };
  CHECK(rn_subscribe_durable(p, t, "audit", on_event, &g) == 0);
  CHECK(insert_group(p, t, 1, 6) == 0);         /* committed; delivery stops at its 4th change */
  CHECK(g.n == 3 && g.pos[2] == 3);
  CHECK(rn_deliver(p) == RN_ECALLBACK);          /* still refused: nothing more, nothing again */
  CHECK(g.n == 3);
  rn_pipeline_close(p);                          /* its mark keeps the 3 changes it took */
  p = open_at(dir, &t);
  got again = { 0 };
  CHECK(rn_subscribe_durable(p, t, "audit", on_event, &again) == 0);
  CHECK(again.n == 3);                           /* changes 4, 5, 6 of group 1, once */
  for (int i = 0; i < 3 && i < again.n; i++) CHECK(again.seq[i] == 1 && again.pos[i] == (uint64_t)(4 + i));
  CHECK(insert_group(p, t, 7, 2) == 0);
  CHECK(again.n == 5 && again.seq[3] == 2 && again.pos[3] == 1 && again.pos[4] == 2);
  rn_pipeline_close(p);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

/* rn_unsubscribe removes a durable subscriber too (it returned
 * RN_ENOTFOUND, and the subscriber went on being called with a context its
 * host may have freed); what waits for it stays for its next subscription. */
static void test_unsubscribe_durable(void)
{
  char dir[] = "/tmp/runnel-resume-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_rel *t;
  rn_open_opts o = { 0 };
  o.path = dir;
  o.nosync = 1;                                  /* groups are carried: the unsubscribe commits them */
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  got g = { .fail_at = 0 }, other = { 0 };
  CHECK(rn_subscribe_durable(p, t, "audit", on_event, &g) == 0);
  CHECK(insert_id(p, t, 1) == 0);
  CHECK(rn_flush(p) == 0);
  CHECK(g.n == 1);
  g.fail_at = 1;
  CHECK(insert_id(p, t, 2) == 0);                /* group 2 waits: refused */
  CHECK(rn_flush(p) == 0);
  CHECK(rn_unsubscribe(p, t, on_event, &other) == RN_ENOTFOUND);
  CHECK(rn_unsubscribe(p, t, on_event, &g) == 0);
  CHECK(rn_unsubscribe(p, t, on_event, &g) == RN_ENOTFOUND);
  g.fail_at = 0;
  CHECK(insert_id(p, t, 3) == 0);
  CHECK(rn_flush(p) == 0);
  CHECK(rn_deliver(p) == 0);
  CHECK(g.n == 1);                               /* gone: nothing more */
  CHECK(rn_subscribe_durable(p, t, "audit", on_event, &other) == 0);
  CHECK(other.n == 1 && other.seq[0] == 2);      /* what waited for it, once; group 3 came while it was away */
  CHECK(insert_id(p, t, 4) == 0);                /* carried: the unsubscribe commits it, delivers it, marks it */
  CHECK(rn_unsubscribe(p, t, on_event, &other) == 0);
  CHECK(other.n == 2 && other.seq[1] == 4);
  got last = { 0 };
  CHECK(rn_subscribe_durable(p, t, "audit", on_event, &last) == 0);
  CHECK(last.n == 0);                            /* its mark covers group 4: not again */
  rn_pipeline_close(p);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_resumes_after_last_taken);
  RUN(test_unsubscribe_durable);
  return CHECK_REPORT();
}
