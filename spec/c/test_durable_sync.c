/* test_durable_sync.c — with nosync, durable sinks get a group only after
 * the state's file holds it on disk: the outbox syncs LMDB before it
 * delivers (an OS crash could otherwise leave an NDJSON file, an SQLite
 * table or a host ahead of the state they were fed from). rn_on_durable's
 * hooks likewise hear of a group only once it is on disk, with or without
 * a durable sink (they heard of it when LMDB committed, never synced).
 *
 * The test defines fdatasync, fsync and msync itself (they then serve
 * liblmdb too) and counts the calls around each delivery. */
#include <errno.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "push_fixture.h"
#include "runnel.h"

static int syncs;
static int failing; /* the syncs fail with EIO */

#define EXPORTED __attribute__((visibility("default"))) /* the build hides symbols by default */
static int fail(void) { errno = EIO; return -1; }
EXPORTED int fdatasync(int fd) { syncs++; return failing ? fail() : (int)syscall(SYS_fdatasync, fd); }
EXPORTED int fsync(int fd) { syncs++; return failing ? fail() : (int)syscall(SYS_fsync, fd); }
EXPORTED int msync(void *addr, size_t len, int flags)
{
  syncs++;
  return failing ? fail() : (int)syscall(SYS_msync, addr, len, flags);
}

typedef struct seen {
  int deliveries;
  int unsynced;   /* deliveries with no sync since the flush began */
  int from;       /* syncs when the flush began */
} seen;

static int on_durable_row(void *ctx, const rn_event *ev)
{
  (void)ev;
  seen *s = ctx;
  s->deliveries++;
  if (syncs == s->from) s->unsynced++;
  return 0;
}

static void delivers_after_sync(int writemap)
{
  rn_open_opts opts = { .nosync = 1, .writemap = writemap };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  static const rn_column_def cols[] = { { "id", "int", 0, NULL, 0, NULL } };
  static const char *const key[] = { "id" };
  rn_rel *t;
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  seen s = { 0 };
  CHECK(rn_subscribe_durable(p, t, "audit", on_durable_row, &s) == 0);
  for (int round = 0; round < 3; round++) {
    CHECK(insert_id(p, t, 2 * round + 1) == 0); /* carried: not in LMDB yet */
    CHECK(insert_id(p, t, 2 * round + 2) == 0);
    CHECK(s.deliveries == 2 * round);
    s.from = syncs;
    CHECK(rn_flush(p) == 0);                  /* LMDB commits; the outbox delivers */
    CHECK(s.deliveries == 2 * round + 2);
  }
  CHECK(s.unsynced == 0);
  rn_pipeline_close(p);
}

static void test_nosync_delivers_after_sync(void) { delivers_after_sync(0); }
static void test_writemap_delivers_after_sync(void) { delivers_after_sync(1); }

typedef struct told {
  uint64_t seq[16];       /* the seqs the hook was told */
  int n;
  int unsynced;           /* times it was told with no sync since `from` */
  int from;
} told;

static void on_durable(void *ctx, uint64_t seq)
{
  told *t = ctx;
  if (t->n < 16) t->seq[t->n] = seq;
  t->n++;
  if (syncs == t->from) t->unsynced++;
}

/* nosync, no durable sink unless `sink`: each way the carried groups reach
 * LMDB (rn_flush, the carry bound, close) tells the hook only after a sync,
 * and one sync serves the outbox and the hooks. */
static void hooks_after_sync(int writemap, bool sink)
{
  rn_open_opts opts = { .nosync = 1, .writemap = writemap, .carry_groups = 3, .carry_seconds = 60 };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  static const rn_column_def cols[] = { { "id", "int", 0, NULL, 0, NULL } };
  static const char *const key[] = { "id" };
  rn_rel *t;
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  seen s = { 0 };
  if (sink) CHECK(rn_subscribe_durable(p, t, "audit", on_durable_row, &s) == 0);
  told d = { .from = syncs };
  CHECK(rn_on_durable(p, on_durable, &d) == 0);
  CHECK(insert_id(p, t, 1) == 0); /* carried */
  CHECK(insert_id(p, t, 2) == 0);
  CHECK(d.n == 0);
  d.from = syncs;
  CHECK(rn_flush(p) == 0);
  CHECK(d.n == 1 && d.seq[0] == 2);
  CHECK(syncs == d.from + 1); /* one sync, for the outbox and the hook both */
  d.from = syncs;
  for (int id = 3; id <= 5; id++) CHECK(insert_id(p, t, id) == 0); /* the third commits LMDB */
  CHECK(d.n == 2 && d.seq[1] == 5);
  CHECK(insert_id(p, t, 6) == 0);
  d.from = syncs;
  CHECK(rn_pipeline_close_report(p, NULL, 0) == 0);
  CHECK(d.n == 3 && d.seq[2] == 6);
  CHECK(d.unsynced == 0); /* before: 3, told of groups no sync had put on disk */
  CHECK(!sink || s.deliveries == 6);
}

static void test_nosync_hooks_after_sync(void) { hooks_after_sync(0, false); }
static void test_writemap_hooks_after_sync(void) { hooks_after_sync(1, false); }
static void test_hooks_and_sinks_share_a_sync(void) { hooks_after_sync(0, true); }

/* A sync that fails tells no hook: the groups may not be on disk. The next
 * flush syncs again and tells them. */
static void test_failed_sync_tells_no_hook(void)
{
  rn_open_opts opts = { .nosync = 1 };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  static const rn_column_def cols[] = { { "id", "int", 0, NULL, 0, NULL } };
  static const char *const key[] = { "id" };
  rn_rel *t;
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  told d = { .from = syncs };
  CHECK(rn_on_durable(p, on_durable, &d) == 0);
  CHECK(insert_id(p, t, 1) == 0);
  failing = 1;
  CHECK(rn_flush(p) == 0); /* LMDB committed; the disk did not take it */
  failing = 0;
  CHECK(d.n == 0);
  CHECK(rn_flush(p) == 0); /* nothing carried: it syncs again */
  CHECK(d.n == 1 && d.seq[0] == 1);
  CHECK(d.unsynced == 0);
  rn_pipeline_close(p);
}

/* With sync, every commit is synced by LMDB itself: no sync of runnel's. */
static void test_sync_hooks_without_extra_sync(void)
{
  rn_pipeline *p;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  static const rn_column_def cols[] = { { "id", "int", 0, NULL, 0, NULL } };
  static const char *const key[] = { "id" };
  rn_rel *t;
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  told d = { 0 };
  CHECK(rn_on_durable(p, on_durable, &d) == 0);
  int before = syncs;
  CHECK(insert_id(p, t, 1) == 0);
  CHECK(d.n == 1 && d.seq[0] == 1);
  CHECK(syncs - before == 1); /* LMDB's own, in its commit */
  rn_pipeline_close(p);
}

int main(void)
{
  RUN(test_nosync_delivers_after_sync);
  RUN(test_writemap_delivers_after_sync);
  RUN(test_nosync_hooks_after_sync);
  RUN(test_writemap_hooks_after_sync);
  RUN(test_hooks_and_sinks_share_a_sync);
  RUN(test_failed_sync_tells_no_hook);
  RUN(test_sync_hooks_without_extra_sync);
  return CHECK_REPORT();
}
