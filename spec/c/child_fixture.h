/* child_fixture.h — a forked child a test drives through two pipes (go:
 * the parent's byte to it; said: its byte back), for the C tests of
 * readers in another process (test_readers26.c, test_readers_remap26.c):
 * handshakes, never timing; and the address space a child limits itself
 * to (ulimit -v: test_readers26.c, test_capi_edges20.c). Include it once
 * per test. */
#ifndef CHILD_FIXTURE_H
#define CHILD_FIXTURE_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct helper { pid_t pid; int go, said; } helper;

/* A child running body(dir, go, said) and exiting with what it returns
 * (pid -1: the fork or a pipe failed). */
static inline helper start_helper(int (*body)(const char *dir, int go, int said), const char *dir)
{
  int go[2], said[2];
  helper h = { -1, -1, -1 };
  if (pipe(go) || pipe(said)) return h;
  h.pid = fork();
  if (h.pid == 0) {
    close(go[1]);
    close(said[0]);
    _exit(body(dir, go[0], said[1]));
  }
  close(go[0]);
  close(said[1]);
  h.go = go[1], h.said = said[0];
  return h;
}

/* Tells h to go; true once it said it did its part. */
static inline bool helper_step(helper *h)
{
  char c = 'g';
  return write(h->go, &c, 1) == 1 && read(h->said, &c, 1) == 1;
}

/* Its wait status once it ended (killed first with kill9); -1: none. */
static inline int helper_end(helper *h, bool kill9)
{
  int status = -1;
  if (h->pid > 0 && kill9) kill(h->pid, SIGKILL);
  close(h->go);
  close(h->said);
  if (h->pid > 0) waitpid(h->pid, &status, 0);
  return status;
}

/* This process's address space, bytes (VmSize; 0: not found). */
static inline long vm_size(void)
{
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = 0;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmSize:", 7) == 0) kb = atol(line + 7);
  if (f) fclose(f);
  return kb * 1024;
}

#endif
