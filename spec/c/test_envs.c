/* test_envs.c — one LMDB environment per state in a process (envs.c).
 * LMDB's locks on lock.mdb are the process's: a second environment on the
 * same state resets the reader table under the first, and closing either
 * drops the locks of both. A child process looks at the lock the way
 * LMDB's own open does (F_GETLK on byte 0 of lock.mdb): while the state is
 * open in the parent, the child must find the lock held. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "attach_fixture.h"
#include "pipeline.h"
#include "store_sink.h"
#include "verify.h"

static const rn_column_def cols[] = { { .name = "k", .type = "int" }, { .name = "v", .type = "string" } };
static const char *const key[] = { "k" };

static int insert(rn_pipeline *p, rn_rel *t, int k, size_t vlen)
{
  static char map[70000] = { (char)0x82, (char)0xa1, 'k', (char)0xcd, 0, 0, (char)0xa1, 'v', (char)0xda };
  map[4] = (char)(k >> 8), map[5] = (char)k; /* {"k": k, "v": "xx…"}, k < 65536, vlen < 65536 */
  map[9] = (char)(vlen >> 8), map[10] = (char)vlen;
  memset(map + 11, 'x', vlen);
  return rn_insert(p, t, map, 11 + vlen);
}

/* A state at dir with table t holding keys 1..n (map_size: its first map). */
static void make_state(const char *dir, int n, size_t map_size)
{
  rn_open_opts o = { .path = dir, .map_size = map_size };
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  rn_rel *t = NULL;
  CHECK(rn_declare_table(p, "t", cols, 2, key, 1, &t) == 0);
  for (int k = 1; k <= n; k++) CHECK(insert(p, t, k, 10) == 0);
  CHECK(rn_pipeline_close(p) == 0);
}

/* Two attaches of one state; closing the first leaves the second's locks. */
static void test_two_attaches(void)
{
  char dir[] = "/tmp/rn_envs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, 3, 0);
  rn_attached *a1 = NULL, *a2 = NULL;
  rn_err e = { 0 };
  CHECK(rn_attach(dir, "t", NULL, &a1, &e) == 0);
  CHECK(rn_attach(dir, "t", NULL, &a2, &e) == 0);
  CHECK(lock_held_elsewhere(dir) == 1);
  if (a1) rn_attach_close(a1);
  CHECK(lock_held_elsewhere(dir) == 1);
  CHECK(rows(a2) == 3);
  rn_attach_close(a2);
  CHECK(lock_held_elsewhere(dir) == 0);
  remove_state(dir);
}

/* An attach without its owner, and rn_verify, in the writing process: the
 * writer keeps its locks after they are done. */
static void test_readers_beside_the_writer(void)
{
  char dir[] = "/tmp/rn_envs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, 3, 0);
  rn_open_opts o = { .path = dir, .nosync = 1 };
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  rn_rel *t = NULL;
  CHECK(rn_declare_table(p, "t", cols, 2, key, 1, &t) == 0);
  CHECK(insert(p, t, 4, 10) == 0); /* carried */
  rn_attached *a = NULL;
  rn_err e = { 0 };
  CHECK(rn_attach(dir, "t", NULL, &a, &e) == 0);
  CHECK(rows(a) == 4); /* it reads through the pipeline: the carried group too */
  rn_attach_close(a);
  CHECK(lock_held_elsewhere(dir) == 1);
  FILE *devnull = fopen("/dev/null", "w");
  CHECK(rn_verify(dir, devnull) == 0);
  fclose(devnull);
  CHECK(lock_held_elsewhere(dir) == 1);
  CHECK(insert(p, t, 5, 10) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  remove_state(dir);
}

/* The writer is refused while the process reads the state through an
 * environment of its own, and opens once that is closed. */
static void test_writer_after_an_attach(void)
{
  char dir[] = "/tmp/rn_envs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, 3, 0);
  rn_attached *a = NULL;
  rn_err e = { 0 };
  CHECK(rn_attach(dir, "t", NULL, &a, &e) == 0);
  rn_open_opts o = { .path = dir };
  rn_pipeline *p = NULL;
  char err[512] = "";
  CHECK(rn_pipeline_open(&o, &p, err, sizeof err) == RN_EMISUSE);
  CHECK(strstr(err, "open for reading in this process") != NULL);
  CHECK(lock_held_elsewhere(dir) == 1);
  CHECK(rows(a) == 3);
  rn_attach_close(a);
  CHECK(rn_pipeline_open(&o, &p, err, sizeof err) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  remove_state(dir);
}

/* A writer in another process grows the map past what an attach opened
 * with: the attach reads on (LMDB says MDB_MAP_RESIZED until the reader
 * takes the new size). */
static void test_map_grown_elsewhere(void)
{
  char dir[] = "/tmp/rn_envs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, 3, (size_t)1 << 20);
  rn_attached *a = NULL;
  rn_err e = { 0 };
  CHECK(rn_attach(dir, "t", NULL, &a, &e) == 0);
  CHECK(rows(a) == 3);
  pid_t pid = fork();
  if (pid == 0) {
    rn_open_opts o = { .path = dir };
    rn_pipeline *p = NULL;
    rn_rel *t = NULL;
    int rc = rn_pipeline_open(&o, &p, NULL, 0) || rn_declare_table(p, "t", cols, 2, key, 1, &t);
    for (int k = 4; k <= 200 && !rc; k++) rc = insert(p, t, k, 60000); /* 12 MB: the map doubles 4 times */
    _exit(rc || rn_pipeline_close(p) ? 1 : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(rows(a) == 200);
  rn_attach_close(a);
  remove_state(dir);
}

/* A relation declared while the pipeline carries groups, then an attach in
 * the process of a relation the pipeline did not declare: LMDB forbids
 * opening databases in two transactions at once (the second takes the
 * first's new slot). A declaration commits a transaction of its own
 * (relation.c), so the attach never meets one still open; this holds it. */
static void test_attach_while_a_declaration_is_carried(void)
{
  char dir[] = "/tmp/rn_envs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, 3, 0);
  rn_open_opts o = { .path = dir, .nosync = 1 };
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  rn_rel *v = NULL, *u = NULL;
  CHECK(rn_declare_table(p, "v", cols, 2, key, 1, &v) == 0);
  CHECK(insert(p, v, 1, 10) == 0); /* carried */
  CHECK(rn_declare_table(p, "u", cols, 2, key, 1, &u) == 0);
  CHECK(insert(p, u, 1, 10) == 0); /* carried */
  rn_attached *a = NULL;
  rn_err e = { 0 };
  CHECK(rn_attach(dir, "t", NULL, &a, &e) == 0);
  CHECK(rows(a) == 3);
  CHECK(insert(p, u, 2, 10) == 0);
  if (a) rn_attach_close(a);
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "u", cols, 2, key, 1, &u) == 0);
  CHECK(rn_attach(dir, "u", NULL, &a, &e) == 0);
  CHECK(rows(a) == 2);
  if (a) rn_attach_close(a);
  CHECK(rn_pipeline_close(p) == 0);
  remove_state(dir);
}

typedef struct other_thread {
  const char *dir;
  int attach_rc, inspect_rc, copy_rc;
  char inspect_err[512];
} other_thread;

static void *read_from_another_thread(void *arg)
{
  other_thread *o = arg;
  rn_attached *a = NULL;
  rn_err e = { 0 };
  o->attach_rc = rn_attach(o->dir, "t", NULL, &a, &e);
  if (a) rn_attach_close(a);
  rn_inspect_state st;
  o->inspect_rc = rn_inspect(o->dir, NULL, NULL, &st, o->inspect_err, sizeof o->inspect_err);
  char dest[64];
  snprintf(dest, sizeof dest, "%s-copy", o->dir);
  o->copy_rc = rn_state_copy(o->dir, dest, NULL, 0);
  return NULL;
}

/* Readers in a thread other than the writer's are refused with a message
 * (the pipeline is its thread's; a read through it, or beside it without
 * the lock file, would race with its commits and its map's growth), and
 * the writer's locks are untouched. */
static void test_reader_in_another_thread(void)
{
  char dir[] = "/tmp/rn_envs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, 3, 0);
  rn_open_opts o = { .path = dir, .nosync = 1 };
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  other_thread t = { .dir = dir };
  pthread_t th;
  CHECK(pthread_create(&th, NULL, read_from_another_thread, &t) == 0);
  pthread_join(th, NULL);
  CHECK(t.attach_rc == RN_EMISUSE && t.inspect_rc == RN_EMISUSE && t.copy_rc == RN_EMISUSE);
  CHECK(strstr(t.inspect_err, "written by this process in another thread") != NULL);
  CHECK(lock_held_elsewhere(dir) == 1);
  CHECK(rn_pipeline_close(p) == 0);
  /* the writer gone, the other thread reads */
  CHECK(pthread_create(&th, NULL, read_from_another_thread, &t) == 0);
  pthread_join(th, NULL);
  CHECK(t.attach_rc == 0 && t.inspect_rc == 0 && t.copy_rc == 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s-copy", dir);
  CHECK(system(cmd) == 0);
  remove_state(dir);
}

int main(void)
{
  RUN(test_two_attaches);
  RUN(test_readers_beside_the_writer);
  RUN(test_writer_after_an_attach);
  RUN(test_map_grown_elsewhere);
  RUN(test_attach_while_a_declaration_is_carried);
  RUN(test_reader_in_another_thread);
  return CHECK_REPORT();
}
