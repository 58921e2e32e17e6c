/* test_sqlite_fork.c — a forked child and the parent's SQLite connections
 * (sqlite.c, "Fork"). SQLite forbids using a connection across fork(): its
 * file locks are the process's, its record of them is memory the child
 * inherits, and a close runs its rollback and unlock code. So a child
 * never finalizes, steps or closes a statement or connection its parent
 * opened: closing the inherited pipeline leaves them alone, and a lookup
 * the child asks opens a connection of its own. This file's sqlite3_*
 * wrappers note every call a child makes on a parent's connection. Every
 * child is bounded in time (alarm) and reports by its exit status. */
#include <dlfcn.h>
#include <msgpack.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "key.h"
#include "lookup.h"
#include "runnel.h"
#include "schema.h"
#include "sqlite.h"

/* ---- the wrappers: which process opened each connection ---- */

typedef struct opening { sqlite3 *db; pid_t pid; } opening;
static opening opened[64];
static int nopened;
static int misuses; /* calls a child made on a connection its parent opened */

static pid_t opener_of(sqlite3 *db)
{
  for (int i = nopened - 1; i >= 0; i--)
    if (opened[i].db == db) return opened[i].pid;
  return 0;
}

static void note_use(sqlite3 *db)
{
  pid_t by = db ? opener_of(db) : 0;
  if (by && by != getpid()) misuses++;
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

int sqlite3_open_v2(const char *file, sqlite3 **db, int flags, const char *vfs)
{
  int rc = NEXT(sqlite3_open_v2)(file, db, flags, vfs);
  if (*db && nopened < 64) opened[nopened++] = (opening){ *db, getpid() };
  return rc;
}

int sqlite3_close(sqlite3 *db)
{
  note_use(db);
  return NEXT(sqlite3_close)(db);
}

int sqlite3_close_v2(sqlite3 *db)
{
  note_use(db);
  return NEXT(sqlite3_close_v2)(db);
}

int sqlite3_finalize(sqlite3_stmt *st)
{
  if (st) note_use(sqlite3_db_handle(st));
  return NEXT(sqlite3_finalize)(st);
}

int sqlite3_step(sqlite3_stmt *st)
{
  if (st) note_use(sqlite3_db_handle(st));
  return NEXT(sqlite3_step)(st);
}

int sqlite3_exec(sqlite3 *db, const char *sql, int (*cb)(void *, int, char **, char **), void *ctx, char **err)
{
  note_use(db);
  return NEXT(sqlite3_exec)(db, sql, cb, ctx, err);
}

/* ---- the pipeline: t mirrored into table "t" of db, lookup "prices" on its table "prices" ---- */

static const rn_column_def cols[] = { { .name = "k", .type = "int" }, { .name = "v", .type = "string" } };
static const char *const key[] = { "k" };

static int insert(rn_pipeline *p, rn_rel *t, int k)
{
  char map[] = { (char)0x82, (char)0xa1, 'k', (char)0xcd, 0, 0, (char)0xa1, 'v', (char)0xa1, 'x' };
  map[4] = (char)(k >> 8), map[5] = (char)k; /* {"k": k, "v": "x"}, k < 65536 */
  return rn_insert(p, t, map, sizeof map);
}

static int count_rows(const char *db, const char *table)
{
  sqlite3 *c = NULL;
  sqlite3_stmt *st = NULL;
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\"", table);
  int n = -1;
  if (sqlite3_open_v2(db, &c, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(c, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    n = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(c);
  return n;
}

/* A lookup "prices" (k int key, price float) on table prices of db. */
static rn_rel *declare_prices(rn_pipeline *p, const char *db)
{
  rn_err e = { 0 };
  rn_schema *s = rn_schema_new();
  int k = s ? rn_schema_add(s, "k", 1, RN_T_INT, false, NULL, &e) : -1;
  if (k < 0 || rn_schema_add(s, "price", 5, RN_T_FLOAT, true, NULL, &e) < 0 || rn_schema_set_key(s, &k, 1, "prices", &e)) {
    rn_schema_free(s);
    return NULL;
  }
  rn_lookup_fetch fetch;
  void *ctx;
  rn_free_fn free_ctx;
  if (rn_sqlite_source(db, "prices", s, "prices", &fetch, &ctx, &free_ctx, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    rn_schema_free(s);
    return NULL;
  }
  rn_lookup_opts o = { .cached = false };
  rn_rel *lk = NULL;
  return rn_declare_lookup(p, "prices", s, fetch, ctx, free_ctx, &o, &lk) == 0 ? lk : NULL;
}

/* The price of k through lk (no cache: the source is asked), or -1. */
static double price_of(rn_rel *lk, int k)
{
  msgpack_object v = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = (uint64_t)k };
  msgpack_sbuffer kb;
  msgpack_sbuffer_init(&kb);
  const char *row = NULL;
  size_t len = 0;
  double price = -1;
  if (rn_key_append(&kb, &v) == 0 && rn_lookup_get(lk, kb.data, kb.size, &row, &len) == 0 && row) {
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    if (msgpack_unpack_next(&u, row, len, NULL) == MSGPACK_UNPACK_SUCCESS && u.data.type == MSGPACK_OBJECT_ARRAY &&
        u.data.via.array.size == 2)
      price = u.data.via.array.ptr[1].via.f64;
    msgpack_unpacked_destroy(&u);
  }
  msgpack_sbuffer_destroy(&kb);
  return price;
}

/* Runs body in a child, at most 20 seconds; 0 when every step held. The
 * child reports through a pipe, not its exit status: it leaves what it
 * inherited unfreed on purpose, which valgrind (make valgrind) counts as
 * leaks in the child's status (as test_fork.c's children do). */
static int in_child(int (*body)(void *ctx), void *ctx)
{
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    alarm(20);
    int step = body(ctx);
    unsigned char said = (unsigned char)(step ? step : misuses ? 100 + (misuses < 100 ? misuses : 99) : 0);
    _exit(write(fds[1], &said, 1) == 1 ? 0 : 1);
  }
  close(fds[1]);
  unsigned char said = 0;
  int got = pid > 0 ? (int)read(fds[0], &said, 1) : -1;
  close(fds[0]);
  if (pid > 0) waitpid(pid, NULL, 0);
  if (got != 1) return -1; /* it died before saying (the alarm, a crash) */
  if (said >= 100) fprintf(stderr, "child used its parent's SQLite connections %d times\n", said - 100);
  else if (said) fprintf(stderr, "child failed at step %d\n", said);
  return said;
}

typedef struct world {
  const char *db;
  rn_pipeline *p;
  rn_rel *prices;
} world;

/* The child asks the parent's lookup (its own connection answers), then
 * closes the parent's pipeline, then its own state writes its own table
 * of the same file and asks its own lookup. */
static int child_uses_sqlite(void *ctx)
{
  world *w = ctx;
  if (price_of(w->prices, 7) != 2.5) return 1;  /* before: the parent's connection answered */
  if (rn_pipeline_close(w->p) != 0) return 2;    /* before: it finalized and closed the parent's connection */
  rn_pipeline *q = NULL;
  rn_rel *u = NULL, *mine = NULL;
  if (rn_pipeline_open(NULL, &q, NULL, 0) != 0) return 3;
  if (rn_declare_table(q, "u", cols, 2, key, 1, &u) != 0) return 4;
  if (rn_sqlite_sink(q, u, w->db, "child", 2000) != 0) return 5;
  if (insert(q, u, 1) != 0 || rn_deliver(q) != 0) return 6;
  if (count_rows(w->db, "child") != 1) return 7;
  if (!(mine = declare_prices(q, w->db)) || price_of(mine, 7) != 2.5) return 8;
  if (rn_pipeline_close(q) != 0) return 9;
  return 0;
}

static void fork_with(const char *journal)
{
  char dir[] = "/tmp/rn_sqlfork_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char db[64], sql[128];
  snprintf(db, sizeof db, "%s/o.db", dir);
  sqlite3 *c = NULL;
  CHECK(sqlite3_open_v2(db, &c, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) == SQLITE_OK);
  snprintf(sql, sizeof sql, "PRAGMA journal_mode=%s", journal);
  CHECK(sqlite3_exec(c, sql, NULL, NULL, NULL) == SQLITE_OK);
  CHECK(sqlite3_exec(c, "CREATE TABLE prices (k INTEGER PRIMARY KEY, price REAL); "
                        "INSERT INTO prices VALUES (7, 2.5)", NULL, NULL, NULL) == SQLITE_OK);
  sqlite3_close(c);
  rn_pipeline *p = NULL;
  rn_rel *t = NULL, *prices = NULL;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", cols, 2, key, 1, &t) == 0);
  CHECK(rn_sqlite_sink(p, t, db, "t", 2000) == 0);
  CHECK((prices = declare_prices(p, db)) != NULL);
  CHECK(insert(p, t, 1) == 0);
  CHECK(count_rows(db, "t") == 1);
  CHECK(price_of(prices, 7) == 2.5);
  world w = { db, p, prices };
  CHECK(in_child(child_uses_sqlite, &w) == 0);
  CHECK(insert(p, t, 2) == 0);                  /* the parent's connections go on */
  CHECK(rn_deliver(p) == 0);
  CHECK(count_rows(db, "t") == 2);
  CHECK(count_rows(db, "child") == 1);
  CHECK(price_of(prices, 7) == 2.5);
  CHECK(rn_pipeline_close(p) == 0);
  snprintf(sql, sizeof sql, "rm -rf %s", dir);
  CHECK(system(sql) == 0);
}

static void test_child_rollback_journal(void) { fork_with("DELETE"); }
static void test_child_wal(void) { fork_with("WAL"); }

int main(void)
{
  RUN(test_child_rollback_journal);
  RUN(test_child_wal);
  return CHECK_REPORT();
}
