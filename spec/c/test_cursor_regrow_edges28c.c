/* test_cursor_regrow_edges28c.c — a group's table cursor when the
 * write-back layer's entries it writes into LMDB fill the map by more
 * than one doubling (review 28c). Uses runnel.h only. */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "host_fixture.h"
#include "runnel.h"

static const rn_column_def cols[] = { { .name = "id", .type = "int" }, { .name = "pad", .type = "string" } };

/* { id, pad of len bytes } into t. */
static int put(host *h, int64_t id, size_t len)
{
  static char pad[4096];
  memset(pad, 'p', sizeof pad);
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2);
  msgpack_pack_str_with_body(&pk, "id", 2);
  msgpack_pack_int64(&pk, id);
  msgpack_pack_str_with_body(&pk, "pad", 3);
  msgpack_pack_str_with_body(&pk, pad, len < sizeof pad ? len : sizeof pad);
  int rc = rn_push(h->p, h->t, RN_OP_INSERT, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

/* Steps c to its end: the rows read (-1 on an error, said). */
static int read_all(host *h, rn_cursor *c)
{
  const void *row;
  size_t len;
  uint64_t id;
  int done = 0, rc, n = 0;
  while ((rc = rn_cursor_next(c, &row, &len, &id, &done)) == 0 && !done) n++;
  if (rc) fprintf(stderr, "  after %d rows: %s\n", n, rn_errmsg(h->p));
  return rc ? -1 : n;
}

/* A group's cursor opened first, then 3 MiB of new rows in a map of
 * 1 MiB: its first step writes them into LMDB, and the map must double
 * twice. Regression: the first doubling went on in a new transaction
 * whose cursor, opened again, writes the entries as it opens; a full map
 * there was returned (RN_EFULL) with the cursor dropped and the group
 * left open, every later step saying the group had ended. */
static void test_step_needing_two_doublings(void)
{
  host h;
  host_open(&h, cols, 2, 1);
  CHECK(rn_begin(h.p) == 0);
  rn_cursor *c;
  CHECK(rn_cursor_open(h.p, h.t, &c) == 0);
  for (int64_t id = 1; id <= 1000; id++) CHECK(put(&h, id, 3000) == 0);
  CHECK(read_all(&h, c) == 1000);
  rn_cursor_close(c);
  CHECK(rn_commit(h.p) == 0);
  CHECK(rn_seq(h.p) == 1);
  CHECK(rn_cursor_open(h.p, h.t, &c) == 0);
  CHECK(read_all(&h, c) == 1000);
  rn_cursor_close(c);
  host_close(&h);
}

/* The same 3 MiB written in the group before its cursor opens: opening
 * it writes them into LMDB. */
static void test_open_filling_the_map(void)
{
  host h;
  host_open(&h, cols, 2, 1);
  CHECK(rn_begin(h.p) == 0);
  for (int64_t id = 1; id <= 1000; id++) CHECK(put(&h, id, 3000) == 0);
  rn_cursor *c = NULL;
  int rc = rn_cursor_open(h.p, h.t, &c);
  if (rc) fprintf(stderr, "  open: %d %s\n", rc, rn_errmsg(h.p));
  CHECK(rc == 0);
  if (!rc) {
    CHECK(read_all(&h, c) == 1000);
    rn_cursor_close(c);
  }
  rc = rn_commit(h.p);
  if (rc) fprintf(stderr, "  commit: %d %s\n", rc, rn_errmsg(h.p));
  CHECK(rc == 0 && rn_seq(h.p) == 1);
  host_close(&h);
}

int main(void)
{
  RUN(test_step_needing_two_doublings);
  RUN(test_open_filling_the_map);
  printf("%d passed, %d failed\n", check_passed, check_failed);
  return check_failed != 0;
}
