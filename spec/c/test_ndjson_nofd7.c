/* test_ndjson_nofd7.c — an NDJSON sink on an open stream with no file
 * descriptor (fileno fails: a fopencookie or memory stream) whose write
 * stops partway through a group (ndjson.c, "An open file"): the retry
 * writes only what did not go out, so the reader gets every line once and
 * whole. Before, stdio could not say how much went out, a failed write
 * counted as none, and the retry wrote the group's first bytes again. */
#include <errno.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "check.h"
#include "ndjson.h"
#include "runnel.h"

enum { ROWS = 10 };

/* A stream that keeps what it is given in memory, taking at most `room`
 * more bytes (then a short write), as a full device or a quota would. */
typedef struct sink_mem {
  char buf[65536];
  size_t len;
  size_t room;
} sink_mem;

static ssize_t mem_write(void *cookie, const char *data, size_t n)
{
  sink_mem *m = cookie;
  size_t k = n < m->room ? n : m->room;
  if (k > sizeof m->buf - m->len) k = sizeof m->buf - m->len;
  memcpy(m->buf + m->len, data, k);
  m->len += k;
  m->room -= k;
  if (k == 0) errno = ENOSPC;
  return (ssize_t)k; /* fewer than n: stdio fails the flush, not saying how many went */
}

static int mem_seek(void *cookie, off64_t *at, int whence)
{
  sink_mem *m = cookie;
  if (whence == SEEK_CUR && *at == 0) { *at = (off64_t)m->len; return 0; } /* where the writes are: its length */
  if (whence == SEEK_SET && *at == (off64_t)m->len) return 0;
  errno = ESPIPE;
  return -1;
}

static int insert_row(rn_pipeline *p, rn_rel *s, int64_t k)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2);
  msgpack_pack_str_with_body(&pk, "k", 1);
  msgpack_pack_int64(&pk, k);
  msgpack_pack_str_with_body(&pk, "pad", 3);
  msgpack_pack_str_with_body(&pk, "abcdefghijklmnopqrstuvwxyz", 26);
  int rc = rn_insert(p, s, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

/* Whether m holds exactly the lines of k = from … to, each once. */
static int lines_are(const sink_mem *m, int from, int to)
{
  char want[65536];
  size_t n = 0;
  for (int k = from; k <= to; k++)
    n += (size_t)snprintf(want + n, sizeof want - n, "{\"k\":%d,\"pad\":\"abcdefghijklmnopqrstuvwxyz\"}\n", k);
  if (m->len != n || memcmp(m->buf, want, n) != 0) {
    fprintf(stderr, "got %zu bytes: %.*s\n", m->len, (int)m->len, m->buf);
    return 0;
  }
  return 1;
}

/* A group whose write stops after `room` bytes, then the rest delivered. */
static void torn_then_delivered(bool seekable, size_t room)
{
  rn_pipeline *p = NULL;
  rn_rel *s = NULL;
  CHECK(rn_pipeline_open(&(rn_open_opts){ 0 }, &p, NULL, 0) == 0);
  static const rn_column_def cols[] = { { "k", "int", 0, NULL, 0, NULL }, { "pad", "string", 0, NULL, 0, NULL } };
  CHECK(rn_declare_stream(p, "s", cols, 2, &s) == 0);
  sink_mem *m = calloc(1, sizeof *m);
  m->room = room;
  cookie_io_functions_t io = { NULL, mem_write, seekable ? mem_seek : NULL, NULL };
  FILE *f = fopencookie(m, "w", io);
  CHECK(f != NULL && fileno(f) < 0);
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
