/* test_ndjson_nofd7.c — an NDJSON sink on an open stream with no file
 * descriptor (fileno fails: a fopencookie or memory stream) whose write
 * stops partway through a group (ndjson.c, "An open file"): the retry
 * writes only what did not go out, so the reader gets every line once and
 * whole. Before, stdio could not say how much went out, a failed write
 * counted as none, and the retry wrote the group's first bytes again. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ndjson_stream_fixture.h"
#include "ndjson.h"
#include "runnel.h"

enum { ROWS = 10 };

/* A group whose write stops after `room` bytes, then the rest delivered. */
static void torn_then_delivered(bool seekable, size_t room)
{
  rn_rel *s = NULL;
  rn_pipeline *p = open_with_stream(&s);
  sink_mem *m = calloc(1, sizeof *m);
  m->room = room;
  m->err = ENOSPC;                              /* as a full device says, once nothing goes */
  FILE *f = mem_stream(m, seekable);
  CHECK(rn_ndjson_sink(p, s, f, true, NULL, NULL, NULL, NULL) == 0);
  CHECK(rn_begin(p) == 0);
  for (int k = 1; k <= ROWS; k++) CHECK(insert_row(p, s, k) == 0);
  CHECK(rn_commit(p) == 0);                     /* committed; its delivery stopped after `room` bytes */
  CHECK(m->len == room);
  m->room = 1;                                  /* one more byte goes, then it fails again */
  CHECK(rn_deliver(p) == RN_EIO);
  CHECK(strstr(rn_errmsg(p), "ndjson: writing: ") != NULL);
  m->room = sizeof m->buf;
  CHECK(rn_deliver(p) == 0);
  CHECK(lines_are(m, 1, ROWS));                 /* before: the group's first bytes again, then all of it */
  CHECK(insert_row(p, s, ROWS + 1) == 0);       /* the next group follows on a line of its own */
  CHECK(lines_are(m, 1, ROWS + 1));
  CHECK(rn_pipeline_close(p) == 0);
  free(m);
}

static void test_stream_without_position(void) { torn_then_delivered(false, 100); }
static void test_stream_with_position(void) { torn_then_delivered(true, 100); }
static void test_stream_torn_on_a_line_end(void) { torn_then_delivered(false, 44); }
static void test_stream_nothing_out(void) { torn_then_delivered(false, 0); }

int main(void)
{
  RUN(test_stream_without_position);
  RUN(test_stream_with_position);
  RUN(test_stream_torn_on_a_line_end);
  RUN(test_stream_nothing_out);
  return CHECK_REPORT();
}
