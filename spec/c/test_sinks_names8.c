/* test_sinks_names8.c — a durable C subscriber is named in refusals as the
 * host named it ("durable subscriber audit"), not by its key in the state
 * ("sink:audit"; core/outbox.c). */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "push_fixture.h"
#include "runnel.h"

static const rn_column_def cols[] = { { "k", "int", 0, NULL, 0, NULL } };
static const char *const key[] = { "k" };

static int refuse(void *ctx, const rn_event *ev)
{
  (void)ctx;
  (void)ev;
  return 1;
}

static int noop(void *ctx, const rn_event *ev)
{
  (void)ctx;
  (void)ev;
  return 0;
}

static int insert(rn_pipeline *p, rn_rel *t, int64_t k)
{
  return insert_int(p, t, "k", k);
}

static void cleanup(const char *dir)
{
  char cmd[96];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

static rn_pipeline *open_both(const char *dir, rn_rel **orders, rn_rel **other)
{
  rn_open_opts o = { 0 };
  o.path = dir;
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  if (!p) return NULL;
  CHECK(rn_declare_table(p, "orders", cols, 1, key, 1, orders) == 0);
  CHECK(rn_declare_table(p, "other", cols, 1, key, 1, other) == 0);
  return p;
}

/* Before: "other: durable sink sink:audit: group 1 waits for it, …". */
static void test_waiting_for_another_relation(void)
{
  char dir[] = "/tmp/runnel_names8_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_rel *orders = NULL, *other = NULL;
  rn_pipeline *p = open_both(dir, &orders, &other);
  if (!p) return;
  CHECK(rn_subscribe_durable(p, orders, "audit", refuse, NULL) == 0);
  CHECK(insert(p, orders, 1) == 0); /* committed; it waits for the subscriber */
  rn_pipeline_close(p);
  p = open_both(dir, &orders, &other);
  if (!p) return;
  CHECK(rn_subscribe_durable(p, other, "audit", noop, NULL) == RN_EINVAL);
  CHECK(strstr(rn_errmsg(p), "other: durable subscriber audit: group 1 waits for it, recorded for another relation"));
  CHECK(!strstr(rn_errmsg(p), "sink:audit"));
  CHECK(rn_pipeline_close(p) == 0);
  cleanup(dir);
}

/* Before: "orders: a durable sink named sink:audit is already declared". */
static void test_already_declared(void)
{
  char dir[] = "/tmp/runnel_names8_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_rel *orders = NULL, *other = NULL;
  rn_pipeline *p = open_both(dir, &orders, &other);
  if (!p) return;
  CHECK(rn_subscribe_durable(p, orders, "audit", noop, NULL) == 0);
  CHECK(rn_subscribe_durable(p, orders, "audit", noop, NULL) == RN_EINVAL);
  CHECK(strcmp(rn_errmsg(p), "orders: durable subscriber audit is already declared") == 0);
  CHECK(rn_pipeline_close(p) == 0);
  cleanup(dir);
}

int main(void)
{
  RUN(test_waiting_for_another_relation);
  RUN(test_already_declared);
  return CHECK_REPORT();
}
