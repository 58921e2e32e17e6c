/* test_capi_edges28.c — a host's reads inside its own groups: a cursor
 * over a table the group is rewriting row by row while the map fills,
 * and the messages of a cursor given a NULL. Uses runnel.h only. */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runnel.h"

static const rn_column_def cols[] = { { .name = "id", .type = "int" }, { .name = "v", .type = "int" },
                                      { .name = "pad", .type = "string" } };
static const char *const key[] = { "id" };

typedef struct host {
  char dir[64];
  rn_open_opts opts;
  rn_pipeline *p;
  rn_rel *t;
} host;

static void host_open(host *h, int write_back)
{
  memset(h, 0, sizeof *h);
  snprintf(h->dir, sizeof h->dir, "/tmp/runnel-edges28-XXXXXX");
  CHECK(mkdtemp(h->dir) != NULL);
  h->opts = (rn_open_opts){ .path = h->dir, .write_back = write_back, .map_size = (size_t)1 << 20 };
  char err[512] = "";
  int rc = rn_pipeline_open(&h->opts, &h->p, err, sizeof err);
  if (rc) fprintf(stderr, "  open: %s\n", err);
  CHECK(rc == 0);
  CHECK(rn_declare_table(h->p, "t", cols, 3, key, 1, &h->t) == 0);
}

static void host_close(host *h)
{
  CHECK(rn_pipeline_close(h->p) == 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", h->dir);
  CHECK(system(cmd) == 0);
}

/* { id, v, pad of len bytes } into t by op. */
static int put(host *h, rn_op op, int64_t id, int64_t v, size_t len)
{
  static char pad[4096];
  memset(pad, 'p', sizeof pad);
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 3);
  msgpack_pack_str_with_body(&pk, "id", 2);
  msgpack_pack_int64(&pk, id);
  msgpack_pack_str_with_body(&pk, "v", 1);
  msgpack_pack_int64(&pk, v);
  msgpack_pack_str_with_body(&pk, "pad", 3);
  msgpack_pack_str_with_body(&pk, pad, len < sizeof pad ? len : sizeof pad);
  int rc = rn_push(h->p, h->t, op, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

/* The int column name of the row map (-1 when absent). */
static int64_t int_of(const void *row, size_t len, const char *name)
{
  int64_t v = -1;
  msgpack_unpacked m;
  msgpack_unpacked_init(&m);
  if (msgpack_unpack_next(&m, row, len, NULL) == MSGPACK_UNPACK_SUCCESS && m.data.type == MSGPACK_OBJECT_MAP)
    for (uint32_t i = 0; i < m.data.via.map.size; i++) {
      const msgpack_object_kv *kv = &m.data.via.map.ptr[i];
      if (kv->key.via.str.size == strlen(name) && memcmp(kv->key.via.str.ptr, name, strlen(name)) == 0)
        v = kv->val.via.i64;
    }
  msgpack_unpacked_destroy(&m);
  return v;
}

/* Rows of t whose v is want (-1: all of them). */
static int rows_with(host *h, int64_t want)
{
  rn_cursor *c;
  if (rn_cursor_open(h->p, h->t, &c) != 0) return -1;
  const void *row;
  size_t len;
  uint64_t id;
  int done = 0, rc, n = 0;
  while ((rc = rn_cursor_next(c, &row, &len, &id, &done)) == 0 && !done)
    if (want < 0 || int_of(row, len, "v") == want) n++;
  rn_cursor_close(c);
  return rc ? -1 : n;
}

/* ---- a group's cursor over the rows it rewrites, the map filling ---- */

/* 2000 rows of about 100 bytes, then one group reading them with a cursor
 * and updating each to v = 1 with a row three times longer: the map of
 * 1 MiB fills half-way. Regression: with the write-back layer on, the
 * cursor's step writes the group's entries of t into LMDB first, and the
 * full map failed that step (RN_EFULL, "t: MDB_MAP_FULL: Environment
 * mapsize limit reached") after 1750 rows, though a full map inside a
 * group grows it and goes on (group.c (5)): a change does, a derived
 * relation's read does, the same cursor with the layer off did. It now
 * grows the map and reads on from the key it had reached. */
static void test_group_cursor_rewriting_its_table_as_the_map_fills(void)
{
  for (int mode = 0; mode < 2; mode++) {
    host h;
    host_open(&h, mode ? 1 : -1);
    CHECK(rn_begin(h.p) == 0);
    for (int64_t id = 1; id <= 2000; id++) CHECK(put(&h, RN_OP_INSERT, id, 0, 100) == 0);
    CHECK(rn_commit(h.p) == 0);
    CHECK(rn_begin(h.p) == 0);
    rn_cursor *c;
    CHECK(rn_cursor_open(h.p, h.t, &c) == 0);
    const void *row;
    size_t len;
    uint64_t rid;
    int done = 0, rc, n = 0, stale = 0;
    int64_t last = 0;
    while ((rc = rn_cursor_next(c, &row, &len, &rid, &done)) == 0 && !done) {
      int64_t id = int_of(row, len, "id");
      CHECK(id > last);
      last = id;
      stale += int_of(row, len, "v") != 0; /* a row the group rewrote already, read again */
      n++;
      CHECK(put(&h, RN_OP_UPDATE, id, 1, 300) == 0);
    }
    if (rc) fprintf(stderr, "  write_back %d: row %d: %s\n", mode ? 1 : -1, n + 1, rn_errmsg(h.p));
    CHECK(rc == 0 && done && n == 2000 && last == 2000 && stale == 0);
    rn_cursor_close(c);
    CHECK(rn_commit(h.p) == 0);
    CHECK(rn_seq(h.p) == 2);
    CHECK(rows_with(&h, 1) == n);
    CHECK(rn_pipeline_close(h.p) == 0);
    char err[512] = "";
    CHECK(rn_pipeline_open(&h.opts, &h.p, err, sizeof err) == 0);
    CHECK(rn_declare_table(h.p, "t", cols, 3, key, 1, &h.t) == 0);
    CHECK(rn_seq(h.p) == 2 && rows_with(&h, -1) == 2000 && rows_with(&h, 1) == n);
    host_close(&h);
  }
}

/* ---- the messages of a cursor's misuse ---- */

/* Regression: rn_cursor_next with a NULL out argument returned RN_EINVAL
 * and left rn_errmsg as the call before it had set it (empty, or an older
 * failure's message), though the cursor knows its pipeline. */
static void test_cursor_next_null_argument_says_so(void)
{
  host h;
  host_open(&h, 0);
  CHECK(put(&h, RN_OP_INSERT, 1, 0, 10) == 0);
  CHECK(rn_drop(h.p, "nothing") == RN_ENOTFOUND); /* a message the next one must not leave standing */
  rn_cursor *c;
  CHECK(rn_cursor_open(h.p, h.t, &c) == 0);
  CHECK(rn_drop(h.p, "nothing") == RN_ENOTFOUND);
  const void *row;
  size_t len;
  uint64_t id;
  int done;
  CHECK(rn_cursor_next(c, &row, &len, NULL, &done) == RN_EINVAL);
  CHECK(strcmp(rn_errmsg(h.p), "t: rn_cursor_next: row, row_len, id and done are required") == 0);
  CHECK(rn_cursor_next(c, NULL, &len, &id, &done) == RN_EINVAL);
  CHECK(strstr(rn_errmsg(h.p), "rn_cursor_next") != NULL);
  CHECK(rn_cursor_next(c, &row, &len, &id, &done) == 0 && !done && rn_errmsg(h.p)[0] == '\0');
  CHECK(rn_cursor_next(c, &row, &len, &id, &done) == 0 && done);
  CHECK(rn_cursor_next(NULL, &row, &len, &id, &done) == RN_EINVAL); /* no cursor: nowhere to say it */
  rn_cursor_close(c);
  host_close(&h);
}

int main(void)
{
  RUN(test_group_cursor_rewriting_its_table_as_the_map_fills);
  RUN(test_cursor_next_null_argument_says_so);
  return CHECK_REPORT();
}
