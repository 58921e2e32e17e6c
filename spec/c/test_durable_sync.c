/* test_durable_sync.c — with nosync, durable sinks get a group only after
 * the state's file holds it on disk: the outbox syncs LMDB before it
 * delivers (an OS crash could otherwise leave an NDJSON file, an SQLite
 * table or a host ahead of the state they were fed from).
 *
 * The test defines fdatasync, fsync and msync itself (they then serve
 * liblmdb too) and counts the calls around each delivery. */
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

#define EXPORTED __attribute__((visibility("default"))) /* the build hides symbols by default */
EXPORTED int fdatasync(int fd) { syncs++; return (int)syscall(SYS_fdatasync, fd); }
EXPORTED int fsync(int fd) { syncs++; return (int)syscall(SYS_fsync, fd); }
EXPORTED int msync(void *addr, size_t len, int flags) { syncs++; return (int)syscall(SYS_msync, addr, len, flags); }

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

int main(void)
{
  RUN(test_nosync_delivers_after_sync);
  RUN(test_writemap_delivers_after_sync);
  return CHECK_REPORT();
}
