/* test_fork.c — a forked child and the handles it inherits (store.h's
 * rn_store_forked): LMDB forbids using an environment across fork, so
 * every use in the child of a pipeline or an attach the parent opened is
 * refused with a message, while closing them in the child is harmless to
 * the parent: its open group, its carried groups, its read snapshot (its
 * slot in LMDB's reader table), its locks and its temporary state. Each
 * child does a bounded number of calls and reports by its exit status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "attach_fixture.h"
#include "pipeline.h"

#define FORKED "before a fork; open it again in this process"
#define ATTACH_FORKED "before a fork; attach it again in this process"

static const rn_column_def cols[] = { { .name = "k", .type = "int" }, { .name = "v", .type = "string" } };
static const char *const key[] = { "k" };

static int insert(rn_pipeline *p, rn_rel *t, int k)
{
  char map[] = { (char)0x82, (char)0xa1, 'k', (char)0xcd, 0, 0, (char)0xa1, 'v', (char)0xa1, 'x' };
  map[4] = (char)(k >> 8), map[5] = (char)k; /* {"k": k, "v": "x"}, k < 65536 */
  return rn_insert(p, t, map, sizeof map);
}

/* A child's result: 0 when every step held, else the first step that did
 * not (so the parent's CHECK says which). */
static int failed_step;
#define STEP(n, cond) do { if (!failed_step && !(cond)) failed_step = (n); } while (0)

/* Forks; the child runs body and reports failed_step through a pipe, not
 * its exit status: it leaves the parent's transactions unfreed on purpose,
 * which valgrind (make valgrind) counts as leaks in the child's status.
 * In the parent: the child's result, -1 when it died before saying. */
static int in_child(int (*body)(void *ctx), void *ctx)
{
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    unsigned char step = (unsigned char)body(ctx);
    _exit(write(fds[1], &step, 1) == 1 ? 0 : 1);
  }
  close(fds[1]);
  unsigned char step = 0;
  int got = pid > 0 ? (int)read(fds[0], &step, 1) : -1;
  close(fds[0]);
  if (pid > 0) waitpid(pid, NULL, 0);
  if (got != 1) return -1;
  if (step) fprintf(stderr, "child failed at step %d\n", step);
  return step;
}

/* LMDB reader slots of process pid on the state at dir, as a process of
 * its own sees them (mdb_reader_list: "%10d %zx %-20s\n", pid …). */
static int slot_of(const char *msg, void *ctx)
{
  int *want = ctx;
  if (atoi(msg) == want[0]) want[1]++;
  return 0;
}

static int readers_of(const char *dir, pid_t pid)
{
  pid_t lister = fork();
  if (lister == 0) {
    MDB_env *env = NULL;
    int want[2] = { (int)pid, 0 };
    if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 4096) || mdb_env_open(env, dir, MDB_RDONLY, 0644)) _exit(99);
    mdb_reader_list(env, slot_of, want);
    mdb_env_close(env);
    _exit(want[1]);
  }
  int status = 0;
  waitpid(lister, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static bool refused(rn_pipeline *p, int rc)
{
  return rc == RN_EMISUSE && strstr(rn_errmsg(p), FORKED) != NULL;
}

typedef struct inherited {
  const char *dir;
  rn_pipeline *p;
  rn_rel *t;
  rn_attached *borrowed;
  rn_cursor *c;
} inherited;

/* The child: every call on the inherited pipeline and attaches refused;
 * then closed; then its own attach reads the state. */
static int use_in_child(void *ctx)
{
  inherited *in = ctx;
  const char *dir = in->dir;
  rn_pipeline *p = in->p;
  rn_rel *t = in->t;
  rn_attached *borrowed = in->borrowed;
  const void *row;
  size_t len;
  rn_cursor *c = NULL;
  rn_rel *u = NULL;
  char expect[128];
  snprintf(expect, sizeof expect, "opened by process %ld " ATTACH_FORKED, (long)getppid());
  STEP(1, refused(p, insert(p, t, 99)));
  STEP(2, refused(p, rn_get(p, t, "\x81\xa1k\x01", 4, &row, &len, NULL)));
  STEP(3, refused(p, rn_commit(p)));
  STEP(4, refused(p, rn_rollback(p)));
  STEP(5, refused(p, rn_flush(p)));
  STEP(6, refused(p, rn_cursor_open(p, t, &c)) && !c);
  STEP(7, refused(p, rn_declare_table(p, "u", cols, 2, key, 1, &u)));
  rn_err e = { 0 };
  int n = 0;
  STEP(8, rn_attach_each(borrowed, fixture_count_row, &n, &e) == RN_EMISUSE && strstr(e.msg, expect) && n == 0);
  rn_attach_close(borrowed);
  STEP(9, rn_pipeline_close(p) == 0);
  rn_attached *mine = NULL;
  STEP(10, rn_attach(dir, "t", NULL, &mine, &e) == 0 && rows(mine) == 3); /* what the parent committed */
  rn_attach_close(mine);
  return failed_step;
}

/* The parent holds a group open (nosync: carried groups beneath it), an
 * attach borrowing its pipeline and an attach of another state; the child
 * uses and closes them all; the parent's group commits, its state holds
 * every row, its locks are held, and the other attach reads on. */
static void test_child_uses_inherited_handles(void)
{
  char dir[] = "/tmp/rn_fork_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts o = { .path = dir, .nosync = 1 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", cols, 2, key, 1, &t) == 0);
  for (int k = 1; k <= 3; k++) CHECK(insert(p, t, k) == 0);
  CHECK(rn_flush(p) == 0);
  CHECK(insert(p, t, 4) == 0); /* carried */
  CHECK(rn_begin(p) == 0);
  CHECK(insert(p, t, 5) == 0); /* in the open group */
  rn_attached *borrowed = NULL;
  rn_err e = { 0 };
  CHECK(rn_attach(dir, "t", NULL, &borrowed, &e) == 0);
  inherited in = { dir, p, t, borrowed, NULL };
  CHECK(in_child(use_in_child, &in) == 0);
  CHECK(lock_held_elsewhere(dir) == 1);
  CHECK(insert(p, t, 6) == 0);
  CHECK(rn_commit(p) == 0);
  CHECK(rows(borrowed) == 6);
  rn_attach_close(borrowed);
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(lock_held_elsewhere(dir) == 0);
  rn_attached *a = NULL;
  CHECK(rn_attach(dir, "t", NULL, &a, &e) == 0 && rows(a) == 6);
  rn_attach_close(a);
  remove_state(dir);
}

/* The child: the cursor refused, then it and the pipeline closed. */
static int close_in_child(void *ctx)
{
  inherited *in = ctx;
  const void *row;
  size_t len;
  uint64_t id;
  int done = 0;
  STEP(1, rn_cursor_next(in->c, &row, &len, &id, &done) == RN_EMISUSE && strstr(rn_errmsg(in->p), FORKED));
  rn_cursor_close(in->c);
  STEP(2, rn_pipeline_close(in->p) == 0);
  return failed_step;
}

/* The parent reads through a cursor (a read transaction of its own, a
 * slot in LMDB's reader table) while the child closes the pipeline and the
 * cursor: the parent's slot stays (a writer elsewhere would otherwise reuse
 * the pages it reads), and a temporary state's directory stays the
 * parent's until its own close. */
static void test_child_closes_a_temporary_state_being_read(void)
{
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  char dir[256];
  snprintf(dir, sizeof dir, "%s", p->store.path);
  CHECK(rn_declare_table(p, "t", cols, 2, key, 1, &t) == 0);
  for (int k = 1; k <= 3; k++) CHECK(insert(p, t, k) == 0);
  rn_cursor *c = NULL;
  CHECK(rn_cursor_open(p, t, &c) == 0);
  const void *row;
  size_t len;
  uint64_t id;
  int done = 0;
  CHECK(rn_cursor_next(c, &row, &len, &id, &done) == 0 && !done && id == 1);
  int slots = readers_of(dir, getpid());
  inherited in = { dir, p, t, NULL, c };
  CHECK(in_child(close_in_child, &in) == 0);
  CHECK(slots >= 1);
  CHECK(readers_of(dir, getpid()) == slots);
  struct stat st;
  CHECK(stat(dir, &st) == 0);
  int n = 1;
  while (rn_cursor_next(c, &row, &len, &id, &done) == 0 && !done) n++;
  CHECK(n == 3);
  rn_cursor_close(c);
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(stat(dir, &st) != 0); /* the parent's close removed it */
}

int main(void)
{
  RUN(test_child_uses_inherited_handles);
  RUN(test_child_closes_a_temporary_state_being_read);
  return CHECK_REPORT();
}
