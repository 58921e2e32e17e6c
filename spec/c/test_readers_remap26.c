/* test_readers_remap26.c — a reader environment whose map could not be
 * taken again (store.c, adopt_map; found by a review). The reader runs in
 * a forked child; it reports through pipes and its exit code, never timing.
 *
 * adopt_map's remap fails after LMDB unmapped the old map (here forced:
 *    this binary's mmap refuses LMDB's file map past map_cap, as another
 *    thread taking the address space between adopt_map's reservation and
 *    LMDB's mmap would under ulimit -v): the environment is left with no
 *    map and its meta pointers into the unmapped one; the next read
 *    must fail with an error, not crash.
 */
#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "child_fixture.h"
#include "attach_fixture.h"
#include "runnel.h"

static volatile size_t map_cap; /* 0: mmap as is */

/* Exported (-rdynamic): liblmdb's mmap calls reach it. */
__attribute__((visibility("default"))) void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
  if (map_cap && fd >= 0 && (flags & MAP_SHARED) && len > map_cap) {
    errno = ENOMEM;
    return MAP_FAILED;
  }
  return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

#define VLEN 1500

static int put(rn_pipeline *p, rn_rel *t, int k)
{
  static char map[10 + 3 + 2 + VLEN];
  size_t n = 0;
  map[n++] = (char)0x82, map[n++] = (char)0xa1, map[n++] = 'k';
  map[n++] = (char)0xd1, map[n++] = (char)(k >> 8), map[n++] = (char)k;
  map[n++] = (char)0xa1, map[n++] = 'v', map[n++] = (char)0xda;
  map[n++] = (char)(VLEN >> 8), map[n++] = (char)(VLEN & 0xff);
  memset(map + n, 'a' + k % 26, VLEN);
  n += VLEN;
  return rn_upsert(p, t, map, n);
}

static int fill_m(const char *dir, int from, int n)
{
  return fill_table_m(dir, from, n, put);
}

static int capped_reader(const char *dir, int go, int said)
{
  map_cap = 1 << 20; /* envs.c falls back to the recorded map (1 MiB) */
  rn_attached *a = NULL;
  rn_err e = { 0 };
  if (rn_attach(dir, "m", NULL, &a, &e)) return fprintf(stderr, "  attach: %s\n", e.msg), 2;
  char c = (char)rows(a);
  if (write(said, &c, 1) != 1 || read(go, &c, 1) != 1) return 3;
  int n = rows(a); /* MAP_RESIZED: adopt_map; LMDB's mmap refused after its munmap */
  fprintf(stderr, "  first read after the growth: %d\n", n);
  if (n != -1) return 4;
  map_cap = 0; /* the address space is back */
  n = rows(a); /* crashed here: me_metas pointed into the unmapped map */
  if (n != -1) return 5; /* an error: this environment has no map */
  rn_attach_close(a); /* its last attachment: the environment goes */
  if (rn_attach(dir, "m", NULL, &a, &e)) return fprintf(stderr, "  attach again: %s\n", e.msg), 6;
  n = rows(a);
  rn_attach_close(a);
  return n == 2100 ? 0 : (fprintf(stderr, "  rows once attached again: %d\n", n), 7);
}

static void test_failed_remap_leaves_a_usable_environment(void)
{
  char dir[] = "/tmp/rn_remap26_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  CHECK(fill_m(dir, 0, 100) == 0);
  helper r = start_helper(capped_reader, dir);
  char c = 0;
  CHECK(r.pid > 0 && read(r.said, &c, 1) == 1 && c == 100);
  CHECK(fill_m(dir, 100, 2000) == 0); /* the map doubles past the reader's */
  CHECK(write(r.go, &c, 1) == 1);
  int status = helper_end(&r, false);
  if (WIFSIGNALED(status)) fprintf(stderr, "  reader killed by signal %d\n", WTERMSIG(status));
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  remove_state(dir);
}

int main(void)
{
  signal(SIGPIPE, SIG_IGN);
  RUN(test_failed_remap_leaves_a_usable_environment);
  return CHECK_REPORT();
}
