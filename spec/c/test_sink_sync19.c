/* test_sink_sync19.c — an NDJSON path sink whose file cannot be synced (an
 * I/O error on fdatasync): the groups committed stand (a durable sink
 * cannot fail one, README "Two kinds of sink"), its mark waits where the
 * file was last synced, with the outbox entries it covers, and
 * rn_deliver says why, naming the relation and the file. After a crash
 * the waiting groups are found in the file: each line once.
 *
 * The test defines fdatasync and fsync: they fail with EIO for the
 * sink's file while `failing` is set (the state's own syncs go on). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ndjson_stream_fixture.h"
#include "raw_meta_fixture.h"
#include "ndjson.h"
#include "outbox.h"
#include "runnel.h"

static int failing;

/* Whether fd is the sink's file (its name ends in out.ndjson). */
static int is_sink_file(int fd)
{
  char link[64], target[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n < 0) return 0;
  target[n] = 0;
  return n >= 10 && strcmp(target + n - 10, "out.ndjson") == 0;
}

int fdatasync(int fd)
{
  if (failing && is_sink_file(fd)) { errno = EIO; return -1; }
  return (int)syscall(SYS_fdatasync, fd);
}

int fsync(int fd)
{
  if (failing && is_sink_file(fd)) { errno = EIO; return -1; }
  return (int)syscall(SYS_fsync, fd);
}

static void count_unsynced(void *ctx, const char *shown, uint64_t groups)
{
  CHECK(strstr(shown, "s: durable sink to ") == shown && strstr(shown, "out.ndjson") != NULL);
  *(uint64_t *)ctx += groups;
}

/* The groups delivered to s's sink, not known to be on disk. */
static uint64_t unsynced(rn_pipeline *p)
{
  uint64_t n = 0;
  CHECK(rn_outbox_unsynced(p, count_unsynced, &n) == 0);
  return n;
}

/* Whether the file holds exactly the lines of k = 1 … to, each once. */
static int file_lines_are(const char *path, int to)
{
  static sink_mem m;
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  m.len = fread(m.buf, 1, sizeof m.buf, f);
  fclose(f);
  return lines_are(&m, 1, to);
}

static void test_a_failing_sync_keeps_the_groups(void)
{
  char dir[] = "/tmp/runnel_sync19_XXXXXX", log[64];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(log, sizeof log, "%s/out.ndjson", dir);
  rn_rel *s = NULL;
  rn_pipeline *p = open_path_sink(dir, log, NULL, &s);
  CHECK(insert_row(p, s, 1) == 0);
  failing = 1;
  CHECK(insert_row(p, s, 2) == 0);               /* committed: its sink's sync is no part of it */
  CHECK(insert_row(p, s, 3) == 0);
  CHECK(rn_seq(p) == 3);
  uint64_t u = unsynced(p);
  if (u != 3) fprintf(stderr, "unsynced: %llu\n", (unsigned long long)u);
  CHECK(u == 3); /* p:stats().outbox_unsynced: groups 1 to 3 (a group is synced with the next mark) */
  int rc = rn_deliver(p);
  CHECK(rc == RN_EIO);
  CHECK(strstr(rn_errmsg(p), "s: ") == rn_errmsg(p));
  CHECK(strstr(rn_errmsg(p), "out.ndjson") != NULL);
  CHECK(strstr(rn_errmsg(p), "Input/output error") != NULL);
  if (rc != RN_EIO) fprintf(stderr, "deliver: %d %s\n", rc, rn_errmsg(p));
  failing = 0;
  CHECK(insert_row(p, s, 4) == 0);
  CHECK(rn_deliver(p) == 0);
  CHECK(unsynced(p) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(file_lines_are(log, 4));
  cleanup(dir);
}

/* A writer whose sink's syncs fail, killed: its groups are all in the
 * state, the waiting ones found in the file at the reopen, none twice. */
static void test_a_crash_after_failing_syncs_writes_each_line_once(void)
{
  char dir[] = "/tmp/runnel_sync19_XXXXXX", log[64];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(log, sizeof log, "%s/out.ndjson", dir);
  fflush(NULL);
  pid_t child = fork();
  if (child == 0) {
    rn_rel *s = NULL;
    rn_pipeline *p = open_path_sink(dir, log, NULL, &s);
    CHECK(insert_row(p, s, 1) == 0);
    failing = 1;
    for (int k = 2; k <= 4; k++) CHECK(insert_row(p, s, k) == 0);
    _exit(check_failed_now);
  }
  int status;
  CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(file_lines_are(log, 4));
  rn_rel *s = NULL;
  rn_pipeline *p = open_path_sink(dir, log, NULL, &s);
  CHECK(rn_seq(p) == 4);
  CHECK(insert_row(p, s, 5) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(file_lines_are(log, 5));
  cleanup(dir);
}

/* A close whose last sync of the sink fails closes all the same, and
 * says so (rn_pipeline_close_report), naming the relation, the file and
 * the groups; they wait in the state, and the next open finds them in the
 * file: each line once. */
static void test_a_close_that_cannot_sync_says_so(void)
{
  char dir[] = "/tmp/runnel_sync19_XXXXXX", log[64], why[RN_ERRMSG_MAX] = "";
  CHECK(mkdtemp(dir) != NULL);
  snprintf(log, sizeof log, "%s/out.ndjson", dir);
  rn_rel *s = NULL;
  rn_pipeline *p = open_path_sink(dir, log, NULL, &s);
  CHECK(insert_row(p, s, 1) == 0);
  failing = 1;
  CHECK(insert_row(p, s, 2) == 0);
  CHECK(insert_row(p, s, 3) == 0);
  int rc = rn_pipeline_close_report(p, why, sizeof why);
  failing = 0;
  CHECK(rc == RN_EIO);
  CHECK(strncmp(why, "close: s: ", 10) == 0);
  CHECK(strstr(why, "out.ndjson") != NULL);
  CHECK(strstr(why, "Input/output error") != NULL);
  CHECK(strstr(why, "groups 1 to 3") != NULL);      /* group 1's sync comes with group 2's mark */
  CHECK(strstr(why, "next open") != NULL);
  if (rc != RN_EIO || !strstr(why, "groups 1 to 3")) fprintf(stderr, "close: %d %s\n", rc, why);
  CHECK(file_lines_are(log, 3));
  p = open_path_sink(dir, log, NULL, &s);
  CHECK(rn_seq(p) == 3);
  CHECK(insert_row(p, s, 4) == 0);
  CHECK(rn_pipeline_close_report(p, why, sizeof why) == 0);
  CHECK(file_lines_are(log, 4));
  cleanup(dir);
}

/* Two sinks whose last syncs fail: the close names both, each with its
 * relation, file and groups (before, only the first was said). */
static void test_a_close_names_every_sink_it_could_not_sync(void)
{
  char dir[] = "/tmp/runnel_sync19_XXXXXX", sub[] = "/tmp/runnel_sync19b_XXXXXX", log[64], log2[80];
  char why[RN_ERRMSG_MAX] = "";
  CHECK(mkdtemp(dir) != NULL && mkdtemp(sub) != NULL);
  snprintf(log, sizeof log, "%s/out.ndjson", dir);
  snprintf(log2, sizeof log2, "%s/out.ndjson", sub);
  rn_rel *s = NULL, *u = NULL;
  rn_pipeline *p = open_path_sink(dir, log, NULL, &s);
  static const rn_column_def cols[] = { { "k", "int", 0, NULL, 0, NULL }, { "pad", "string", 0, NULL, 0, NULL } };
  CHECK(rn_declare_stream(p, "u", cols, 2, &u) == 0);
  CHECK(rn_ndjson_sink_path(p, u, log2, NULL, NULL) == 0);
  failing = 1;
  CHECK(insert_row(p, s, 1) == 0);
  CHECK(insert_row(p, u, 1) == 0);
  int rc = rn_pipeline_close_report(p, why, sizeof why);
  failing = 0;
  CHECK(rc == RN_EIO);
  CHECK(strncmp(why, "close: s: ", 10) == 0);
  CHECK(strstr(why, "; u: durable sink to ") != NULL);
  CHECK(strstr(why, "sync19b_") != NULL);
  if (!strstr(why, "; u: ")) fprintf(stderr, "close: %d %s\n", rc, why);
  cleanup(dir);
  cleanup(sub);
}

int main(void)
{
  RUN(test_a_close_names_every_sink_it_could_not_sync);
  RUN(test_a_failing_sync_keeps_the_groups);
  RUN(test_a_close_that_cannot_sync_says_so);
  RUN(test_a_crash_after_failing_syncs_writes_each_line_once);
  return CHECK_REPORT();
}
