/* test_capi_edges28.c — a host's reads inside its own groups: a cursor
 * over a table the group is rewriting row by row while the map fills,
 * the messages of a cursor given a NULL, and messages quoting names that
 * are not UTF-8. Uses runnel.h only. */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "host_fixture.h"
#include "runnel.h"

static const rn_column_def cols[] = { { .name = "id", .type = "int" }, { .name = "v", .type = "int" },
                                      { .name = "pad", .type = "string" } };
static const char *const key[] = { "id" };

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
    host_open(&h, cols, 3, mode ? 1 : -1);
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
  host_open(&h, cols, 3, 0);
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

/* ---- messages quoting names that are not UTF-8 ---- */

/* Whether s is valid UTF-8 (no overlong form, surrogate, or code point
 * past U+10FFFF), as a JSON log line needs it. */
static int utf8_ok(const char *str)
{
  const unsigned char *s = (const unsigned char *)str;
  while (*s) {
    unsigned c = *s, n = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2
                                                               : c >= 0xF0 && c <= 0xF4 ? 3 : 9;
    if (n == 9) return 0;
    unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    for (unsigned i = 1; i <= n; i++, lo = 0x80, hi = 0xBF)
      if (s[i] < lo || s[i] > hi) return 0;
    s += n + 1;
  }
  return 1;
}

static int refuse(void *ctx, const rn_event *ev)
{
  (void)ctx;
  (void)ev;
  return 1;
}

/* Regression: a relation name (or a change's column name) that is not
 * UTF-8 is refused with a message quoting it, its stray bytes as \xNN;
 * but a sequence shaped like a UTF-8 character and still invalid (an
 * overlong form, a surrogate, a code point past U+10FFFF) went into the
 * message raw, so the message itself was not UTF-8. Likewise a name cut
 * to 24 bytes in "relation name … is N bytes" (cut inside a character),
 * and a name quoted raw in "relations are declared outside groups", in
 * rn_drop's refusals, and in a durable subscriber's messages. And a long
 * name cut by a buffer a message is made in (a column's path of 512
 * bytes, the message's 1024) ended in half a character: every message is
 * UTF-8 now, a byte of no character written \xNN. */
static void test_messages_quoting_names_are_utf8(void)
{
  host h;
  host_open(&h, cols, 3, 0);
  static const char *const bad[] = { "r\xe0\x80\x80", "r\xed\xa0\x80", "r\xf4\x90\x80\x80", "r\xf0\x80\x80\x80",
                                     "r\xc0\x80", "r\xff" };
  rn_rel *r;
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    CHECK(rn_declare_table(h.p, bad[i], cols, 3, key, 1, &r) == RN_EINVAL);
    if (!utf8_ok(rn_errmsg(h.p)) || !strstr(rn_errmsg(h.p), "\\x")) fprintf(stderr, "  name %zu: %s\n", i, rn_errmsg(h.p));
    CHECK(utf8_ok(rn_errmsg(h.p)) && strstr(rn_errmsg(h.p), "is not valid UTF-8") && strstr(rn_errmsg(h.p), "\\x"));
    unsigned char change[16] = { 0x82, 0xa2, 'i', 'd', 1 };
    size_t n = 5, len = strlen(bad[i]);
    change[n++] = (unsigned char)(0xa0 | len);
    memcpy(change + n, bad[i], len);
    n += len;
    change[n++] = 1;
    CHECK(rn_insert(h.p, h.t, change, n) == RN_EINVAL);
    if (!utf8_ok(rn_errmsg(h.p))) fprintf(stderr, "  column %zu: %s\n", i, rn_errmsg(h.p));
    CHECK(utf8_ok(rn_errmsg(h.p)));
  }
  char longname[700] = "a";
  for (int i = 0; i < 300; i++) strcat(longname, "\xc3\xa9"); /* é: byte 24 is the middle of one */
  CHECK(rn_declare_table(h.p, longname, cols, 3, key, 1, &r) == RN_EINVAL);
  if (!utf8_ok(rn_errmsg(h.p))) fprintf(stderr, "  long name: %s\n", rn_errmsg(h.p));
  CHECK(utf8_ok(rn_errmsg(h.p)) && strstr(rn_errmsg(h.p), "is 601 bytes; the limit is 508"));
  CHECK(rn_drop(h.p, bad[0]) == RN_ENOTFOUND);
  if (!utf8_ok(rn_errmsg(h.p))) fprintf(stderr, "  drop: %s\n", rn_errmsg(h.p));
  CHECK(utf8_ok(rn_errmsg(h.p)) && strstr(rn_errmsg(h.p), "holds no relation or store \"r\\xe0\\x80\\x80\""));
  CHECK(rn_drop(h.p, longname) == RN_ENOTFOUND);
  if (!utf8_ok(rn_errmsg(h.p))) fprintf(stderr, "  drop a long name: %s\n", rn_errmsg(h.p));
  CHECK(utf8_ok(rn_errmsg(h.p)) && strstr(rn_errmsg(h.p), "drop: no relation \"a"));
  CHECK(rn_subscribe_durable(h.p, h.t, bad[1], refuse, NULL) == 0); /* a name only the host reads */
  CHECK(put(&h, RN_OP_INSERT, 1, 0, 10) == 0);
  CHECK(rn_deliver(h.p) == RN_ECALLBACK);
  if (!utf8_ok(rn_errmsg(h.p))) fprintf(stderr, "  durable subscriber: %s\n", rn_errmsg(h.p));
  CHECK(utf8_ok(rn_errmsg(h.p)) && strstr(rn_errmsg(h.p), "t: durable subscriber \"r\\xed\\xa0\\x80\": subscriber returned 1"));
  CHECK(rn_unsubscribe(h.p, h.t, refuse, NULL) == 0);
  /* a column name of 4000 bytes (é), cut by the buffers a message is made in */
  char *col = calloc(1, 4001);
  for (int i = 0; i < 2000; i++) strcat(col, "\xc3\xa9");
  rn_column_def long_col[] = { { .name = "id", .type = "int" }, { .name = col, .type = "int" } };
  CHECK(rn_declare_table(h.p, "lc", long_col, 2, key, 1, &r) == 0);
  unsigned char *change = malloc(4100);
  size_t n = 0;
  memcpy(change, "\x82\xa2id\x01\xda\x0f\xa0", 8); /* { id = 1, <col> = "x" }: a str16 of 4000 bytes */
  n = 8;
  memcpy(change + n, col, 4000);
  n += 4000;
  memcpy(change + n, "\xa1x", 2);
  n += 2;
  CHECK(rn_insert(h.p, r, change, n) == RN_EINVAL);
  if (!utf8_ok(rn_errmsg(h.p))) fprintf(stderr, "  long column: %.60s…\n", rn_errmsg(h.p));
  CHECK(utf8_ok(rn_errmsg(h.p)) && strstr(rn_errmsg(h.p), ": expected int, got string"));
  rn_column_def twice[] = { { .name = "id", .type = "int" }, { .name = col, .type = "int" }, { .name = col, .type = "int" } };
  CHECK(rn_declare_table(h.p, "lc2", twice, 3, key, 1, &r) == RN_EINVAL);
  if (!utf8_ok(rn_errmsg(h.p))) fprintf(stderr, "  column twice: %.60s…\n", rn_errmsg(h.p));
  CHECK(utf8_ok(rn_errmsg(h.p)) && strstr(rn_errmsg(h.p), "lc2: duplicate column name"));
  free(change);
  free(col);
  CHECK(rn_begin(h.p) == 0);
  CHECK(rn_declare_table(h.p, bad[1], cols, 3, key, 1, &r) == RN_EMISUSE);
  if (!utf8_ok(rn_errmsg(h.p))) fprintf(stderr, "  in a group: %s\n", rn_errmsg(h.p));
  CHECK(utf8_ok(rn_errmsg(h.p)) && strstr(rn_errmsg(h.p), "relations are declared outside groups"));
  CHECK(rn_commit(h.p) == 0);
  host_close(&h);
}

int main(void)
{
  RUN(test_group_cursor_rewriting_its_table_as_the_map_fills);
  RUN(test_cursor_next_null_argument_says_so);
  RUN(test_messages_quoting_names_are_utf8);
  return CHECK_REPORT();
}
