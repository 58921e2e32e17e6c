/* test_ndjson_readerr16.c — rn_run_ndjson's input failing to read midway
 * (EIO from a bad disk or a network file system), a group open: the run
 * fails with RN_EIO and says why, naming the line it had reached as every
 * other error of a run does (which lines were applied). Before, the
 * rollback of the open group cleared the message: rn_errmsg was empty,
 * and p:run raised ""; kept, it said no line. The groups before stay
 * committed, and (since 19, test_ndjson_midline19.c) the open one too:
 * its lines were read whole. A read failing before any line (a directory)
 * keeps its message. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "check.h"
#include "ndjson.h"
#include "runnel.h"

static const rn_column_def cols[] = { { "id", "int", 0, NULL, 0, NULL } };
static const char *const key[] = { "id" };

typedef struct source { const char *text; size_t at, len; } source;

/* Gives the text, then fails with EIO. */
static ssize_t read_then_fail(void *cookie, char *buf, size_t size)
{
  source *s = cookie;
  if (s->at == s->len) {
    errno = EIO;
    return -1;
  }
  size_t n = s->len - s->at < size ? s->len - s->at : size;
  memcpy(buf, s->text + s->at, n);
  s->at += n;
  return (ssize_t)n;
}

static void test_read_error_says_why(void)
{
  rn_open_opts oo = { 0 };
  rn_pipeline *p = NULL;
  rn_rel *t;
  CHECK(rn_pipeline_open(&oo, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  static const char text[] = "{\"rel\":\"t\",\"op\":\"insert\",\"row\":{\"id\":1}}\n"
                             "{\"rel\":\"t\",\"op\":\"insert\",\"row\":{\"id\":2}}\n"
                             "{\"rel\":\"t\",\"op\":\"insert\",\"row\":{\"id\":3}}\n"
                             "{\"rel\":\"t\",\"op\":\"insert\",\"row\":{\"id\":4}}\n"
                             "{\"rel\":\"t\",\"op\":\"insert\",\"row\":{\"id\":5}}\n";
  source s = { text, 0, sizeof text - 1 };
  cookie_io_functions_t io = { .read = read_then_fail };
  FILE *in = fopencookie(&s, "r", io);
  CHECK(in != NULL);
  rn_run_opts o = { 2, false, NULL, false, "in", 0 };
  rn_run_stats st;
  int rc = rn_run_ndjson(p, in, &o, &st);
  CHECK(rc == RN_EIO);
  CHECK(strcmp(rn_errmsg(p), "in: reading after line 5: Input/output error: the lines up to it are applied and "
                             "committed") == 0);
  CHECK(st.lines == 5 && st.groups == 3);
  CHECK(rn_seq(p) == 3);      /* lines 1 to 4, two groups; line 5's group committed */
  CHECK(rn_begin(p) == 0);    /* no group was left open */
  CHECK(rn_rollback(p) == 0);
  fclose(in);
  CHECK(rn_pipeline_close(p) == 0);
}

int main(void)
{
  RUN(test_read_error_says_why);
  return CHECK_REPORT();
}
