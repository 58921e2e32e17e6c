/* test_attach_carry.c — an attach in the process whose pipeline writes the
 * state with nosync (store_sink.c): it borrows the pipeline's environment,
 * and the groups the pipeline committed but carries in its open LMDB
 * transaction are committed before each read outside a group, so the
 * reader sees every group rn_seq counts; inside an open group it reads
 * what LMDB holds (whole groups, never the open one). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "attach_fixture.h"
#include "pipeline.h"
#include "store_sink.h"

static int insert(rn_pipeline *p, rn_rel *t, int k)
{
  unsigned char map[] = { 0x81, 0xa1, 'k', (unsigned char)k }; /* {"k": k}, k < 128 */
  return rn_insert(p, t, map, sizeof map);
}

static int durable_seq;
static void on_durable(void *ctx, uint64_t seq) { (void)ctx; durable_seq = (int)seq; }

static void test_carried_groups_seen(void)
{
  char dir[] = "/tmp/rn_attach_carryXXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts o = { .path = dir, .nosync = 1 };
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  static const rn_column_def cols[] = { { .name = "k", .type = "int" } };
  static const char *const key[] = { "k" };
  rn_rel *t = NULL;
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  CHECK(rn_on_durable(p, on_durable, NULL) == 0);
  rn_attached *a = NULL;
  rn_err e = { 0 };
  CHECK(rn_attach(dir, "t", p, &a, &e) == 0);
  CHECK(insert(p, t, 1) == 0);
  CHECK(rn_seq(p) == 1 && durable_seq == 0); /* carried */
  CHECK(rows(a) == 1);
  CHECK(durable_seq == 1); /* the read committed it */
  CHECK(insert(p, t, 2) == 0);
  CHECK(rows(a) == 2);
  /* inside a group: the committed groups, never the open one */
  CHECK(insert(p, t, 3) == 0);
  CHECK(rn_begin(p) == 0);
  CHECK(insert(p, t, 4) == 0);
  CHECK(rows(a) == 2); /* group 3 is carried with the open one: LMDB has 2 */
  CHECK(rn_commit(p) == 0);
  CHECK(rows(a) == 4);
  rn_attach_close(a);
  CHECK(rn_pipeline_close(p) == 0);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_carried_groups_seen);
  return CHECK_REPORT();
}
