/* attach_fixture.h — what the C tests of attaches and of the process's
 * LMDB environments (test_envs, test_envs_edges, test_attach_carry,
 * test_readers26, test_readers_remap26) ask of a state: its rows through
 * an attach, whether another process finds LMDB's lock held, a table m
 * filled for its readers, and its removal. Include after check.h. */
#ifndef RN_ATTACH_FIXTURE_H
#define RN_ATTACH_FIXTURE_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store_sink.h"

static int fixture_count_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  (void)id, (void)row, (void)len;
  (*(int *)ctx)++;
  return 0;
}

/* Rows of a, or -1 (a NULL a: its attach failed, CHECKed; else the error
 * printed). */
static inline int rows(rn_attached *a)
{
  if (!a) return -1;
  int n = 0;
  rn_err e = { 0 };
  if (rn_attach_each(a, fixture_count_row, &n, &e) == 0) return n;
  fprintf(stderr, "%s\n", e.msg);
  return -1;
}

/* Whether another process finds LMDB's lock on the state at dir held, as
 * LMDB's own open looks (F_GETLK on byte 0 of lock.mdb): 1 held, 0 free,
 * 2 or 3 the child could not tell. */
static inline int lock_held_elsewhere(const char *dir)
{
  pid_t pid = fork();
  if (pid == 0) {
    char path[256];
    snprintf(path, sizeof path, "%s/lock.mdb", dir);
    int fd = open(path, O_RDWR);
    struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
    _exit(fd < 0 || fcntl(fd, F_GETLK, &l) != 0 ? 2 : l.l_type == F_UNLCK ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}

/* Writes rows k = from … from + n - 1 (put(p, m, k) each) into table
 * m {k int key, v string} of the state at dir (its map 1 MiB when new),
 * in one group, and closes it: 0, or -1. */
static inline int fill_table_m(const char *dir, int from, int n, int (*put)(rn_pipeline *, rn_rel *, int))
{
  static const char *const mkey[] = { "k" };
  rn_open_opts o = { .path = dir, .map_size = 1 << 20 };
  rn_column_def mcols[] = { { .name = "k", .type = "int" }, { .name = "v", .type = "string" } };
  rn_pipeline *p = NULL;
  rn_rel *m = NULL;
  if (rn_pipeline_open(&o, &p, NULL, 0) || rn_declare_table(p, "m", mcols, 2, mkey, 1, &m) || rn_begin(p)) return -1;
  for (int k = from; k < from + n; k++)
    if (put(p, m, k)) return -1;
  return rn_commit(p) || rn_pipeline_close(p) ? -1 : 0;
}

static inline void remove_state(const char *dir)
{
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

#endif
