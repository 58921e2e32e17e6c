/* attach_fixture.h — what the C tests of attaches and of the process's
 * LMDB environments (test_envs, test_envs_edges, test_attach_carry) ask
 * of a state: its rows through an attach, whether another process finds
 * LMDB's lock held, and its removal. Include after check.h. */
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

static inline void remove_state(const char *dir)
{
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

#endif
