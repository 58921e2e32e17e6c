/* test_copy.c — rn_state_copy at its edges: a copy that fails midway (the
 * file size limit stands in for a full disk, or a copy killed) leaves no
 * state behind, so a second copy into the same place is not refused and
 * nothing half-written is ever opened as a state. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "runnel.h"

static const rn_column_def cols[] = { { .name = "k", .type = "int" }, { .name = "v", .type = "string" } };
static const char *const key[] = { "k" };

/* A state at dir whose table t holds n rows of about 2 KB. */
static void make_state(const char *dir, int n)
{
  rn_open_opts o = { .path = dir, .nosync = 1 };
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  rn_rel *t = NULL;
  CHECK(rn_declare_table(p, "t", cols, 2, key, 1, &t) == 0);
  static char map[2100] = { (char)0x82, (char)0xa1, 'k', (char)0xcd, 0, 0, (char)0xa1, 'v', (char)0xda, 0x08, 0x00 };
  memset(map + 11, 'x', 2048);
  for (int k = 0; k < n; k++) {
    map[4] = (char)(k >> 8), map[5] = (char)k;
    CHECK(rn_insert(p, t, map, 11 + 2048) == 0);
  }
  CHECK(rn_pipeline_close(p) == 0);
}

static bool exists(const char *dir, const char *file)
{
  char path[256];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, file);
  return stat(path, &st) == 0;
}

/* rn_state_copy in a child whose files may not grow past limit bytes:
 * the child's exit code is the copy's result (0 or the RN_E… code, negated). */
static int copy_limited(const char *from, const char *to, rlim_t limit)
{
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN); /* a write past the limit fails with EFBIG instead */
    struct rlimit r = { limit, limit };
    setrlimit(RLIMIT_FSIZE, &r);
    _exit(-rn_state_copy(from, to, NULL, 0));
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? -WEXITSTATUS(status) : -999;
}

static void test_failed_copy_leaves_no_state(void)
{
  char dir[] = "/tmp/rn_copy_XXXXXX", dest[] = "/tmp/rn_copy_dest_XXXXXX";
  CHECK(mkdtemp(dir) != NULL && mkdtemp(dest) != NULL);
  make_state(dir, 2000); /* about 5 MB */
  CHECK(copy_limited(dir, dest, 1 << 20) != 0);
  CHECK(!exists(dest, "data.mdb"));
  char err[512] = "";
  CHECK(rn_state_copy(dir, dest, err, sizeof err) == 0);
  if (err[0]) fprintf(stderr, "%s\n", err);
  CHECK(exists(dest, "data.mdb"));
  char cmd[256];
  snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) -eq 1", dest); /* data.mdb, and no leftover */
  CHECK(system(cmd) == 0);
  rn_inspect_state st;
  CHECK(rn_inspect(dest, NULL, NULL, &st, err, sizeof err) == 0);
  CHECK(st.relations == 1);
  snprintf(cmd, sizeof cmd, "rm -rf %s %s", dir, dest);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_failed_copy_leaves_no_state);
  return CHECK_REPORT();
}
