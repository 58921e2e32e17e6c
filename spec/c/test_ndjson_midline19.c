/* test_ndjson_midline19.c — rn_run_ndjson's input failing in the middle
 * of a line: a read error (EIO) or an interrupt (rn_interrupt_runs from a
 * signal handler, the read cut short with EINTR). The lines read whole
 * before it are applied and committed (as an interrupt between two lines
 * does); only the incomplete line is dropped, and the message says so.
 * Before, getline handed back the part of the line it had read as if it
 * were a line: it failed as malformed JSON, and the open group, with every
 * complete line in it, was rolled back (a read error between two lines
 * rolled the open group back too). */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ndjson.h"
#include "pipeline.h"

#define LINE(id) "{\"rel\":\"t\",\"op\":\"insert\",\"row\":{\"id\":" #id "}}\n"

static rn_pipeline *open_t(rn_rel **t)
{
  rn_open_opts o = { 0 };
  rn_pipeline *p = NULL;
  static const rn_column_def cols[] = { { .name = "id", .type = "int" } };
  static const char *const key[] = { "id" };
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, t) == 0);
  return p;
}

typedef struct source {
  const char *text;
  size_t at, len;
  int err;           /* errno of the read after the text */
} source;

/* Gives the text, then fails with s->err (EINTR: as a signal would, after
 * asking the run to stop). */
static ssize_t read_then_fail(void *cookie, char *buf, size_t size)
{
  source *s = cookie;
  if (s->at == s->len) {
    if (s->err == EINTR) rn_interrupt_runs();
    errno = s->err;
    return -1;
  }
  size_t n = s->len - s->at < size ? s->len - s->at : size;
  memcpy(buf, s->text + s->at, n);
  s->at += n;
  return (ssize_t)n;
}

static int run_cookie(rn_pipeline *p, const char *text, int err, size_t batch, rn_run_stats *st)
{
  source s = { text, 0, strlen(text), err };
  cookie_io_functions_t io = { .read = read_then_fail };
  FILE *in = fopencookie(&s, "r", io);
  CHECK(in != NULL);
  rn_run_opts o = { .batch = batch, .name = "in" };
  int rc = rn_run_ndjson(p, in, &o, st);
  fclose(in);
  return rc;
}

static void test_read_error_mid_line_keeps_the_lines_before(void)
{
  rn_rel *t;
  rn_pipeline *p = open_t(&t);
  rn_run_stats st;
  int rc = run_cookie(p, LINE(1) LINE(2) LINE(3) "{\"rel\":\"t\",\"op\":\"ins", EIO, 1000, &st);
  CHECK(rc == RN_EIO);
  CHECK(strcmp(rn_errmsg(p), "in: reading after line 3: Input/output error: the lines up to it are applied and "
                             "committed, the incomplete line after it is dropped") == 0);
  CHECK(st.lines == 3 && st.applied == 3 && st.groups == 1);
  CHECK(rn_seq(p) == 1 && t->count == 3);
  CHECK(rn_pipeline_close(p) == 0);
}

static void test_read_error_between_lines_keeps_the_lines_before(void)
{
  rn_rel *t;
  rn_pipeline *p = open_t(&t);
  rn_run_stats st;
  CHECK(run_cookie(p, LINE(1) LINE(2) LINE(3), EIO, 2, &st) == RN_EIO);
  CHECK(strcmp(rn_errmsg(p), "in: reading after line 3: Input/output error: the lines up to it are applied and "
                             "committed") == 0);
  CHECK(st.lines == 3 && st.groups == 2 && rn_seq(p) == 2 && t->count == 3);
  CHECK(rn_pipeline_close(p) == 0);
}

static void test_interrupt_mid_line_keeps_the_lines_before(void)
{
  rn_rel *t;
  rn_pipeline *p = open_t(&t);
  rn_run_stats st;
  int rc = run_cookie(p, LINE(1) LINE(2) "{\"rel\":\"t\",\"op\":\"ins", EINTR, 1000, &st);
  CHECK(rc == RN_EINTR);
  CHECK(strcmp(rn_errmsg(p), "in: interrupted after line 2: the lines up to it are applied and committed, "
                             "the incomplete line after it is dropped") == 0);
  CHECK(st.lines == 2 && st.applied == 2 && st.groups == 1);
  CHECK(rn_seq(p) == 1 && t->count == 2);
  CHECK(rn_pipeline_close(p) == 0);
}

static void on_alarm(int sig)
{
  (void)sig;
  rn_interrupt_runs();
}

/* Runs p over a pipe a child writes: first, then, after pause_us, rest
 * and the end of the input (rest NULL: it writes nothing more and is
 * killed once the run returned); a SIGALRM whose handler is on_sig
 * (installed without SA_RESTART) comes after alarm_us. */
static int run_pipe(rn_pipeline *p, const char *first, const char *rest, useconds_t pause_us, void (*on_sig)(int),
                    long alarm_us, rn_run_stats *st)
{
  int fds[2];
  CHECK(pipe(fds) == 0);
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    if (write(fds[1], first, strlen(first)) < 0) _exit(1);
    if (!rest) sleep(5); /* killed before */
    usleep(pause_us);
    if (rest && write(fds[1], rest, strlen(rest)) < 0) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  struct sigaction sa = { 0 }, was;
  sa.sa_handler = on_sig;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, &was);
  struct itimerval at = { { 0, 0 }, { 0, alarm_us } };
  setitimer(ITIMER_REAL, &at, NULL);
  FILE *in = fdopen(fds[0], "r");
  rn_run_opts o = { .batch = 1000, .name = "pipe" };
  int rc = rn_run_ndjson(p, in, &o, st);
  sigaction(SIGALRM, &was, NULL);
  if (!rest) kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  fclose(in);
  return rc;
}

/* The same through a real pipe, its writer pausing mid-line: a SIGALRM
 * handler (no SA_RESTART) asks the run to stop while it waits. */
static void test_interrupt_mid_line_on_a_pipe(void)
{
  rn_rel *t;
  rn_pipeline *p = open_t(&t);
  rn_run_stats st;
  int rc = run_pipe(p, LINE(1) LINE(2) "{\"rel\":\"t\",", NULL, 0, on_alarm, 200000, &st);
  CHECK(rc == RN_EINTR);
  CHECK(strcmp(rn_errmsg(p), "pipe: interrupted after line 2: the lines up to it are applied and committed, "
                             "the incomplete line after it is dropped") == 0);
  CHECK(st.lines == 2 && rn_seq(p) >= 1 && t->count == 2);
  CHECK(rn_pipeline_close(p) == 0);
}

/* ---- a signal that asks nothing (round 20) ---- */

/* A read cut short by a signal whose handler did not ask the run to stop
 * (a host's SIGCHLD or SIGALRM handler installed without SA_RESTART) is
 * read again: before, the run ended on it as on a read error ("reading
 * after line 2: Interrupted system call"), dropping the line it was in. */
typedef struct once_source {
  const char *text;
  size_t at, len, cut; /* the read at offset cut fails once with EINTR */
  bool cut_done;
} once_source;

static ssize_t read_cut_once(void *cookie, char *buf, size_t size)
{
  once_source *s = cookie;
  if (s->at == s->cut && !s->cut_done) {
    s->cut_done = true;
    errno = EINTR;
    return -1;
  }
  size_t end = s->at < s->cut ? s->cut : s->len, n = end - s->at < size ? end - s->at : size;
  memcpy(buf, s->text + s->at, n);
  s->at += n;
  return (ssize_t)n;
}

static void test_a_signal_that_asks_nothing_is_read_past(void)
{
  static const char text[] = LINE(1) LINE(2) LINE(3);
  size_t cuts[] = { 20, strlen(LINE(1)) }; /* inside line 1, between lines 1 and 2 */
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    rn_rel *t;
    rn_pipeline *p = open_t(&t);
    once_source s = { text, 0, strlen(text), cuts[i], false };
    cookie_io_functions_t io = { .read = read_cut_once };
    FILE *in = fopencookie(&s, "r", io);
    CHECK(in != NULL);
    rn_run_opts o = { .batch = 1000, .name = "in" };
    rn_run_stats st;
    int rc = rn_run_ndjson(p, in, &o, &st);
    fclose(in);
    if (rc) fprintf(stderr, "  cut at %zu: %s\n", cuts[i], rn_errmsg(p));
    CHECK(rc == 0);
    CHECK(st.lines == 3 && st.applied == 3 && t->count == 3);
    CHECK(rn_pipeline_close(p) == 0);
  }
}

static void on_alarm_quiet(int sig) { (void)sig; }

/* The same through a real pipe whose writer pauses in the middle of a
 * line while a SIGALRM (no SA_RESTART) that asks nothing arrives. */
static void test_a_signal_that_asks_nothing_on_a_pipe(void)
{
  rn_rel *t;
  rn_pipeline *p = open_t(&t);
  rn_run_stats st;
  int rc = run_pipe(p, LINE(1) LINE(2) "{\"rel\":\"t\",", "\"op\":\"insert\",\"row\":{\"id\":3}}\n" LINE(4), 400000,
                    on_alarm_quiet, 150000, &st);
  if (rc) fprintf(stderr, "  pipe: %s\n", rn_errmsg(p));
  CHECK(rc == 0);
  CHECK(st.lines == 4 && t->count == 4);
  CHECK(rn_pipeline_close(p) == 0);
}

int main(void)
{
  RUN(test_read_error_mid_line_keeps_the_lines_before);
  RUN(test_read_error_between_lines_keeps_the_lines_before);
  RUN(test_interrupt_mid_line_keeps_the_lines_before);
  RUN(test_interrupt_mid_line_on_a_pipe);
  RUN(test_a_signal_that_asks_nothing_is_read_past);
  RUN(test_a_signal_that_asks_nothing_on_a_pipe);
  return CHECK_REPORT();
}
