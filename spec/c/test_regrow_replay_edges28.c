/* test_regrow_replay_edges28.c — a regrow whose replay fills the grown map
 * too. When a change fills the map, the group's changes so far are applied
 * again in a grown one (group.c, restart), logged again as they go. Until
 * 0.40, a replay that itself ended in MDB_MAP_FULL kept only the part it
 * had logged: the next attempt replayed that part, and the group went on
 * without the rest of its changes, with no word. The test stands in for
 * LMDB's mdb_put and mdb_cursor_put (the core is linked in statically, so
 * its calls reach these) and fails one put with MDB_MAP_FULL in the first
 * replay after the map grew. Uses runnel.h and lmdb.h only. */
#include <dlfcn.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "push_fixture.h"
#include "runnel.h"

#define EXPORTED __attribute__((visibility("default")))
#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

static int armed;     /* the group under test runs */
static int grown;     /* the map grew since */
static int puts_since; /* puts since it grew */
static int injected;  /* the one failure was given */

static int failing_put(void)
{
  if (!armed || !grown || injected || ++puts_since < 40) return 0;
  injected = 1;
  return MDB_MAP_FULL;
}

EXPORTED int mdb_env_set_mapsize(MDB_env *env, size_t size)
{
  if (armed) grown = 1, puts_since = 0;
  return NEXT(mdb_env_set_mapsize)(env, size);
}

EXPORTED int mdb_put(MDB_txn *txn, MDB_dbi dbi, MDB_val *key, MDB_val *data, unsigned int flags)
{
  int rc = failing_put();
  return rc ? rc : NEXT(mdb_put)(txn, dbi, key, data, flags);
}

EXPORTED int mdb_cursor_put(MDB_cursor *cur, MDB_val *key, MDB_val *data, unsigned int flags)
{
  int rc = failing_put();
  return rc ? rc : NEXT(mdb_cursor_put)(cur, key, data, flags);
}

static void test_a_replay_that_fills_the_grown_map_keeps_every_change(void)
{
  char dir[] = "/tmp/rn_regrow_replay_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts o = { .path = dir, .map_size = (size_t)1 << 16 };
  rn_pipeline *p = NULL;
  char err[512] = "";
  CHECK(rn_pipeline_open(&o, &p, err, sizeof err) == 0);
  rn_column_def cols[] = { { .name = "id", .type = "int" } };
  const char *key[] = { "id" };
  rn_rel *t = NULL;
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  enum { N = 40000 };
  armed = 1;
  CHECK(rn_begin(p) == 0);
  int failed = 0;
  for (int i = 1; i <= N && !failed; i++)
    if (insert_id(p, t, i) != 0) failed = i;
  if (failed) fprintf(stderr, "  insert %d: %s\n", failed, rn_errmsg(p));
  CHECK(!failed);
  CHECK(rn_commit(p) == 0);
  armed = 0;
  CHECK(injected); /* the replay did fail once */
  rn_cursor *c = NULL;
  int rows = 0, done = 0;
  const void *row;
  size_t len;
  uint64_t id;
  CHECK(rn_cursor_open(p, t, &c) == 0);
  while (c && rn_cursor_next(c, &row, &len, &id, &done) == 0 && !done) rows++;
  if (c) rn_cursor_close(c);
  if (rows != N) fprintf(stderr, "  %d rows of %d\n", rows, N);
  CHECK(rows == N);
  CHECK(rn_pipeline_close(p) == 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_a_replay_that_fills_the_grown_map_keeps_every_change);
  return CHECK_REPORT();
}
