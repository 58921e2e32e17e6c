/* test_sqlite_upgrade.c — two processes declaring SQLite sinks at once on
 * a database whose runnel_sinks an older runnel made (tbl, seq only): the
 * columns runnel adds (state, state_path, made) are added once, and both
 * declarations succeed (core/sqlite.c, marks_table). Each upgrade used to
 * look at the layout, then add each column it lacked, outside any lock: a
 * process that looked before the other added a column failed on adding
 * it ("duplicate column name"). A third process holds SQLite's write
 * lock while both children look, so both see the old layout, then lets
 * them go; each child reports its result through a pipe. Bounded by
 * alarm(). */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "pipeline.h"
#include "sqlite.h"

static const rn_column_def cols[] = { { .name = "k", .type = "int" }, { .name = "v", .type = "int" } };
static const char *const key[] = { "k" };

typedef struct child {
  pid_t pid;
  int ready;              /* read end: one byte once it is about to declare the sink */
  int result;             /* read end: its rn_sqlite_sink's code, then its message */
} child;

/* The child: its own state at dir/name, the sink on table name of db. */
static child spawn(const char *dir, const char *db, const char *name)
{
  int ready[2], result[2];
  child c = { -1, -1, -1 };
  if (pipe(ready) != 0) return c;
  if (pipe(result) != 0) { close(ready[0]); close(ready[1]); return c; }
  c.pid = fork();
  if (c.pid == 0) {
    close(ready[0]);
    close(result[0]);
    char path[512], msg[1024] = "";
    snprintf(path, sizeof path, "%s/%s", dir, name);
    rn_open_opts o = { 0 };
    o.path = path;
    rn_pipeline *p = NULL;
    rn_rel *t = NULL;
    int rc = rn_pipeline_open(&o, &p, msg, sizeof msg);
    if (!rc && (rc = rn_declare_table(p, "t", cols, 2, key, 1, &t))) snprintf(msg, sizeof msg, "%s", rn_errmsg(p));
    if (write(ready[1], "r", 1) != 1) _exit(2);
    if (!rc && (rc = rn_sqlite_sink(p, t, db, name, 10000))) snprintf(msg, sizeof msg, "%s", rn_errmsg(p));
    if (p) rn_pipeline_close(p);
    int n = (int)strlen(msg) + 1;
    _exit(write(result[1], &rc, sizeof rc) == sizeof rc && write(result[1], msg, (size_t)n) == n ? 0 : 1);
  }
  close(ready[1]);
  close(result[1]);
  c.ready = ready[0];
  c.result = result[0];
  return c;
}

/* The child's code (-1: it said nothing), its message into msg. */
static int reap(child *c, char *msg, size_t len)
{
  int rc = -1;
  msg[0] = 0;
  if (read(c->result, &rc, sizeof rc) != sizeof rc) rc = -1;
  ssize_t n = read(c->result, msg, len - 1);
  msg[n > 0 ? n : 0] = 0;
  close(c->ready);
  close(c->result);
  waitpid(c->pid, NULL, 0);
  return rc;
}

static int count(sqlite3 *db, const char *sql)
{
  sqlite3_stmt *st;
  int n = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  return n;
}

/* A process holding SQLite's write lock on db (a connection of its own:
 * SQLite's locks are per process, and a connection open across fork
 * would lock the children out for good) until a byte comes on *go. */
static pid_t hold_lock(const char *db, int *go)
{
  int locked[2], release[2];
  if (pipe(locked) != 0) return -1;
  if (pipe(release) != 0) { close(locked[0]); close(locked[1]); return -1; }
  pid_t pid = fork();
  if (pid == 0) {
    close(locked[0]);
    close(release[1]);
    sqlite3 *h = NULL;
    char r;
    int ok = sqlite3_open(db, &h) == SQLITE_OK && sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK;
    if (write(locked[1], ok ? "l" : "x", 1) != 1 || read(release[0], &r, 1) != 1) ok = 0;
    ok = ok && sqlite3_exec(h, "COMMIT", NULL, NULL, NULL) == SQLITE_OK;
    sqlite3_close(h);
    _exit(ok ? 0 : 1);
  }
  close(locked[1]);
  close(release[0]);
  char r = 0;
  if (pid < 0 || read(locked[0], &r, 1) != 1 || r != 'l') {
    close(locked[0]);
    close(release[1]);
    return -1;
  }
  close(locked[0]);
  *go = release[1];
  return pid;
}

static void test_two_processes_upgrade_at_once(void)
{
  char dir[] = "/tmp/runnel-sqlite-upgrade-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char db_path[128];
  snprintf(db_path, sizeof db_path, "%s/out.db", dir);
  sqlite3 *db = NULL;
  CHECK(sqlite3_open(db_path, &db) == SQLITE_OK);
  CHECK(sqlite3_exec(db, "CREATE TABLE runnel_sinks (tbl TEXT PRIMARY KEY, seq INTEGER NOT NULL)", NULL, NULL, NULL) ==
        SQLITE_OK);
  sqlite3_close(db); /* no connection open across the forks */
  int go = -1;
  pid_t holder = hold_lock(db_path, &go);
  CHECK(holder > 0);
  child c[2] = { spawn(dir, db_path, "one"), spawn(dir, db_path, "two") };
  char r;
  for (int i = 0; i < 2; i++) CHECK(c[i].pid > 0 && read(c[i].ready, &r, 1) == 1);
  struct timespec wait = { 0, 300 * 1000 * 1000 }; /* until both read the old layout and wait for the lock */
  nanosleep(&wait, NULL);
  int status = -1;
  CHECK(go >= 0 && write(go, "g", 1) == 1);
  if (holder > 0) waitpid(holder, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (go >= 0) close(go);
  char msg[1024];
  for (int i = 0; i < 2; i++) {
    int rc = reap(&c[i], msg, sizeof msg);
    if (rc) fprintf(stderr, "child %d: %d %s\n", i, rc, msg);
    CHECK(rc == 0);
  }
  CHECK(sqlite3_open(db_path, &db) == SQLITE_OK);
  CHECK(count(db, "SELECT count(*) FROM pragma_table_info('runnel_sinks')") == 5);
  CHECK(count(db, "SELECT count(*) FROM runnel_sinks WHERE state IS NOT NULL AND state_path IS NOT NULL") == 2);
  sqlite3_close(db);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  alarm(60); /* a child stuck on a lock fails the test, not the run */
  RUN(test_two_processes_upgrade_at_once);
  return CHECK_REPORT();
}
