/* test_envs_edges.c — the edges of one LMDB environment per state per
 * process (envs.c): threads sharing one reader environment, a forked child
 * holding its parent's handles, a state directory replaced under a handle. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "attach_fixture.h"
#include "envs.h"
#include "pipeline.h"
#include "store_sink.h"
#include "verify.h"

static const rn_column_def cols[] = { { .name = "k", .type = "int" }, { .name = "v", .type = "string" } };
static const char *const key[] = { "k" };

#define TABLES 24

static int insert(rn_pipeline *p, rn_rel *t, int k)
{
  char map[] = { (char)0x82, (char)0xa1, 'k', (char)0xcd, 0, 0, (char)0xa1, 'v', (char)0xa1, 'x' };
  map[4] = (char)(k >> 8), map[5] = (char)k; /* {"k": k, "v": "x"}, k < 65536 */
  return rn_insert(p, t, map, sizeof map);
}

/* A state at dir with tables t0..t<tables-1>, table ti holding i + 1 rows:
 * a read of the wrong table shows in its count. */
static void make_state(const char *dir, int tables)
{
  rn_open_opts o = { .path = dir };
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  for (int i = 0; i < tables; i++) {
    char name[16];
    snprintf(name, sizeof name, "t%d", i);
    rn_rel *t = NULL;
    CHECK(rn_declare_table(p, name, cols, 2, key, 1, &t) == 0);
    CHECK(rn_begin(p) == 0);
    for (int k = 1; k <= i + 1; k++) CHECK(insert(p, t, k) == 0);
    CHECK(rn_commit(p) == 0);
  }
  CHECK(rn_pipeline_close(p) == 0);
}

/* ---- threads sharing the readers' environment ---- */

typedef struct race {
  const char *dir;
  pthread_barrier_t start;   /* both threads attach at once, then close at once */
  struct timespec until;     /* rounds run until then, or until a read goes wrong */
  bool stop;                 /* set by thread 0 between rounds */
  int rounds, wrong;         /* rounds run; attaches that failed or read another table's rows */
  pthread_mutex_t lock;      /* over wrong */
} race;

typedef struct racer {
  race *r;
  int role;                  /* 0: attaches t0 first, 1: the last table first, 2: verifies and inspects */
} racer;

static bool past(const struct timespec *until)
{
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec > until->tv_sec || (now.tv_sec == until->tv_sec && now.tv_nsec >= until->tv_nsec);
}

/* Attaches every table, in this thread's order, and reads each. */
static void attach_all(racer *me, rn_attached **a)
{
  for (int j = 0; j < TABLES; j++) {
    int i = me->role ? TABLES - 1 - j : j;
    char name[16];
    snprintf(name, sizeof name, "t%d", i);
    rn_err e = { 0 };
    int n = rn_attach(me->r->dir, name, NULL, &a[i], &e) == 0 ? rows(a[i]) : -1;
    if (n == i + 1) continue;
    pthread_mutex_lock(&me->r->lock);
    if (!me->r->wrong++) fprintf(stderr, "%s: %d rows %s\n", name, n, e.msg);
    pthread_mutex_unlock(&me->r->lock);
  }
}

/* rn_verify and rn_inspect of the state, which open every database. */
static void verify_and_inspect(racer *me)
{
  FILE *devnull = fopen("/dev/null", "w");
  rn_inspect_state st;
  char err[256] = "";
  int bad = rn_verify(me->r->dir, devnull) != 0 || rn_inspect(me->r->dir, NULL, NULL, &st, err, sizeof err) != 0 ||
            st.relations != TABLES;
  fclose(devnull);
  pthread_mutex_lock(&me->r->lock);
  if (bad && !me->r->wrong++) fprintf(stderr, "verify or inspect: %s\n", err);
  pthread_mutex_unlock(&me->r->lock);
}

/* Each round both threads attach every table (or verify) into an environment the
 * round opened anew (the last close of the one before closed it), so the
 * two open LMDB databases on it at the same time. */
static void *attach_tables(void *arg)
{
  racer *me = arg;
  race *r = me->r;
  while (!r->stop) {
    rn_attached *a[TABLES] = { 0 };
    pthread_barrier_wait(&r->start);
    if (me->role == 2) verify_and_inspect(me);
    else attach_all(me, a);
    for (int i = 0; i < TABLES; i++) rn_attach_close(a[i]);
    if (pthread_barrier_wait(&r->start) == PTHREAD_BARRIER_SERIAL_THREAD) { /* both closed */
      r->rounds++;
      r->stop = past(&r->until) || r->wrong;
    }
    pthread_barrier_wait(&r->start); /* both see stop alike */
  }
  return NULL;
}

/* Two threads at once, racer roles a and b, for a second and a half. */
static void race_two(int a, int b)
{
  char dir[] = "/tmp/rn_envs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, TABLES);
  race r = { .dir = dir };
  pthread_barrier_init(&r.start, NULL, 2);
  pthread_mutex_init(&r.lock, NULL);
  clock_gettime(CLOCK_MONOTONIC, &r.until);
  r.until.tv_nsec += 500000000;
  r.until.tv_sec += 1 + r.until.tv_nsec / 1000000000;
  r.until.tv_nsec %= 1000000000;
  racer me[2] = { { &r, a }, { &r, b } };
  pthread_t th[2];
  for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, attach_tables, &me[i]) == 0);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&r.start);
  pthread_mutex_destroy(&r.lock);
  CHECK(r.wrong == 0);
  if (r.wrong) fprintf(stderr, "%d wrong reads in %d rounds\n", r.wrong, r.rounds);
  CHECK(rn_envs_readers(dir) == 0);
  remove_state(dir);
}

/* Two threads attach a state no thread writes, at once: they share one
 * environment, and LMDB forbids opening databases in two transactions at
 * once (the second takes the slot the first is filling, and a handle then
 * reads another table). */
static void test_threads_attach_at_once(void) { race_two(0, 1); }

/* rn_verify and rn_inspect in one thread, attaches in another: they open
 * databases on the shared environment too. */
static void test_threads_verify_beside_attaches(void) { race_two(0, 2); }

/* ---- a forked child ---- */

/* Reader slots of LMDB's table on env that name this process. */
static int readers_of_mine(const char *msg, void *ctx)
{
  char mine[32];
  snprintf(mine, sizeof mine, "%10d ", (int)getpid()); /* mdb_reader_list: "%10d %zx %-20s\n", pid … */
  if (strncmp(msg, mine, strlen(mine)) == 0) (*(int *)ctx)++;
  return 0;
}

static int my_readers(const char *dir)
{
  MDB_env *env = NULL;
  rn_err e = { 0 };
  int n = 0;
  if (rn_envs_acquire(dir, &env, &e) != 0) return -1;
  mdb_reader_list(env, readers_of_mine, &n);
  rn_envs_release(env);
  return n;
}

typedef struct forking {
  const char *dir;
  rn_attached *a;
  int seen, readers_before, readers_after, child_status;
} forking;

/* On the first row, with the walk's read transaction open: a child that
 * closes what it inherited (the attach), then attaches on its own. */
static int fork_on_first_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  forking *f = ctx;
  (void)id, (void)row, (void)len;
  if (f->seen++) return 0;
  f->readers_before = my_readers(f->dir);
  pid_t pid = fork();
  if (pid == 0) {
    rn_attach_close(f->a); /* not its own: LMDB's environment is the parent's */
    rn_attached *mine = NULL;
    rn_err e = { 0 };
    int ok = rn_attach(f->dir, "t2", NULL, &mine, &e) == 0 && rows(mine) == 3;
    rn_attach_close(mine);
    _exit(ok ? 0 : 1);
  }
  waitpid(pid, &f->child_status, 0);
  f->readers_after = my_readers(f->dir);
  return 0;
}

/* A child forked while the parent reads closes the handle it inherited and
 * attaches on its own: the parent's read keeps its slot in LMDB's reader
 * table (else a writer elsewhere may reuse the pages it reads), and its
 * environment stays open. */
static void test_child_closes_an_inherited_attach(void)
{
  char dir[] = "/tmp/rn_envs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, 3);
  forking f = { .dir = dir };
  rn_err e = { 0 };
  CHECK(rn_attach(dir, "t2", NULL, &f.a, &e) == 0);
  CHECK(rn_attach_each(f.a, fork_on_first_row, &f, &e) == 0);
  CHECK(WIFEXITED(f.child_status) && WEXITSTATUS(f.child_status) == 0);
  CHECK(f.readers_before == 1);
  CHECK(f.readers_after == 1);
  CHECK(rows(f.a) == 3);
  CHECK(rn_envs_readers(dir) == 1);
  rn_attach_close(f.a);
  remove_state(dir);
}

/* A child forked while its parent holds an attach writes the state: the
 * parent's handles are not its own, so its writer is not refused; the
 * parent keeps its locks and reads what the child wrote. */
static void test_child_writes_beside_the_parents_attach(void)
{
  char dir[] = "/tmp/rn_envs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, 3);
  rn_attached *a = NULL;
  rn_err e = { 0 };
  CHECK(rn_attach(dir, "t2", NULL, &a, &e) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    rn_open_opts o = { .path = dir };
    rn_pipeline *p = NULL;
    rn_rel *t = NULL;
    int rc = rn_pipeline_open(&o, &p, NULL, 0) || rn_declare_table(p, "t2", cols, 2, key, 1, &t) || insert(p, t, 4);
    _exit(rc || rn_pipeline_close(p) ? 1 : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(lock_held_elsewhere(dir) == 1);
  CHECK(rows(a) == 4);
  rn_attach_close(a);
  CHECK(lock_held_elsewhere(dir) == 0);
  remove_state(dir);
}

/* ---- attaches that fail, and paths that name one state ---- */

/* Attaches that fail after the environment was taken (no such relation)
 * or while it opens (not a state) give it back: the last close lets go of
 * LMDB's lock, and the writer is not refused afterwards. */
static void test_failed_attaches_give_the_environment_back(void)
{
  char dir[] = "/tmp/rn_envs_XXXXXX", empty[] = "/tmp/rn_envs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL && mkdtemp(empty) != NULL);
  make_state(dir, 3);
  rn_attached *a = NULL, *b = NULL;
  rn_err e = { 0 };
  CHECK(rn_attach(dir, "t1", NULL, &a, &e) == 0);
  CHECK(rn_attach(dir, "nope", NULL, &b, &e) == RN_ENOTFOUND && !b);
  CHECK(rn_envs_readers(dir) == 1);
  CHECK(rn_attach(empty, "t1", NULL, &b, &e) != 0 && !b);
  CHECK(rn_envs_readers(empty) == 0);
  rn_attach_close(a);
  CHECK(rn_envs_readers(dir) == 0);
  CHECK(rn_attach(dir, "nope", NULL, &b, &e) == RN_ENOTFOUND && !b);
  CHECK(rn_envs_readers(dir) == 0);
  CHECK(lock_held_elsewhere(dir) == 0);
  rn_open_opts o = { .path = dir };
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  remove_state(dir);
  remove_state(empty);
}

/* A state named by a symbolic link and by a relative path is one state:
 * its writer is refused beside an attach through the link, and an attach
 * through either, beside its writer, reads through the pipeline (the
 * carried group too) and leaves the writer's locks. */
static void test_one_state_by_several_paths(void)
{
  char dir[] = "/tmp/rn_envs_XXXXXX", link[64], cwd[4096];
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, 3);
  snprintf(link, sizeof link, "%s-link", dir);
  CHECK(symlink(dir, link) == 0);
  rn_attached *a = NULL;
  rn_err e = { 0 };
  CHECK(rn_attach(link, "t2", NULL, &a, &e) == 0);
  rn_open_opts o = { .path = dir, .nosync = 1 };
  rn_pipeline *p = NULL;
  char err[512] = "";
  CHECK(rn_pipeline_open(&o, &p, err, sizeof err) == RN_EMISUSE);
  rn_attach_close(a);
  CHECK(rn_pipeline_open(&o, &p, err, sizeof err) == 0);
  rn_rel *t = NULL;
  CHECK(rn_declare_table(p, "t2", cols, 2, key, 1, &t) == 0);
  CHECK(insert(p, t, 4) == 0); /* carried */
  CHECK(getcwd(cwd, sizeof cwd) != NULL && chdir("/tmp") == 0);
  const char *paths[] = { link, dir + strlen("/tmp/"), link + strlen("/tmp/") };
  for (int i = 0; i < 3; i++) {
    a = NULL;
    CHECK(rn_attach(paths[i], "t2", NULL, &a, &e) == 0);
    CHECK(a && rows(a) == 4);
    rn_attach_close(a);
    CHECK(rn_envs_readers(paths[i]) == 0);
  }
  CHECK(chdir(cwd) == 0);
  CHECK(lock_held_elsewhere(dir) == 1);
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(unlink(link) == 0);
  remove_state(dir);
}

/* ---- rn_verify in a thread other than the writer's ---- */

typedef struct verifier {
  const char *dir;
  int rc;
} verifier;

static void *verify_elsewhere(void *arg)
{
  verifier *v = arg;
  FILE *devnull = fopen("/dev/null", "w");
  v->rc = rn_verify(v->dir, devnull);
  fclose(devnull);
  return NULL;
}

/* rn_verify from a thread other than the writer's is refused, as rn_attach,
 * rn_inspect and rn_state_copy are (test_envs.c), and leaves the writer's
 * locks; once the writer closed, it verifies. */
static void test_verify_in_another_thread(void)
{
  char dir[] = "/tmp/rn_envs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, 3);
  rn_open_opts o = { .path = dir };
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  verifier v = { dir, 1 };
  pthread_t th;
  CHECK(pthread_create(&th, NULL, verify_elsewhere, &v) == 0);
  pthread_join(th, NULL);
  CHECK(v.rc == RN_EMISUSE);
  CHECK(lock_held_elsewhere(dir) == 1);
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(pthread_create(&th, NULL, verify_elsewhere, &v) == 0);
  pthread_join(th, NULL);
  CHECK(v.rc == 0);
  remove_state(dir);
}

/* ---- a state directory removed and made again ---- */

/* A state removed while an attach of it is open, and a new one made at
 * the same path: the new one's writer is not refused, an attach reads the
 * new one, and the old attach reads on what it had. (The registry keys a
 * state by its directory's inode; ext4 does not give the new directory
 * the old one's while files in it are open, so the two never meet.) */
static void test_state_made_again_under_an_attach(void)
{
  char dir[] = "/tmp/rn_envs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, 3);
  rn_attached *old = NULL, *fresh = NULL;
  rn_err e = { 0 };
  CHECK(rn_attach(dir, "t2", NULL, &old, &e) == 0);
  remove_state(dir);
  CHECK(mkdir(dir, 0700) == 0);
  make_state(dir, 5); /* its writer */
  CHECK(rn_attach(dir, "t4", NULL, &fresh, &e) == 0);
  CHECK(fresh && rows(fresh) == 5);
  CHECK(old && rows(old) == 3);
  rn_attach_close(old);
  rn_attach_close(fresh);
  CHECK(rn_envs_readers(dir) == 0);
  remove_state(dir);
}

/* A state's files removed (the directory kept) while an attach of it is
 * open, and a new state made in the directory: the registry took the new
 * one for the old (one directory inode), refusing its writer in this
 * process ("open for reading") and giving a new attach the old one's
 * environment on deleted files (no "t4" there). The old attach reads on
 * what it had. */
static void test_state_files_made_again_under_an_attach(void)
{
  char dir[] = "/tmp/rn_envs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, 3);
  rn_attached *old = NULL, *fresh = NULL;
  rn_err e = { 0 };
  CHECK(rn_attach(dir, "t2", NULL, &old, &e) == 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -f %s/*", dir);
  CHECK(system(cmd) == 0);
  make_state(dir, 5); /* its writer, in this process */
  CHECK(rn_attach(dir, "t4", NULL, &fresh, &e) == 0);
  CHECK(rows(fresh) == 5);
  CHECK(rows(old) == 3);
  rn_attach_close(old);
  CHECK(rn_envs_readers(dir) == 1);
  rn_attach_close(fresh);
  CHECK(rn_envs_readers(dir) == 0);
  CHECK(lock_held_elsewhere(dir) == 0);
  remove_state(dir);
}

/* ---- what rn_inspect reports ---- */

/* rn_inspect reads through the readers' environment, which maps far more
 * than the state: it reports the state's own map (what its writer maps),
 * as it did with an environment of its own, not the reader's mapping. */
static void test_inspect_reports_the_states_map(void)
{
  char dir[] = "/tmp/rn_envs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts o = { .path = dir, .map_size = (size_t)8 << 20 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", cols, 2, key, 1, &t) == 0);
  CHECK(insert(p, t, 1) == 0);
  rn_inspect_state st;
  char err[256] = "";
  CHECK(rn_inspect(dir, NULL, NULL, &st, err, sizeof err) == 0); /* beside the writer: no lock file */
  CHECK(st.map_size == (uint64_t)8 << 20);
  CHECK(rn_pipeline_close(p) == 0);
  rn_attached *a = NULL;
  rn_err e = { 0 };
  CHECK(rn_attach(dir, "t", NULL, &a, &e) == 0); /* the readers' environment is open */
  CHECK(rn_inspect(dir, NULL, NULL, &st, err, sizeof err) == 0);
  if (st.map_size != (uint64_t)8 << 20) fprintf(stderr, "map %llu\n", (unsigned long long)st.map_size);
  CHECK(st.map_size == (uint64_t)8 << 20);
  rn_attach_close(a);
  CHECK(rn_inspect(dir, NULL, NULL, &st, err, sizeof err) == 0);
  CHECK(st.map_size == (uint64_t)8 << 20);
  remove_state(dir);
}

/* ---- copies in two threads ---- */

typedef struct copier {
  const char *dir;
  char dest[64];
  int rc[8];
} copier;

/* Eight copies of the state, each into a directory of its own. */
static void *copy_eight(void *arg)
{
  copier *c = arg;
  for (int i = 0; i < 8; i++) {
    char dest[96];
    snprintf(dest, sizeof dest, "%s-%d", c->dest, i);
    c->rc[i] = rn_state_copy(c->dir, dest, NULL, 0);
  }
  return NULL;
}

/* Two threads copy one state no thread writes, at once: each copy's file
 * written beside has a name of its own (a name both took would have one
 * thread remove the other's file as a killed copy's). */
static void test_threads_copy_at_once(void)
{
  char dir[] = "/tmp/rn_envs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, 3);
  copier c[2] = { { .dir = dir }, { .dir = dir } };
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    snprintf(c[i].dest, sizeof c[i].dest, "%s-copy%d", dir, i);
    CHECK(pthread_create(&th[i], NULL, copy_eight, &c[i]) == 0);
  }
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  FILE *devnull = fopen("/dev/null", "w");
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 8; j++) {
      char dest[96];
      snprintf(dest, sizeof dest, "%s-%d", c[i].dest, j);
      CHECK(c[i].rc[j] == 0 && rn_verify(dest, devnull) == 0);
    }
  fclose(devnull);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s-copy*", dir);
  CHECK(system(cmd) == 0);
  remove_state(dir);
}

/* ---- rn_inspect's callback writing through the pipeline ---- */

typedef struct writing_inspector {
  rn_pipeline *p;
  rn_rel *t;
  int next_key, calls, bad;
} writing_inspector;

/* Each relation reported: checks its row count (ti holds i + 1 rows, the
 * written table more), then writes 50 groups through the pipeline. */
static int write_while_inspected(void *ctx, const rn_inspect_relation *rel)
{
  writing_inspector *w = ctx;
  int i = atoi(rel->name + 1);
  if (strcmp(rel->name, "t0") != 0 && rel->rows != i + 1) w->bad++;
  w->calls++;
  for (int n = 0; n < 50; n++) {
    if (insert(w->p, w->t, w->next_key) != 0) w->bad++;
    if (rn_delete(w->p, w->t, (char[]){ (char)0x81, (char)0xa1, 'k', (char)0xcd, (char)(w->next_key >> 8),
                                        (char)w->next_key }, 6) != 0) w->bad++;
    w->next_key++;
  }
  return 0;
}

/* rn_inspect of the state this thread writes, whose callback writes
 * through the pipeline: the groups it commits do not take the pages the
 * walk still reads. */
static void test_inspect_callback_writes(void)
{
  char dir[] = "/tmp/rn_envs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, TABLES);
  rn_open_opts o = { .path = dir };
  writing_inspector w = { .next_key = 1000 };
  CHECK(rn_pipeline_open(&o, &w.p, NULL, 0) == 0);
  CHECK(rn_declare_table(w.p, "t0", cols, 2, key, 1, &w.t) == 0);
  rn_inspect_state st;
  char err[256] = "";
  int rc = rn_inspect(dir, write_while_inspected, &w, &st, err, sizeof err);
  if (rc || w.bad || w.calls != TABLES) fprintf(stderr, "rc %d (%s), %d bad, %d calls\n", rc, err, w.bad, w.calls);
  CHECK(rc == 0 && w.bad == 0 && w.calls == TABLES);
  CHECK(rn_pipeline_close(w.p) == 0);
  remove_state(dir);
}

/* rn_inspect's callback closes the pipeline writing the state: the walk
 * reads on from its own environment, and ends without touching the
 * closed one's. */
static int close_while_inspected(void *ctx, const rn_inspect_relation *rel)
{
  rn_pipeline **p = ctx;
  (void)rel;
  if (*p) CHECK(rn_pipeline_close(*p) == 0);
  *p = NULL;
  return 0;
}

static void test_inspect_callback_closes_the_writer(void)
{
  char dir[] = "/tmp/rn_envs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, 3);
  rn_open_opts o = { .path = dir };
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  rn_inspect_state st;
  char err[256] = "";
  CHECK(rn_inspect(dir, close_while_inspected, &p, &st, err, sizeof err) == 0 && st.relations == 3);
  CHECK(p == NULL);
  remove_state(dir);
}

int main(void)
{
  RUN(test_threads_attach_at_once);
  RUN(test_threads_verify_beside_attaches);
  RUN(test_child_closes_an_inherited_attach);
  RUN(test_child_writes_beside_the_parents_attach);
  RUN(test_failed_attaches_give_the_environment_back);
  RUN(test_one_state_by_several_paths);
  RUN(test_verify_in_another_thread);
  RUN(test_state_made_again_under_an_attach);
  RUN(test_state_files_made_again_under_an_attach);
  RUN(test_inspect_reports_the_states_map);
  RUN(test_threads_copy_at_once);
  RUN(test_inspect_callback_writes);
  RUN(test_inspect_callback_closes_the_writer);
  return CHECK_REPORT();
}
