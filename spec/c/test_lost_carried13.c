/* test_lost_carried13.c — with sync = false a group is told committed
 * while LMDB's transaction still carries it. When that transaction's commit
 * then fails (a full disk: here RLIMIT_FSIZE, which needs no root), the
 * carried groups are lost and their seqs are given again; the subscribers
 * that were told them committed must hear of each (SINKS-2 in
 * core/sink.c), newest first, or they would hold rows the state lost and
 * take the next group 1 as a second group 1. They heard nothing. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "push_fixture.h"

typedef struct told {
  int nseen;           /* changes it got */
  uint64_t lost[4];    /* the first seqs it heard of */
  int nlost;           /* every seq it heard of */
  uint64_t lowest;     /* the lowest */
  bool newest_first;   /* each lower than the one before */
} told;

static int saw(void *ctx, const rn_event *ev)
{
  told *t = ctx;
  (void)ev;
  t->nseen++;
  return 0;
}

static struct { told *who; uint64_t seq; } order[1024]; /* every notice, in order */
static int norder;

/* Where who heard of seq among every notice; -1: it did not. */
static int heard_at(const told *who, uint64_t seq)
{
  for (int i = 0; i < norder; i++)
    if (order[i].who == who && order[i].seq == seq) return i;
  return -1;
}

static void heard(void *ctx, uint64_t seq)
{
  told *t = ctx;
  if (norder < 1024) order[norder].who = t, order[norder++].seq = seq;
  if (t->nlost == 0) t->newest_first = true;
  else t->newest_first = t->newest_first && seq < t->lowest;
  if (t->nlost < 4) t->lost[t->nlost] = seq;
  t->nlost++;
  t->lowest = seq;
}

static off_t file_size(const char *dir)
{
  char path[256];
  struct stat st;
  snprintf(path, sizeof path, "%s/data.mdb", dir);
  return stat(path, &st) == 0 ? st.st_size : -1;
}

static const rn_column_def cols[] = { { .name = "id", .type = "int" }, { .name = "body", .type = "string" } };
static const char *const key[] = { "id" };

/* A row {id, body} with a body of 2 KiB, so that a few hundred need disk. */
static int put(rn_pipeline *p, rn_rel *t, int64_t id)
{
  static char body[2048];
  memset(body, 'x', sizeof body);
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2);
  msgpack_pack_str_with_body(&pk, "id", 2);
  msgpack_pack_int64(&pk, id);
  msgpack_pack_str_with_body(&pk, "body", 4);
  msgpack_pack_str_with_body(&pk, body, sizeof body);
  int rc = rn_insert(p, t, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

/* Runs rn_flush with the state's file held to its size (plus a page or
 * two): the carried groups cannot be written. */
static int flush_on_full_disk(rn_pipeline *p, const char *dir)
{
  struct rlimit old, small;
  CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
  small = old;
  small.rlim_cur = (rlim_t)file_size(dir) + 8192;
  void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
  CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
  int rc = rn_flush(p);
  CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
  signal(SIGXFSZ, was);
  return rc;
}

/* Group 1 reaches LMDB; groups 2..301 are carried: `a` sees every one,
 * `b` (on another table) only groups 3 and 5, `c` has no rollback
 * callback. The flush fails: a hears 301 down to 2, b hears 5 then 3,
 * between them in reverse order of subscription, and none hears of group
 * 1. The next group is seq 2 again, and nothing is heard of it. */
static void test_lost_carried_groups_are_told(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir, .nosync = 1, .carry_groups = 100000, .carry_changes = 1000000,
                        .carry_seconds = 3600 };
  rn_pipeline *p = NULL;
  rn_rel *docs = NULL, *other = NULL;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "docs", cols, 2, key, 1, &docs) == 0);
  CHECK(rn_declare_table(p, "other", cols, 2, key, 1, &other) == 0);
  static told a, b, c;
  CHECK(rn_subscribe_rollback(p, docs, saw, heard, &a) == 0);
  CHECK(rn_subscribe_flags(p, other, 0, saw, heard, &b) == 0);
  CHECK(rn_subscribe(p, docs, saw, &c) == 0);
  CHECK(put(p, docs, 1) == 0);
  CHECK(rn_flush(p) == 0 && rn_seq(p) == 1);
  for (int64_t id = 2; id <= 301; id++) {
    CHECK(rn_begin(p) == 0);
    CHECK(put(p, docs, id) == 0);
    if (id == 3 || id == 5) CHECK(put(p, other, id) == 0);
    CHECK(rn_commit(p) == 0);
  }
  CHECK(rn_seq(p) == 301 && a.nseen == 301 && b.nseen == 2 && a.nlost == 0);
  int rc = flush_on_full_disk(p, dir);
  CHECK(rc == RN_EFULL || rc == RN_EIO);
  CHECK(strstr(rn_errmsg(p), "(300 groups not yet flushed to LMDB were lost)") != NULL); /* kept by the notices */
  CHECK(rn_seq(p) == 1);
  CHECK(a.nlost == 300 && a.lost[0] == 301 && a.lowest == 2 && a.newest_first);
  CHECK(b.nlost == 2 && b.lost[0] == 5 && b.lost[1] == 3);
  CHECK(heard_at(&b, 5) >= 0 && heard_at(&b, 5) < heard_at(&a, 5) && heard_at(&a, 6) < heard_at(&b, 5));
  CHECK(c.nlost == 0);
  a.nlost = b.nlost = 0;
  CHECK(put(p, docs, 2) == 0 && rn_flush(p) == 0);
  CHECK(rn_seq(p) == 2 && a.nlost == 0 && b.nlost == 0);
  CHECK(rn_pipeline_close(p) == 0);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

/* Groups that reached LMDB are never told lost: a failed flush after a
 * successful one tells only the groups carried since. */
static void test_only_the_carried_are_told(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir, .nosync = 1, .carry_groups = 100000, .carry_changes = 1000000,
                        .carry_seconds = 3600 };
  rn_pipeline *p = NULL;
  rn_rel *docs = NULL;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "docs", cols, 2, key, 1, &docs) == 0);
  static told a;
  CHECK(rn_subscribe_rollback(p, docs, saw, heard, &a) == 0);
  for (int64_t id = 1; id <= 10; id++) CHECK(put(p, docs, id) == 0);
  CHECK(rn_flush(p) == 0 && rn_seq(p) == 10);
  for (int64_t id = 11; id <= 300; id++) CHECK(put(p, docs, id) == 0);
  int rc = flush_on_full_disk(p, dir);
  CHECK(rc == RN_EFULL || rc == RN_EIO);
  CHECK(rn_seq(p) == 10);
  CHECK(a.nlost == 290 && a.lost[0] == 300 && a.lowest == 11 && a.newest_first);
  CHECK(rn_pipeline_close(p) == 0);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_lost_carried_groups_are_told);
  RUN(test_only_the_carried_are_told);
  return CHECK_REPORT();
}
