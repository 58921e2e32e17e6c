/* test_readers26.c — readers in other processes and the writer's pages
 * (DESIGN 13: "stale LMDB reader slots are reclaimed"). A reader killed
 * inside its read transaction (kill -9: its slot in lock.mdb still names
 * the snapshot it read) must not keep a writer that is already open from
 * reusing the pages it freed since: the file would grow with every commit,
 * without bound. Each reader is a forked child reading through the public
 * rn_inspect, its callback stopped inside the read transaction; the
 * children report through pipes, not timing. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "attach_fixture.h"
#include "runnel.h"

static const rn_column_def cols[] = { { .name = "k", .type = "int" }, { .name = "v", .type = "string" } };
static const char *const key[] = { "k" };

#define VLEN 1500 /* a row of about a third of a page: each update copies a few pages */

/* {"k": k, "v": <VLEN bytes starting with tag in ten digits>} */
static int put(rn_pipeline *p, rn_rel *t, int k, unsigned tag)
{
  static char map[8 + 3 + 2 + VLEN];
  size_t n = 0;
  map[n++] = (char)0x82, map[n++] = (char)0xa1, map[n++] = 'k', map[n++] = (char)k; /* k < 128 */
  map[n++] = (char)0xa1, map[n++] = 'v', map[n++] = (char)0xda;
  map[n++] = (char)(VLEN >> 8), map[n++] = (char)(VLEN & 0xff);
  memset(map + n, 'a' + (int)(tag % 26), VLEN);
  char digits[16];
  snprintf(digits, sizeof digits, "%010u", tag);
  memcpy(map + n, digits, 10);
  n += VLEN;
  return rn_upsert(p, t, map, n);
}

static long long file_size(const char *dir)
{
  char path[256];
  struct stat st;
  snprintf(path, sizeof path, "%s/data.mdb", dir);
  return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* n groups, one LMDB transaction each (carry_groups 1), over 8 rows. */
static int updates(rn_pipeline *p, rn_rel *t, int n, unsigned *tag)
{
  for (int i = 0; i < n; i++)
    if (put(p, t, 1 + i % 8, ++*tag)) return -1;
  return rn_flush(p);
}

/* The reader's callback: says it reads, then waits inside the read
 * transaction for what never comes (it is killed). */
typedef struct held { int said, wait; } held;
static int hold_here(void *ctx, const rn_inspect_relation *rel)
{
  held *h = ctx;
  (void)rel;
  char c = 'r';
  if (write(h->said, &c, 1) != 1) return 1;
  while (read(h->wait, &c, 1) != 0) { }
  return 1;
}

/* A child reading dir inside rn_inspect, stopped in its callback; its pid
 * once it reads (-1: it could not). It waits on *hold, the write end of a
 * pipe the caller closes once it was killed (so a failed test leaves no
 * process behind: its end closes when this process does). */
static pid_t reader_in_snapshot(const char *dir, int *hold)
{
  int said[2], wait_fds[2];
  if (pipe(said) || pipe(wait_fds)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(said[0]);
    close(wait_fds[1]);
    held h = { said[1], wait_fds[0] };
    rn_inspect_state st;
    rn_inspect(dir, hold_here, &h, &st, NULL, 0);
    _exit(1);
  }
  close(said[1]);
  close(wait_fds[0]);
  char c = 0;
  bool reading = pid > 0 && read(said[0], &c, 1) == 1 && c == 'r';
  close(said[0]);
  *hold = wait_fds[1];
  if (!reading && pid > 0) kill(pid, SIGKILL), waitpid(pid, NULL, 0);
  return reading ? pid : -1;
}

/* A writer open before a reader is killed inside its read transaction
 * still reuses the pages freed since that snapshot: the file stays within
 * a few pages of its size without the dead reader. */
static void test_killed_reader_does_not_grow_the_file(void)
{
  char dir[] = "/tmp/rn_readers26_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts o = { .path = dir, .nosync = 1, .carry_groups = 1 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  unsigned tag = 0;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", cols, 2, key, 1, &t) == 0);
  CHECK(updates(p, t, 400, &tag) == 0); /* the file's steady size */
  long long before = file_size(dir);
  int hold = -1;
  pid_t reader = reader_in_snapshot(dir, &hold);
  CHECK(reader > 0);
  if (reader > 0) {
    kill(reader, SIGKILL);
    waitpid(reader, NULL, 0);
  }
  close(hold);
  CHECK(updates(p, t, 400, &tag) == 0);
  long long after = file_size(dir);
  if (after > before + 16 * 4096) fprintf(stderr, "data.mdb grew from %lld to %lld bytes\n", before, after);
  CHECK(before > 0 && after <= before + 16 * 4096);
  CHECK(rn_pipeline_close(p) == 0);
  remove_state(dir);
}

int main(void)
{
  signal(SIGPIPE, SIG_IGN);
  RUN(test_killed_reader_does_not_grow_the_file);
  return CHECK_REPORT();
}
