/* ndjson_stream_fixture.h — for the C tests of an NDJSON sink on an open
 * stream (test_ndjson_nofd7.c, test_ndjson_short10.c, test_ndjson_torn.c)
 * or on a path (test_ndjson_format12.c, test_ndjson_file26.c,
 * test_sink_sync19.c): a pipeline with a stream "s" of rows {k, pad} to
 * write to it, and a stream with no file descriptor (fileno fails: a
 * fopencookie stream) that keeps what it is given in memory and takes
 * fewer bytes than it is given when told to; for a path, the sink's
 * pipeline, a crash of its writer and the file's lines. Include it once
 * per test. */
#ifndef NDJSON_STREAM_FIXTURE_H
#define NDJSON_STREAM_FIXTURE_H

#include <errno.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ndjson.h"
#include "runnel.h"

/* What the stream keeps: at most `per_call` bytes of each write (0: all),
 * at most `room` more in all (then a short write, as a full device or a
 * quota would); a write that takes nothing sets errno to `err` (0: leaves
 * it set to 0). */
typedef struct sink_mem {
  char buf[65536];
  size_t len;
  size_t room;
  size_t per_call;
  int err;
} sink_mem;

static inline ssize_t mem_write(void *cookie, const char *data, size_t n)
{
  sink_mem *m = cookie;
  size_t k = n < m->room ? n : m->room;
  if (m->per_call && k > m->per_call) k = m->per_call;
  if (k > sizeof m->buf - m->len) k = sizeof m->buf - m->len;
  memcpy(m->buf + m->len, data, k);
  m->len += k;
  m->room -= k;
  if (k == 0) errno = m->err;
  return (ssize_t)k; /* fewer than n: stdio fails the flush, not saying how many went */
}

static inline int mem_seek(void *cookie, off64_t *at, int whence)
{
  sink_mem *m = cookie;
  if (whence == SEEK_CUR && *at == 0) { *at = (off64_t)m->len; return 0; } /* where the writes are: its length */
  if (whence == SEEK_SET && *at == (off64_t)m->len) return 0;
  errno = ESPIPE;
  return -1;
}

/* A stream writing to m, with a position (mem_seek) when seekable; it has
 * no file descriptor. */
static inline FILE *mem_stream(sink_mem *m, bool seekable)
{
  cookie_io_functions_t io = { NULL, mem_write, seekable ? mem_seek : NULL, NULL };
  FILE *f = fopencookie(m, "w", io);
  CHECK(f != NULL && fileno(f) < 0);
  return f;
}

/* A new pipeline in memory with the stream "s" of rows {k int, pad string}. */
static inline rn_pipeline *open_with_stream(rn_rel **s)
{
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&(rn_open_opts){ 0 }, &p, NULL, 0) == 0);
  static const rn_column_def cols[] = { { "k", "int", 0, NULL, 0, NULL }, { "pad", "string", 0, NULL, 0, NULL } };
  CHECK(rn_declare_stream(p, "s", cols, 2, s) == 0);
  return p;
}

/* Inserts {k, pad} into s: pad is len bytes at pad. */
static inline int insert_padded(rn_pipeline *p, rn_rel *s, int64_t k, const char *pad, size_t len)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2);
  msgpack_pack_str_with_body(&pk, "k", 1);
  msgpack_pack_int64(&pk, k);
  msgpack_pack_str_with_body(&pk, "pad", 3);
  msgpack_pack_str_with_body(&pk, pad, len);
  int rc = rn_insert(p, s, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

/* Inserts {k, pad = the alphabet} into s: the lines lines_are expects. */
static inline int insert_row(rn_pipeline *p, rn_rel *s, int64_t k)
{
  return insert_padded(p, s, k, "abcdefghijklmnopqrstuvwxyz", 26);
}

/* Whether m holds exactly the lines insert_row writes for k = from … to,
 * each once. */
static inline int lines_are(const sink_mem *m, int from, int to)
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

/* A pipeline on dir with stream s of rows {k, pad} and an NDJSON sink on
 * the path log (verb: its verb field, or NULL). */
static inline rn_pipeline *open_path_sink(const char *dir, const char *log, const char *verb, rn_rel **s)
{
  rn_pipeline *p = NULL;
  rn_open_opts o = { 0 };
  o.path = dir;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  static const rn_column_def cols[] = { { "k", "int", 0, NULL, 0, NULL }, { "pad", "string", 0, NULL, 0, NULL } };
  CHECK(p && rn_declare_stream(p, "s", cols, 2, s) == 0);
  CHECK(rn_ndjson_sink_path(p, *s, log, verb, NULL) == 0);
  return p;
}

/* A crash of the sink's writer: a child writes groups 1..3 (insert_row)
 * to dir's sink on log (open_path_sink, verb) and exits without closing,
 * so group 3's mark is not recorded. */
static inline void crash_after_three_groups(const char *dir, const char *log, const char *verb)
{
  fflush(NULL);
  pid_t child = fork();
  if (child == 0) {
    rn_rel *s = NULL;
    rn_pipeline *p = open_path_sink(dir, log, verb, &s);
    for (int k = 1; k <= 3; k++) CHECK(insert_row(p, s, k) == 0);
    _exit(check_failed_now);
  }
  int status;
  CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* How many lines the file at path holds; -1: it cannot be read. */
static inline int count_lines(const char *path)
{
  FILE *f = fopen(path, "r");
  int n = 0, c;
  if (!f) return -1;
  while ((c = fgetc(f)) != EOF) n += c == '\n';
  fclose(f);
  return n;
}

#endif
