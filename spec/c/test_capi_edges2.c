/* test_capi_edges2.c — the C API at its edges, as a game host drives it:
 * groups pushed every tick with sync = false (carried), the write-back
 * layer on and off, subscribers that read while a group commits, a map
 * small enough to fill. The same sequence must give the same groups, rows
 * and errors whichever way write_back is set. Regressions it guards (each
 * failed before its fix) are named on their tests. */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "cursor_fixture.h"
#include "runnel.h"

static const rn_column_def cols[] = { { .name = "id", .type = "int" },
                                      { .name = "name", .type = "string" },
                                      { .name = "n", .type = "int" } };
static const char *const key[] = { "id" };

typedef struct host {
  char dir[64];
  rn_open_opts opts;
  rn_pipeline *p;
  rn_rel *t, *top;
  int events, read_errors;
  int unexcused;          /* read errors not followed by a rollback notice */
  int fail_on_read_error; /* the subscriber returns the read's error */
  int rollbacks;
} host;

/* Reads the top (a derived relation: its rows are made from the state, so
 * the write-back layer's entries go into LMDB's transaction first). */
static int read_top(void *ctx, const rn_event *ev)
{
  host *h = ctx;
  h->events++;
  unsigned char k[] = { 0x81, 0xa2, 'i', 'd', (unsigned char)(ev->id & 0x3f) };
  const void *row;
  size_t len;
  int rc = rn_get(h->p, h->top, k, sizeof k, &row, &len, NULL);
  if (rc) h->read_errors++, h->unexcused++;
  return h->fail_on_read_error ? rc : 0;
}

/* Opens a cursor on the table itself from the subscriber. */
static int read_table(void *ctx, const rn_event *ev)
{
  host *h = ctx;
  (void)ev;
  h->events++;
  rn_cursor *c;
  int rc = rn_cursor_open(h->p, h->t, &c);
  if (rc) h->read_errors++, h->unexcused++;
  else rn_cursor_close(c);
  return h->fail_on_read_error ? rc : 0;
}

static void told(void *ctx, uint64_t seq)
{
  (void)seq;
  ((host *)ctx)->rollbacks++;
  ((host *)ctx)->unexcused = 0; /* the group runs again */
}

static void host_declare(host *h)
{
  CHECK(rn_pipeline_open(&h->opts, &h->p, NULL, 0) == 0);
  CHECK(rn_declare_table(h->p, "t", cols, 3, key, 1, &h->t) == 0);
  static const rn_order_def order[] = { { "n", 1 } };
  rn_top_def def = { .n = 3, .order = order, .norder = 1 };
  CHECK(rn_top_declare(h->p, "top", h->t, &def, &h->top) == 0);
}

static void host_open(host *h, int write_back, int nosync, size_t map_size)
{
  memset(h, 0, sizeof *h);
  snprintf(h->dir, sizeof h->dir, "/tmp/runnel-edges2-XXXXXX");
  CHECK(mkdtemp(h->dir) != NULL);
  h->opts = (rn_open_opts){ .path = h->dir, .nosync = nosync, .write_back = write_back, .map_size = map_size };
  host_declare(h);
}

static void host_close(host *h)
{
  CHECK(rn_pipeline_close(h->p) == 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", h->dir);
  CHECK(system(cmd) == 0);
}

/* Row id of t with a name of len bytes. */
static int insert_row(host *h, int64_t id, size_t len)
{
  static char name[8192];
  memset(name, 'x', sizeof name);
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 3);
  msgpack_pack_str_with_body(&pk, "id", 2);
  msgpack_pack_int64(&pk, id);
  msgpack_pack_str_with_body(&pk, "name", 4);
  msgpack_pack_str_with_body(&pk, name, len < sizeof name ? len : sizeof name);
  msgpack_pack_str_with_body(&pk, "n", 1);
  msgpack_pack_int64(&pk, id % 97);
  int rc = rn_insert(h->p, h->t, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

/* ---- a subscriber's read fills the map ---- */

/* Ticks of 10 rows of 4 KB each, carried (sync = false) in a 1 MiB map: the
 * carried transaction's writes outgrow the map. A subscriber reads the top
 * (or opens a table cursor) as each group commits: with the write-back
 * layer on, that read writes the layer's entries into LMDB's transaction
 * first, and the map fills there. Regression: the read failed and left
 * LMDB's transaction unusable while the group went on to commit, so the
 * next group's change failed ("MDB_BAD_TXN: Transaction must abort"), one
 * group in two refused, where with the layer off every group committed.
 * Now the group whose callback filled the map grows it and runs again, as
 * a sink's writes that fill it at commit do (group.c (5)): every group
 * commits either way; a subscriber whose read failed is told the group
 * rolled back and gets it again, and that read succeeds. */
static void reads_fill_the_map(int write_back, rn_callback fn, int fail_on_read_error)
{
  host h;
  host_open(&h, write_back, 1, (size_t)1 << 20);
  h.fail_on_read_error = fail_on_read_error;
  CHECK(rn_subscribe_rollback(h.p, h.t, fn, told, &h) == 0);
  int64_t id = 0;
  int refused = 0;
  for (int g = 0; g < 60; g++) {
    CHECK(rn_begin(h.p) == 0);
    int rc = 0;
    for (int i = 0; i < 10 && !rc; i++) rc = insert_row(&h, ++id, 4000);
    if (!rc) rc = rn_commit(h.p);
    CHECK(h.unexcused == 0); /* a group whose read failed did not commit as it was */
    if (rc) {
      if (!refused) fprintf(stderr, "  group %d refused: %s\n", g + 1, rn_errmsg(h.p));
      refused++;
    }
  }
  CHECK(refused == 0);
  CHECK(h.events >= 600 && (h.read_errors > 0) == (h.rollbacks > 0)); /* every failed read was excused */
  if (write_back < 0) CHECK(h.read_errors == 0 && h.rollbacks == 0);
  CHECK(rn_flush(h.p) == 0);
  CHECK(rn_seq(h.p) == 60);
  CHECK(count_rows(h.p, h.t) == 600);
  CHECK(rn_pipeline_close(h.p) == 0);
  host_declare(&h);
  CHECK(rn_seq(h.p) == 60 && count_rows(h.p, h.t) == 600 && count_rows(h.p, h.top) == 3);
  host_close(&h);
}

static void test_subscriber_read_that_fills_the_map(void)
{
  for (int wb = -1; wb <= 1; wb += 2) {
    reads_fill_the_map(wb, read_top, 0);
    reads_fill_the_map(wb, read_top, 1);
    reads_fill_the_map(wb, read_table, 0);
  }
}

/* A durable subscriber that fails is tried again after each later commit
 * (OUTBOX-4), while the LMDB transaction carries the group just committed:
 * its read of the top writes the write-back layer's entries into that
 * transaction, and the map fills there, outside any group. Regression: the
 * flush that followed failed on the unusable transaction (MDB_BAD_TXN) and
 * the carried groups were lost (or the next group's change failed); now
 * the carried groups are applied again into a grown map, as a flush or a
 * change that fills the map does. */
typedef struct durable_reader {
  host *h;
  int calls, read_errors, fail_first;
} durable_reader;

static int read_top_durably(void *ctx, const rn_event *ev)
{
  durable_reader *d = ctx;
  (void)ev;
  d->calls++;
  unsigned char k[] = { 0x81, 0xa2, 'i', 'd', 0x01 };
  const void *row;
  size_t len;
  if (rn_get(d->h->p, d->h->top, k, sizeof k, &row, &len, NULL)) d->read_errors++;
  return d->calls <= d->fail_first; /* waits: tried again after the next commit */
}

static void test_durable_subscriber_read_that_fills_the_map(void)
{
  for (int mode = 0; mode < 4; mode++) {
    int wb = mode & 1 ? 1 : -1, flush_after = mode & 2; /* or the next group's change finds the transaction unusable */
    host h;
    host_open(&h, wb, 1, (size_t)1 << 20);
    durable_reader d = { &h, 0, 0, 1000000 };
    CHECK(rn_subscribe_durable(h.p, h.t, "reader", read_top_durably, &d) == 0);
    int64_t id = 0;
    CHECK(insert_row(&h, ++id, 10) == 0 && rn_flush(h.p) == 0); /* group 1 durable: waiting for the reader */
    int failed = 0;
    for (int g = 0; g < 60 && !failed; g++) {
      int errors = d.read_errors;
      CHECK(rn_begin(h.p) == 0);
      int rc = 0;
      for (int i = 0; i < 10 && !rc; i++) rc = insert_row(&h, ++id, 4000);
      if (!rc) rc = rn_commit(h.p); /* carried; the reader is tried again after it */
      if (!rc && flush_after && d.read_errors > errors) rc = rn_flush(h.p); /* right after the read that failed */
      if (rc) fprintf(stderr, "  group %d: %s\n", g + 2, rn_errmsg(h.p));
      failed = rc != 0;
    }
    CHECK(!failed);
    if (wb < 0) CHECK(d.read_errors == 0);
    d.fail_first = 0;
    CHECK(rn_flush(h.p) == 0 && rn_deliver(h.p) == 0);
    CHECK(rn_seq(h.p) == 61 && count_rows(h.p, h.t) == 601);
    CHECK(rn_pipeline_close(h.p) == 0);
    host_declare(&h);
    CHECK(rn_seq(h.p) == 61 && count_rows(h.p, h.t) == 601);
    host_close(&h);
  }
}

/* ---- a cursor in a group whose map grows ---- */

/* A cursor opened inside a group over 50 rows of t, each step followed by
 * ten 4 KB rows into u: the group outgrows the 1 MiB map, which grows and
 * has the group's changes applied again in a new LMDB transaction (group.c
 * (5)) — the same group, still open. Regression: with write_back = -1 the
 * cursor failed half-way (RN_EMISUSE, "the group this cursor was opened
 * in has ended") though the group went on and committed; with the layer on
 * it read every row. Now it reads on in the new transaction from the key
 * it had reached (or, that row deleted since, from the next), either way.
 * A row the group deletes, and one it inserts, past the cursor are seen as
 * an LMDB cursor sees them. */
static void test_group_cursor_across_a_regrow(void)
{
  for (int mode = 0; mode < 8; mode++) {
    int delete_each = mode & 4; /* the row the cursor is on goes before the regrow */
    host h;
    host_open(&h, mode & 1 ? 1 : -1, mode & 2 ? 1 : 0, (size_t)1 << 20);
    rn_rel *u;
    CHECK(rn_declare_table(h.p, "u", cols, 3, key, 1, &u) == 0);
    CHECK(rn_begin(h.p) == 0);
    for (int64_t id = 1; id <= 50; id++) CHECK(insert_row(&h, 2 * id, 10) == 0); /* even ids 2 … 100 */
    CHECK(rn_commit(h.p) == 0);
    CHECK(rn_begin(h.p) == 0);
    rn_cursor *c;
    CHECK(rn_cursor_open(h.p, h.t, &c) == 0);
    const void *row;
    size_t len;
    uint64_t rid;
    int done = 0, rc, n = 0;
    int64_t uid = 0, last = 0;
    host into_u = h;
    into_u.t = u;
    while ((rc = rn_cursor_next(c, &row, &len, &rid, &done)) == 0 && !done) {
      char f[16] = "";
      msgpack_unpacked m;
      msgpack_unpacked_init(&m);
      if (msgpack_unpack_next(&m, row, len, NULL) == MSGPACK_UNPACK_SUCCESS) {
        int64_t id = m.data.via.map.ptr[0].val.via.i64;
        CHECK(id > last);
        last = id;
        snprintf(f, sizeof f, "%lld", (long long)id);
      }
      msgpack_unpacked_destroy(&m);
      n++;
      unsigned char this_one[] = { 0x81, 0xa2, 'i', 'd', (unsigned char)last };
      if (delete_each) CHECK(rn_delete(h.p, h.t, this_one, sizeof this_one) == 0);
      for (int i = 0; i < 10; i++) CHECK(insert_row(&into_u, ++uid, 4000) == 0);
      if (last == 20) { /* past the cursor: 22 goes, 23 comes */
        unsigned char del[] = { 0x81, 0xa2, 'i', 'd', 22 };
        CHECK(rn_delete(h.p, h.t, del, sizeof del) == 0);
        CHECK(insert_row(&h, 23, 10) == 0);
      }
    }
    if (rc) fprintf(stderr, "  mode %d: row %d: %s\n", mode, n + 1, rn_errmsg(h.p));
    CHECK(rc == 0 && done && n == 50 && last == 100);
    rn_cursor_close(c);
    CHECK(rn_commit(h.p) == 0);
    CHECK(count_rows(h.p, u) == 500 && count_rows(h.p, h.t) == (delete_each ? 0 : 50));
    host_close(&h);
  }
}

/* A cursor closed after the regrow without another step: its LMDB cursor
 * went with the old transaction and is not closed again (under ASan: a
 * use after free before the fix). */
static void test_group_cursor_closed_after_a_regrow(void)
{
  for (int wb = -1; wb <= 1; wb += 2) {
    host h;
    host_open(&h, wb, 0, (size_t)1 << 20);
    rn_rel *u;
    CHECK(rn_declare_table(h.p, "u", cols, 3, key, 1, &u) == 0);
    host in_u = h;
    in_u.t = u;
    CHECK(insert_row(&h, 1, 10) == 0 && insert_row(&h, 2, 10) == 0);
    CHECK(rn_begin(h.p) == 0);
    rn_cursor *c;
    const void *row;
    size_t len;
    uint64_t rid;
    int done = 0;
    CHECK(rn_cursor_open(h.p, h.t, &c) == 0 && rn_cursor_next(c, &row, &len, &rid, &done) == 0 && !done);
    rn_cursor *d; /* opened, never stepped */
    CHECK(rn_cursor_open(h.p, h.t, &d) == 0);
    for (int64_t id = 1; id <= 400; id++) CHECK(insert_row(&in_u, id, 4000) == 0); /* 1.6 MB: the map grows */
    rn_cursor_close(c);
    CHECK(rn_cursor_next(d, &row, &len, &rid, &done) == 0 && !done && rid == 1);
    rn_cursor_close(d);
    CHECK(rn_commit(h.p) == 0 && count_rows(h.p, u) == 400);
    host_close(&h);
  }
}

/* The same over a keyless table, whose deleted rows leave no entry: the
 * row the cursor was on is gone when the regrow comes, and it goes on
 * from the next. */
static void test_keyless_group_cursor_across_a_regrow(void)
{
  for (int wb = -1; wb <= 1; wb += 2) {
    host h;
    host_open(&h, wb, 0, (size_t)1 << 20);
    rn_rel *k, *u;
    CHECK(rn_declare_table(h.p, "k", cols, 3, NULL, 0, &k) == 0);
    CHECK(rn_declare_table(h.p, "u", cols, 3, key, 1, &u) == 0);
    host in_k = h, in_u = h;
    in_k.t = k;
    in_u.t = u;
    CHECK(rn_begin(h.p) == 0);
    for (int64_t id = 1; id <= 50; id++) CHECK(insert_row(&in_k, id, 10) == 0);
    CHECK(rn_commit(h.p) == 0);
    CHECK(rn_begin(h.p) == 0);
    rn_cursor *c;
    CHECK(rn_cursor_open(h.p, k, &c) == 0);
    const void *row;
    size_t len;
    uint64_t rid, last = 0;
    int done = 0, rc, n = 0;
    int64_t uid = 0;
    while ((rc = rn_cursor_next(c, &row, &len, &rid, &done)) == 0 && !done) {
      CHECK(rid > last);
      last = rid;
      n++;
      CHECK(rn_delete(h.p, k, row, len) == 0); /* the whole row: the keyless delete */
      for (int i = 0; i < 10; i++) CHECK(insert_row(&in_u, ++uid, 4000) == 0);
    }
    if (rc) fprintf(stderr, "  write_back %d: row %d: %s\n", wb, n + 1, rn_errmsg(h.p));
    CHECK(rc == 0 && done && n == 50 && last == 50);
    rn_cursor_close(c);
    CHECK(rn_commit(h.p) == 0);
    CHECK(count_rows(h.p, k) == 0 && count_rows(h.p, u) == 500);
    host_close(&h);
  }
}

/* ---- hostile msgpack ---- */

/* {"id": 1, col: a list nesting depth lists deep (around an int)} */
static size_t deep_change(unsigned char *b, const char *col, int depth)
{
  size_t n = 0, clen = strlen(col);
  b[n++] = 0x82;
  b[n++] = 0xa2, b[n++] = 'i', b[n++] = 'd', b[n++] = 0x01;
  b[n++] = (unsigned char)(0xa0 | clen);
  memcpy(b + n, col, clen);
  n += clen;
  for (int i = 0; i < depth; i++) b[n++] = 0x91;
  b[n++] = 0x07;
  return n;
}

/* A value nested deeper than msgpack-c's unpacker goes (32 containers)
 * is valid msgpack too: it is refused naming the relation and the
 * column, as one nested 25 deep is. Regression: "t: the change is not
 * valid msgpack", naming neither (nor the bound). Inside a group the
 * refusal rolls the group back, as every bad change does. */
static void test_deep_values_name_their_column(void)
{
  rn_pipeline *p;
  rn_rel *t;
  CHECK(rn_pipeline_open(&(rn_open_opts){ .write_back = -1 }, &p, NULL, 0) == 0);
  static const rn_column_def any_cols[] = { { .name = "id", .type = "int" },
                                            { .name = "a", .type = "any", .nullable = 1 },
                                            { .name = "l", .type = "list", .nullable = 1 } };
  CHECK(rn_declare_table(p, "t", any_cols, 3, key, 1, &t) == 0);
  static unsigned char b[300000];
  const int depths[] = { 24, 25, 31, 32, 40, 1000, 100000 };
  for (size_t i = 0; i < sizeof depths / sizeof *depths; i++) {
    for (int c = 0; c < 2; c++) {
      const char *col = c ? "l" : "a";
      size_t n = deep_change(b, col, depths[i]);
      int rc = rn_insert(p, t, b, n);
      if (depths[i] <= 24) {
        CHECK(rc == 0);
        unsigned char del[] = { 0x81, 0xa2, 'i', 'd', 0x01 };
        CHECK(rn_delete(p, t, del, sizeof del) == 0);
        continue;
      }
      char want[128];
      snprintf(want, sizeof want, "t: column \"%s\": expected a value nesting at most 24 lists, maps or structs", col);
      CHECK(rc == RN_EINVAL);
      if (strncmp(rn_errmsg(p), want, strlen(want)) != 0)
        fprintf(stderr, "  depth %d: %s\n", depths[i], rn_errmsg(p));
      CHECK(strncmp(rn_errmsg(p), want, strlen(want)) == 0);
    }
  }
  /* In a group: rolled back, the group's earlier change with it. */
  CHECK(rn_begin(p) == 0);
  unsigned char ok[] = { 0x81, 0xa2, 'i', 'd', 0x02 };
  CHECK(rn_insert(p, t, ok, sizeof ok) == 0);
  size_t n = deep_change(b, "a", 500);
  CHECK(rn_insert(p, t, b, n) == RN_EINVAL);
  CHECK(rn_commit(p) == RN_EMISUSE); /* no group is open */
  CHECK(count_rows(p, t) == 0 && rn_seq(p) == 4); /* the two inserts and deletes at depth 24 */
  /* Under a column that is not there: that is what is wrong with it. */
  n = deep_change(b, "zz", 500);
  CHECK(rn_insert(p, t, b, n) == RN_EINVAL);
  CHECK(strncmp(rn_errmsg(p), "t: unknown column \"zz\"", 22) == 0);
  CHECK(rn_pipeline_close(p) == 0);
}

/* ---- refusals from inside callbacks name what was refused ---- */

typedef struct inner {
  host *h;
  int rc;
  char msg[256];
} inner;

static int noop(void *ctx, const rn_event *ev) { (void)ctx; (void)ev; return 0; }

static int subscribe_durably_inside(void *ctx, const rn_event *ev)
{
  inner *in = ctx;
  (void)ev;
  in->rc = rn_subscribe_durable(in->h->p, in->h->t, "late", noop, NULL);
  snprintf(in->msg, sizeof in->msg, "%s", rn_errmsg(in->h->p));
  return 0;
}

/* rn_subscribe_durable from a subscriber is refused as rn_subscribe is,
 * naming the relation and the call. Regression: the message was the
 * flush it makes first ("flush: not from inside a callback"). */
static void test_durable_subscription_from_a_callback(void)
{
  host h;
  host_open(&h, -1, 0, 0);
  inner in = { &h, 0, "" };
  CHECK(rn_subscribe(h.p, h.t, subscribe_durably_inside, &in) == 0);
  CHECK(insert_row(&h, 1, 3) == 0);
  CHECK(in.rc == RN_EMISUSE);
  CHECK(strcmp(in.msg, "t: rn_subscribe_durable: not inside a group or a callback") == 0);
  CHECK(rn_begin(h.p) == 0);
  CHECK(rn_subscribe_durable(h.p, h.t, "late", noop, NULL) == RN_EMISUSE);
  CHECK(strcmp(rn_errmsg(h.p), "t: rn_subscribe_durable: not inside a group or a callback") == 0);
  CHECK(insert_row(&h, 2, 3) == 0 && rn_commit(h.p) == 0); /* the group stayed open */
  CHECK(rn_subscribe_durable(h.p, h.t, "late", noop, NULL) == 0);
  host_close(&h);
}

/* ---- durability hooks registered from a hook ---- */

typedef struct rearm {
  rn_pipeline *p;
  int calls;
  uint64_t seqs[64];
} rearm;

/* "Tell me when the next group is durable": each call registers the next. */
static void rearming_hook(void *ctx, uint64_t seq)
{
  rearm *r = ctx;
  if (r->calls < 64) r->seqs[r->calls] = seq;
  if (++r->calls >= 1000) return; /* bounds the test: it looped before the fix */
  CHECK(rn_on_durable(r->p, rearming_hook, r) == 0);
}

/* A hook registered from inside a hook is called from the next LMDB
 * commit on, not in the pass that is running. Regression: the pass ran
 * every hook added during it too, so a hook that registers its successor
 * looped without end inside rn_commit. */
static void test_hook_registered_from_a_hook(void)
{
  for (int nosync = 0; nosync < 2; nosync++) {
    host h;
    host_open(&h, -1, nosync, 0);
    rearm r = { h.p, 0, { 0 } };
    CHECK(rn_on_durable(h.p, rearming_hook, &r) == 0);
    CHECK(insert_row(&h, 1, 3) == 0 && rn_flush(h.p) == 0);
    CHECK(r.calls == 1 && r.seqs[0] == 1);
    CHECK(insert_row(&h, 2, 3) == 0 && rn_flush(h.p) == 0); /* the first hook and the one it added */
    CHECK(r.calls == 3 && r.seqs[1] == 2 && r.seqs[2] == 2);
    host_close(&h);
  }
}

int main(void)
{
  RUN(test_hook_registered_from_a_hook);
  RUN(test_group_cursor_across_a_regrow);
  RUN(test_keyless_group_cursor_across_a_regrow);
  RUN(test_group_cursor_closed_after_a_regrow);
  RUN(test_durable_subscription_from_a_callback);
  RUN(test_deep_values_name_their_column);
  RUN(test_subscriber_read_that_fills_the_map);
  RUN(test_durable_subscriber_read_that_fills_the_map);
  return CHECK_REPORT();
}
