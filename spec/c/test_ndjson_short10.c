/* test_ndjson_short10.c — an NDJSON sink on a stream without a file
 * descriptor (a fopencookie stream) whose write function takes fewer bytes
 * than it is given, as write(2) may: the sink goes on with the rest, as it
 * does on a descriptor, so a group is delivered whole in one delivery,
 * every line once. Before, stdio counted the short write as a failure (it
 * drops the rest of its buffer and says nothing of how many went): on a
 * stream with a position each delivery failed after one short write,
 * moving a few bytes on, with the last errno left by anything as its
 * reason, and the stream was left in error (ferror) after lines that all
 * went out. Without a position (a byte per flush) a write that takes
 * nothing and sets no errno said "Success". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ndjson_stream_fixture.h"
#include "ndjson.h"
#include "runnel.h"

enum { ROWS = 10 };

typedef struct fixture {
  rn_pipeline *p;
  rn_rel *s;
  sink_mem *m;
  FILE *f;
} fixture;

static fixture open_fixture(bool seekable, size_t per_call, size_t room, int err)
{
  fixture x = { 0 };
  x.p = open_with_stream(&x.s);
  x.m = calloc(1, sizeof *x.m);
  x.m->room = room;
  x.m->per_call = per_call;
  x.m->err = err;
  x.f = mem_stream(x.m, seekable);
  CHECK(rn_ndjson_sink(x.p, x.s, x.f, false, NULL, NULL, NULL, NULL) == 0);
  return x;
}

static void close_fixture(fixture *x)
{
  CHECK(rn_pipeline_close(x->p) == 0);
  fclose(x->f);
  free(x->m);
}

static void group_of_rows(fixture *x)
{
  CHECK(rn_begin(x->p) == 0);
  for (int k = 1; k <= ROWS; k++) CHECK(insert_row(x->p, x->s, k) == 0);
  CHECK(rn_commit(x->p) == 0);
}

/* Each write takes 7 bytes: the group goes out whole at its commit. */
static void short_writes_go_on(bool seekable)
{
  fixture x = open_fixture(seekable, 7, sizeof x.m->buf, 0);
  group_of_rows(&x);
  CHECK(lines_are(x.m, 1, ROWS));                 /* before: 7 bytes, and the delivery failed */
  CHECK(rn_deliver(x.p) == 0);
  CHECK(!ferror(x.f));                            /* every byte went: the host's stream is not left in error */
  CHECK(insert_row(x.p, x.s, ROWS + 1) == 0);
  CHECK(lines_are(x.m, 1, ROWS + 1));
  close_fixture(&x);
}

static void test_short_writes_with_position(void) { short_writes_go_on(true); }
static void test_short_writes_without_position(void) { short_writes_go_on(false); }

/* Short writes, then none: the failure says why (ENOSPC), the bytes that
 * went are not written again, the rest goes once there is room. */
static void short_then_full(bool seekable)
{
  fixture x = open_fixture(seekable, 5, 123, ENOSPC);
  group_of_rows(&x);
  CHECK(x.m->len == 123);
  CHECK(rn_deliver(x.p) == RN_EIO);
  CHECK(strstr(rn_errmsg(x.p), "ndjson: writing: No space left on device") != NULL);
  x.m->room = sizeof x.m->buf;
  CHECK(rn_deliver(x.p) == 0);
  CHECK(lines_are(x.m, 1, ROWS));
  close_fixture(&x);
}

static void test_short_then_full_with_position(void) { short_then_full(true); }
static void test_short_then_full_without_position(void) { short_then_full(false); }

/* A write that takes nothing and sets no errno: an I/O error, not
 * "Success" nor whatever errno held before. */
static void nothing_taken_no_errno(bool seekable)
{
  fixture x = open_fixture(seekable, 0, 0, 0);
  group_of_rows(&x);
  CHECK(x.m->len == 0);
  errno = ERANGE;
  CHECK(rn_deliver(x.p) == RN_EIO);
  CHECK(strstr(rn_errmsg(x.p), "ndjson: writing: Input/output error") != NULL);
  x.m->room = sizeof x.m->buf;
  CHECK(rn_deliver(x.p) == 0);
  CHECK(lines_are(x.m, 1, ROWS));
  close_fixture(&x);
}

static void test_nothing_taken_with_position(void) { nothing_taken_no_errno(true); }
static void test_nothing_taken_without_position(void) { nothing_taken_no_errno(false); }

int main(void)
{
  RUN(test_short_writes_with_position);
  RUN(test_short_writes_without_position);
  RUN(test_short_then_full_with_position);
  RUN(test_short_then_full_without_position);
  RUN(test_nothing_taken_with_position);
  RUN(test_nothing_taken_without_position);
  return CHECK_REPORT();
}
