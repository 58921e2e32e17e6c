/* test_ndjson_torn.c — an NDJSON sink on an open stream that cannot be cut
 * back (a pipe) whose write stops partway through a group (ndjson.c, "An
 * open file"): the retry writes the rest of the group, so the reader gets
 * every line once and whole, never the group's first lines again. The pipe
 * is non-blocking: a write fills it, then fails (EAGAIN) until it is read. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ndjson_stream_fixture.h"
#include "ndjson.h"
#include "runnel.h"

enum { ROWS = 40, PAD = 3000 };  /* 120 kB in one group: over a pipe's 64 kB */

static int insert_row_x(rn_pipeline *p, rn_rel *s, int64_t k)
{
  static char pad[PAD];
  memset(pad, 'x', sizeof pad);
  return insert_padded(p, s, k, pad, sizeof pad);
}

/* Reads what the pipe holds now onto *out. */
static void drain(int fd, char **out, size_t *len)
{
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
    *out = realloc(*out, *len + (size_t)n + 1);
    memcpy(*out + *len, buf, (size_t)n);
    *len += (size_t)n;
    (*out)[*len] = 0;
  }
}

/* Whether text is exactly the lines {"k":from,…} … {"k":to,…}, each once. */
static int pipe_lines_are(const char *text, int from, int to)
{
  const char *at = text;
  for (int k = from; k <= to; k++) {
    char want[32];
    int n = snprintf(want, sizeof want, "{\"k\":%d,\"pad\":\"", k);
    if (strncmp(at, want, (size_t)n) != 0) return 0;
    at += n;
    for (int i = 0; i < PAD; i++, at++)
      if (*at != 'x') return 0;
    if (strncmp(at, "\"}\n", 3) != 0) return 0;
    at += 3;
  }
  return *at == 0;
}

static void test_pipe_gets_the_rest_of_a_torn_group(void)
{
  rn_rel *s = NULL;
  rn_pipeline *p = open_with_stream(&s);
  int fds[2];
  CHECK(pipe(fds) == 0);
  CHECK(fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0 && fcntl(fds[1], F_SETFL, O_NONBLOCK) == 0);
  FILE *f = fdopen(fds[1], "w");
  CHECK(f != NULL);
  CHECK(rn_ndjson_sink(p, s, f, true, NULL, NULL, NULL, NULL) == 0);
  CHECK(rn_begin(p) == 0);
  for (int k = 1; k <= ROWS; k++) CHECK(insert_row_x(p, s, k) == 0);
  CHECK(rn_commit(p) == 0);                     /* committed; its delivery filled the pipe */
  char *got = NULL;
  size_t len = 0;
  int tries = 0, rc;
  do {                                          /* the reader takes what is there; the sink goes on */
    drain(fds[0], &got, &len);
    rc = rn_deliver(p);
    if (rc) CHECK(strstr(rn_errmsg(p), "ndjson: writing: ") != NULL);
  } while (rc && ++tries < 10);
  CHECK(rc == 0);                               /* before: each retry wrote the group's first 64 kB again */
  drain(fds[0], &got, &len);
  CHECK(got && pipe_lines_are(got, 1, ROWS));
  CHECK(insert_row_x(p, s, ROWS + 1) == 0);     /* the next group follows on a line of its own */
  size_t before = len;
  drain(fds[0], &got, &len);
  CHECK(got && pipe_lines_are(got + before, ROWS + 1, ROWS + 1));
  CHECK(rn_pipeline_close(p) == 0);
  close(fds[0]);
  free(got);
}

/* A close while part of a group is out says so: the reader has a torn
 * line, and the message names the group and the bytes. */
static void test_close_names_a_torn_group(void)
{
  rn_rel *s = NULL;
  rn_pipeline *p = open_with_stream(&s);
  int fds[2];
  CHECK(pipe(fds) == 0);
  CHECK(fcntl(fds[1], F_SETFL, O_NONBLOCK) == 0);
  FILE *f = fdopen(fds[1], "w");
  CHECK(rn_ndjson_sink(p, s, f, true, NULL, NULL, NULL, NULL) == 0);
  CHECK(rn_begin(p) == 0);
  for (int k = 1; k <= ROWS; k++) CHECK(insert_row_x(p, s, k) == 0);
  CHECK(rn_commit(p) == 0);
  char err[1024] = "";
  CHECK(rn_pipeline_close_report(p, err, sizeof err) == RN_EIO);
  CHECK(strstr(err, "close: s: groups 1 to 1 waiting for its NDJSON sink on an open file were not delivered") != NULL);
  CHECK(strstr(err, "its first 65536 bytes were written (they end in a torn line)") != NULL);
  close(fds[0]);
}

int main(void)
{
  RUN(test_pipe_gets_the_rest_of_a_torn_group);
  RUN(test_close_names_a_torn_group);
  return CHECK_REPORT();
}
