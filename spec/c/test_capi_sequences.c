/* test_capi_sequences.c — the public C API under unusual call sequences:
 * every pointer runnel hands out (rn_get rows, cursor rows, subscription
 * rows, rn_errmsg) given straight back to the write calls; calls made from
 * inside subscribers, rollback notices and durability hooks; cursors kept
 * across the end of their group and of their pipeline; flushes, carried
 * groups, failing commits and unsubscribing; maps that are not what a
 * change must be. Each call works as runnel.h says or is refused with the
 * documented code and a message naming the relation (and the column); the
 * pipeline keeps working; nothing rolled back is ever seen and nothing
 * committed is lost (checked against a model and after a reopen). Uses
 * runnel.h only; run under ASan and valgrind by make asan / make valgrind.
 * Regressions it guards (each failed before its fix): rn_undeclared's
 * callback dropping what it is told of (a double free with nosync, an
 * early end after a read); rn_inspect / rn_state_copy of the state this
 * process writes (LMDB's locks dropped, its reader table reset); rn_get of
 * a derived relation keyed by the last rn_get's row while a durability
 * hook reads; a message left by a success that ran refused callbacks. */
#include <msgpack.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "cursor_fixture.h"
#include "runnel.h"

static const rn_column_def cols[] = { { .name = "id", .type = "int" },
                                      { .name = "name", .type = "string" },
                                      { .name = "note", .type = "string", .nullable = 1 },
                                      { .name = "n", .type = "int", .nullable = 1 } };
static const char *const key[] = { "id" };

/* ---- msgpack helpers ---- */

typedef struct mp {
  msgpack_sbuffer sb;
  msgpack_packer pk;
} mp;

static void mp_reset(mp *m)
{
  msgpack_sbuffer_clear(&m->sb);
  msgpack_packer_init(&m->pk, &m->sb, msgpack_sbuffer_write);
}

static void mp_init(mp *m)
{
  msgpack_sbuffer_init(&m->sb);
  mp_reset(m);
}

static void mp_str(mp *m, const char *s) { msgpack_pack_str_with_body(&m->pk, s, strlen(s)); }

/* { id, name, note (nil when NULL), n } */
static const mp *row_of(mp *m, int64_t id, const char *name, const char *note, int64_t n)
{
  mp_reset(m);
  msgpack_pack_map(&m->pk, 4);
  mp_str(m, "id");
  msgpack_pack_int64(&m->pk, id);
  mp_str(m, "name");
  mp_str(m, name);
  mp_str(m, "note");
  if (note) mp_str(m, note);
  else msgpack_pack_nil(&m->pk);
  mp_str(m, "n");
  msgpack_pack_int64(&m->pk, n);
  return m;
}

static const mp *key_of(mp *m, int64_t id)
{
  mp_reset(m);
  msgpack_pack_map(&m->pk, 1);
  mp_str(m, "id");
  msgpack_pack_int64(&m->pk, id);
  return m;
}

/* Column col of the map (a string or an int) into out as text; "" when absent. */
static void field(const void *map, size_t len, const char *col, char *out, size_t outlen)
{
  msgpack_unpacked u;
  msgpack_unpacked_init(&u);
  out[0] = '\0';
  if (msgpack_unpack_next(&u, map, len, NULL) == MSGPACK_UNPACK_SUCCESS && u.data.type == MSGPACK_OBJECT_MAP) {
    for (uint32_t i = 0; i < u.data.via.map.size; i++) {
      const msgpack_object *k = &u.data.via.map.ptr[i].key, *v = &u.data.via.map.ptr[i].val;
      if (k->type != MSGPACK_OBJECT_STR || k->via.str.size != strlen(col) || memcmp(k->via.str.ptr, col, k->via.str.size))
        continue;
      if (v->type == MSGPACK_OBJECT_STR) snprintf(out, outlen, "%.*s", (int)v->via.str.size, v->via.str.ptr);
      else if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) snprintf(out, outlen, "%llu", (unsigned long long)v->via.u64);
      else if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) snprintf(out, outlen, "%lld", (long long)v->via.i64);
      else if (v->type == MSGPACK_OBJECT_NIL) snprintf(out, outlen, "nil");
    }
  }
  msgpack_unpacked_destroy(&u);
}

/* ---- a pipeline with tables a and b (keyed), k (keyless) and a top of a ---- */

typedef struct fx {
  char dir[64];
  rn_open_opts opts;
  rn_pipeline *p;
  rn_rel *a, *b, *k, *best;
  mp m, key;
} fx;

static void fx_declare(fx *f)
{
  CHECK(rn_pipeline_open(&f->opts, &f->p, NULL, 0) == 0);
  CHECK(rn_declare_table(f->p, "a", cols, 4, key, 1, &f->a) == 0);
  CHECK(rn_declare_table(f->p, "b", cols, 4, key, 1, &f->b) == 0);
  CHECK(rn_declare_table(f->p, "k", cols, 4, NULL, 0, &f->k) == 0);
  static const rn_order_def order[] = { { "n", 1 } };
  rn_top_def def = { .n = 3, .order = order, .norder = 1 };
  CHECK(rn_top_declare(f->p, "best", f->a, &def, &f->best) == 0);
}

static void fx_open(fx *f, int nosync, int write_back)
{
  memset(f, 0, sizeof *f);
  snprintf(f->dir, sizeof f->dir, "/tmp/runnel-capiseq-XXXXXX");
  CHECK(mkdtemp(f->dir) != NULL);
  f->opts = (rn_open_opts){ .path = f->dir, .nosync = nosync, .write_back = write_back ? 1 : -1 };
  mp_init(&f->m);
  mp_init(&f->key);
  fx_declare(f);
}

static void fx_reopen(fx *f)
{
  CHECK(rn_pipeline_close(f->p) == 0);
  fx_declare(f);
}

static void fx_close(fx *f)
{
  CHECK(rn_pipeline_close(f->p) == 0);
  msgpack_sbuffer_destroy(&f->m.sb);
  msgpack_sbuffer_destroy(&f->key.sb);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
  CHECK(system(cmd) == 0);
}

/* A change of row { id, name, nil, n }, packed into buf (callbacks have buffers of their own:
 * the call that runs them may still read the caller's). */
static int put_in(fx *f, mp *buf, rn_rel *r, rn_op op, int64_t id, const char *name, int64_t n)
{
  const mp *m = row_of(buf, id, name, NULL, n);
  return rn_push(f->p, r, op, m->sb.data, m->sb.size);
}

static int put(fx *f, rn_rel *r, rn_op op, int64_t id, const char *name, int64_t n)
{
  return put_in(f, &f->m, r, op, id, name, n);
}

/* r's row under id (key packed into buf): its name column into name (NULL: not wanted); 1
 * found, 0 absent, -1 an error. */
static int get_name_in(fx *f, mp *buf, rn_rel *r, int64_t id, char *name, size_t len)
{
  const mp *k = key_of(buf, id);
  const void *row;
  size_t rlen;
  if (rn_get(f->p, r, k->sb.data, k->sb.size, &row, &rlen, NULL) != 0) return -1;
  if (row && name) field(row, rlen, "name", name, len);
  return row != NULL;
}

static int get_name(fx *f, rn_rel *r, int64_t id, char *name, size_t len)
{
  return get_name_in(f, &f->key, r, id, name, len);
}

/* ---- handed-out rows given straight back ---- */

/* A row rn_get handed out, given straight to every write call, on the same
 * table and another, in and out of groups; it is stored exactly. */
static void test_got_rows_given_back(void)
{
  static const int modes[][2] = { { 0, 0 }, { 1, 0 }, { 0, 1 }, { 1, 1 } };
  for (size_t mode = 0; mode < sizeof modes / sizeof *modes; mode++) {
    fx f;
    fx_open(&f, modes[mode][0], modes[mode][1]);
    char big[3000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK(put(&f, f.a, RN_OP_INSERT, 1, "one", 10) == 0);
    CHECK(put(&f, f.a, RN_OP_INSERT, 2, big, 20) == 0);
    for (int grouped = 0; grouped < 2; grouped++) {
      for (int64_t id = 1; id <= 2; id++) {
        const mp *k = key_of(&f.key, id);
        const void *row;
        size_t len;
        uint64_t rid;
        if (grouped) CHECK(rn_begin(f.p) == 0);
        CHECK(rn_get(f.p, f.a, k->sb.data, k->sb.size, &row, &len, &rid) == 0 && row && rid == (uint64_t)id);
        CHECK(rn_upsert(f.p, f.b, row, len) == 0);      /* another table */
        CHECK(rn_get(f.p, f.a, k->sb.data, k->sb.size, &row, &len, NULL) == 0 && row);
        CHECK(rn_upsert(f.p, f.a, row, len) == 0);      /* itself: no change */
        CHECK(rn_get(f.p, f.a, k->sb.data, k->sb.size, &row, &len, NULL) == 0 && row);
        CHECK(rn_update(f.p, f.a, row, len) == 0);      /* a patch of every column */
        CHECK(rn_get(f.p, f.a, k->sb.data, k->sb.size, &row, &len, NULL) == 0 && row);
        CHECK(rn_insert(f.p, f.k, row, len) == 0);      /* a keyless table */
        CHECK(rn_get(f.p, f.k, row, len, &row, &len, NULL) == 0 && row); /* the row as its own key */
        CHECK(rn_delete(f.p, f.k, row, len) == 0);
        CHECK(rn_get(f.p, f.b, k->sb.data, k->sb.size, &row, &len, NULL) == 0 && row);
        CHECK(rn_insert(f.p, f.b, row, len) == RN_EEXIST); /* refused: inside a group, rolled back */
        CHECK(strstr(rn_errmsg(f.p), "b: insert: a row with key (id = ") != NULL);
        if (grouped) CHECK(rn_commit(f.p) == RN_EMISUSE);
        if (grouped) CHECK(rn_begin(f.p) == 0);
        CHECK(rn_get(f.p, f.b, k->sb.data, k->sb.size, &row, &len, NULL) == 0 && (row != NULL) == !grouped);
        if (row) CHECK(rn_delete(f.p, f.b, row, len) == 0); /* the whole row as a key */
        if (grouped) CHECK(rn_commit(f.p) == 0);
        char name[sizeof big];
        CHECK(get_name(&f, f.a, id, name, sizeof name) == 1 && strcmp(name, id == 1 ? "one" : big) == 0);
        CHECK(get_name(&f, f.b, id, NULL, 0) == 0);
      }
    }
    CHECK(count_rows(f.p, f.k) == 0 && count_rows(f.p, f.a) == 2);
    /* A row of the top, given to a table. */
    const mp *k = key_of(&f.key, 2);
    const void *row;
    size_t len;
    CHECK(rn_get(f.p, f.best, k->sb.data, k->sb.size, &row, &len, NULL) == 0 && row);
    CHECK(rn_insert(f.p, f.b, row, len) == RN_EINVAL); /* it has a rank column */
    CHECK(strncmp(rn_errmsg(f.p), "b: unknown column \"rank\"", 24) == 0);
    CHECK(count_rows(f.p, f.b) == 0);
    fx_close(&f);
  }
}

/* Cursor rows given to the writes while the cursor goes on: outside a
 * group the cursor reads the state it was opened on; inside one it reads
 * the group's writes (an upsert of its own row changes no key). */
static void test_cursor_rows_given_back(void)
{
  for (int mode = 0; mode < 4; mode++) {
    fx f;
    fx_open(&f, mode & 1, mode & 2);
    for (int64_t id = 1; id <= 40; id++) CHECK(put(&f, f.a, RN_OP_INSERT, id, "r", id) == 0);
    for (int grouped = 0; grouped < 2; grouped++) {
      if (grouped) CHECK(rn_begin(f.p) == 0);
      rn_cursor *c1, *c2;
      CHECK(rn_cursor_open(f.p, f.a, &c1) == 0 && rn_cursor_open(f.p, f.a, &c2) == 0);
      const void *row, *row2;
      size_t len, len2;
      uint64_t id, id2;
      int done = 0, done2 = 0, seen = 0;
      while (rn_cursor_next(c1, &row, &len, &id, &done) == 0 && !done && seen < 100) {
        seen++;
        CHECK(rn_upsert(f.p, f.b, row, len) == 0);
        CHECK(rn_upsert(f.p, f.a, row, len) == 0);
        CHECK(rn_update(f.p, f.a, row, len) == 0);
        CHECK(rn_insert(f.p, f.k, row, len) == 0);
        if (id % 3 == 0) CHECK(rn_delete(f.p, f.k, row, len) == 0);
        if (!done2) CHECK(rn_cursor_next(c2, &row2, &len2, &id2, &done2) == 0); /* interleaved */
        if (!done2) CHECK(id2 == id && len2 == len && memcmp(row, row2, len) == 0);
      }
      CHECK(done && seen == 40);
      rn_cursor_close(c1);
      rn_cursor_close(c2);
      if (grouped) CHECK(rn_commit(f.p) == 0);
    }
    CHECK(count_rows(f.p, f.a) == 40 && count_rows(f.p, f.b) == 40 && count_rows(f.p, f.k) == 2 * (40 - 13));
    fx_reopen(&f);
    CHECK(count_rows(f.p, f.a) == 40 && count_rows(f.p, f.b) == 40 && count_rows(f.p, f.k) == 2 * (40 - 13));
    fx_close(&f);
  }
}

/* ---- calls from inside callbacks ---- */

typedef struct probe {
  fx *f;
  int calls;
  int codes[16];
  char got[64];           /* the name rn_get read */
  int rows;               /* rows a cursor opened inside read */
  rn_cursor *kept;        /* a cursor opened inside, kept past the callback */
  int fail_every;         /* fail every Nth call (0: never) */
} probe;

static int noop(void *ctx, const rn_event *ev) { (void)ctx; (void)ev; return 0; }

/* Every call a host might make from inside a callback; codes[i] what it returned. */
static void call_everything(probe *pr, const void *row, size_t len)
{
  fx *f = pr->f;
  rn_pipeline *p = f->p;
  rn_rel *late;
  mp own;
  mp_init(&own);
  int i = 0;
  pr->codes[i++] = row ? rn_insert(p, f->b, row, len) : put_in(f, &own, f->b, RN_OP_INSERT, 900, "x", 0);
  pr->codes[i++] = row ? rn_upsert(p, f->a, row, len) : put_in(f, &own, f->a, RN_OP_UPSERT, 901, "x", 0);
  pr->codes[i++] = rn_begin(p);
  pr->codes[i++] = rn_commit(p);
  pr->codes[i++] = rn_rollback(p);
  pr->codes[i++] = rn_flush(p);
  pr->codes[i++] = rn_subscribe(p, f->a, noop, NULL);
  pr->codes[i++] = rn_unsubscribe(p, f->a, noop, NULL);
  pr->codes[i++] = rn_pipeline_close(p);
  pr->codes[i++] = rn_deliver(p);
  pr->codes[i++] = rn_declare_table(p, "late", cols, 4, key, 1, &late);
  pr->codes[i++] = rn_drop(p, "nothing");
  pr->codes[i++] = get_name_in(f, &own, f->a, 1, pr->got, sizeof pr->got) < 0 ? -1 : 0;
  msgpack_sbuffer_destroy(&own.sb);
  pr->rows = count_rows(p, f->a);
  if (!pr->kept) pr->codes[13] = rn_cursor_open(p, f->a, &pr->kept);
  pr->codes[14] = rn_begin(p); /* refused last: its message is not the outer call's */
}

static void check_refusals(const probe *pr)
{
  for (int i = 0; i < 12; i++)
    if (pr->codes[i] != RN_EMISUSE) {
      fprintf(stderr, "  call #%d from a callback returned %d\n", i, pr->codes[i]);
      CHECK(pr->codes[i] == RN_EMISUSE);
    }
  CHECK(pr->codes[12] == 0 && pr->codes[13] == 0); /* reads work */
  CHECK(pr->codes[14] == RN_EMISUSE);
}

static int sub_calls(void *ctx, const rn_event *ev)
{
  probe *pr = ctx;
  pr->calls++;
  call_everything(pr, ev->row, ev->row_len);
  return pr->fail_every && pr->calls % pr->fail_every == 0;
}

static void durable_calls(void *ctx, uint64_t seq)
{
  (void)seq;
  probe *pr = ctx;
  pr->calls++;
  call_everything(pr, NULL, 0);
}

/* The cursor a callback kept: refused once its callback's group ended
 * (RN_EMISUSE, naming the relation), then closed. */
static void kept_cursor_ended(fx *f, probe *pr)
{
  const void *row;
  size_t len;
  uint64_t id;
  int done;
  CHECK(pr->kept != NULL);
  CHECK(rn_cursor_next(pr->kept, &row, &len, &id, &done) == RN_EMISUSE && row == NULL);
  CHECK(strstr(rn_errmsg(f->p), "a: rn_cursor_next: the group this cursor was opened in has ended") != NULL);
  rn_cursor_close(pr->kept);
  pr->kept = NULL;
}

static void test_calls_from_a_subscriber(void)
{
  for (int mode = 0; mode < 4; mode++) {
    fx f;
    fx_open(&f, mode & 1, mode & 2);
    probe pr = { .f = &f };
    CHECK(put(&f, f.a, RN_OP_INSERT, 1, "one", 1) == 0);
    CHECK(rn_subscribe(f.p, f.a, sub_calls, &pr) == 0);
    CHECK(rn_begin(f.p) == 0);
    CHECK(put(&f, f.a, RN_OP_UPDATE, 1, "uno", 1) == 0);
    CHECK(put(&f, f.a, RN_OP_INSERT, 2, "two", 2) == 0);
    CHECK(rn_commit(f.p) == 0 && rn_errmsg(f.p)[0] == '\0');
    CHECK(pr.calls == 2);
    check_refusals(&pr);
    CHECK(strcmp(pr.got, "uno") == 0 && pr.rows == 2); /* the group's own changes */
    if (mode & 1) CHECK(rn_flush(f.p) == 0); /* the transaction the kept cursor read committed */
    kept_cursor_ended(&f, &pr);
    CHECK(get_name(&f, f.b, 900, NULL, 0) == 0 && get_name(&f, f.a, 901, NULL, 0) == 0);
    CHECK(rn_unsubscribe(f.p, f.a, sub_calls, &pr) == 0);
    CHECK(put(&f, f.a, RN_OP_INSERT, 3, "three", 3) == 0 && pr.calls == 2);
    fx_reopen(&f);
    CHECK(count_rows(f.p, f.a) == 3 && count_rows(f.p, f.b) == 0);
    fx_close(&f);
  }
}

/* ---- a rollback notice's calls ---- */

typedef struct notice {
  probe pr;
  uint64_t seq;           /* the group rolled back */
  int notices;
  int found_rolled_back;  /* rn_get found the rolled-back group's row */
} notice;

static void on_rollback_calls(void *ctx, uint64_t seq)
{
  notice *n = ctx;
  n->notices++;
  n->seq = seq;
  call_everything(&n->pr, NULL, 0);
  mp own;
  mp_init(&own);
  n->found_rolled_back += get_name_in(n->pr.f, &own, n->pr.f->a, 77, NULL, 0) != 0;
  msgpack_sbuffer_destroy(&own.sb);
}

static int watch(void *ctx, const rn_event *ev) { (void)ctx; (void)ev; return 0; }
static int refuse_77(void *ctx, const rn_event *ev)
{
  (void)ctx;
  char id[32];
  field(ev->row ? ev->row : ev->old, ev->row ? ev->row_len : ev->old_len, "id", id, sizeof id);
  return strcmp(id, "77") == 0;
}

static void test_calls_from_a_rollback_notice(void)
{
  for (int mode = 0; mode < 4; mode++) {
    fx f;
    fx_open(&f, mode & 1, mode & 2);
    notice n = { .pr = { .f = &f } };
    CHECK(rn_subscribe_rollback(f.p, f.a, watch, on_rollback_calls, &n) == 0);
    CHECK(rn_subscribe(f.p, f.a, refuse_77, NULL) == 0);
    CHECK(put(&f, f.a, RN_OP_INSERT, 1, "one", 1) == 0);   /* carried, with nosync */
    uint64_t seq = rn_seq(f.p);
    CHECK(rn_begin(f.p) == 0);
    CHECK(put(&f, f.a, RN_OP_UPDATE, 1, "changed", 1) == 0);
    CHECK(put(&f, f.a, RN_OP_INSERT, 77, "refused", 77) == 0);
    CHECK(rn_commit(f.p) == RN_ECALLBACK);
    CHECK(strcmp(rn_errmsg(f.p), "a: subscriber returned 1") == 0); /* not what the notice's calls left */
    CHECK(n.notices == 1 && n.seq == seq + 1 && rn_seq(f.p) == seq);
    check_refusals(&n.pr);
    CHECK(strcmp(n.pr.got, "one") == 0 && n.pr.rows == 1 && n.found_rolled_back == 0);
    kept_cursor_ended(&f, &n.pr);
    /* the pipeline goes on: the next group commits, the carried one stayed */
    CHECK(put(&f, f.a, RN_OP_INSERT, 2, "two", 2) == 0 && rn_seq(f.p) == seq + 1);
    CHECK(rn_flush(f.p) == 0);
    fx_reopen(&f);
    char name[16];
    CHECK(get_name(&f, f.a, 1, name, sizeof name) == 1 && strcmp(name, "one") == 0);
    CHECK(get_name(&f, f.a, 77, NULL, 0) == 0 && count_rows(f.p, f.a) == 2 && rn_seq(f.p) == seq + 1);
    fx_close(&f);
  }
}

/* ---- durability hooks' calls ---- */

static void test_calls_from_a_durability_hook(void)
{
  for (int mode = 0; mode < 4; mode++) {
    fx f;
    fx_open(&f, mode & 1, mode & 2);
    probe pr = { .f = &f };
    CHECK(put(&f, f.a, RN_OP_INSERT, 1, "one", 1) == 0);
    CHECK(rn_flush(f.p) == 0);
    CHECK(rn_on_durable(f.p, durable_calls, &pr) == 0);
    CHECK(put(&f, f.a, RN_OP_INSERT, 2, "two", 2) == 0 && rn_errmsg(f.p)[0] == '\0');
    /* with nosync the hook runs in the call that commits the carried group: each says it succeeded */
    rn_cursor *c = NULL;
    if (mode == 1) CHECK(rn_cursor_open(f.p, f.a, &c) == 0 && rn_errmsg(f.p)[0] == '\0');
    if (mode == 3) CHECK(get_name(&f, f.best, 2, NULL, 0) == 1 && rn_errmsg(f.p)[0] == '\0');
    rn_cursor_close(c);
    CHECK(rn_flush(f.p) == 0 && rn_errmsg(f.p)[0] == '\0');
    CHECK(pr.calls == 1);
    check_refusals(&pr);
    CHECK(strcmp(pr.got, "one") == 0 && pr.rows == 2);
    kept_cursor_ended(&f, &pr);
    /* at close: the hook runs inside it (nosync: the carried group), its cursor outlives the pipeline */
    CHECK(put(&f, f.a, RN_OP_INSERT, 3, "three", 3) == 0);
    int calls = pr.calls;
    CHECK(rn_pipeline_close(f.p) == 0);
    CHECK(pr.calls == calls + (mode & 1));
    if (pr.kept) {
      const void *row;
      size_t len;
      uint64_t id;
      int done;
      CHECK(rn_cursor_next(pr.kept, &row, &len, &id, &done) == RN_EMISUSE);
      rn_cursor_close(pr.kept);
    }
    fx_declare(&f);
    CHECK(count_rows(f.p, f.a) == 3 && count_rows(f.p, f.b) == 0);
    fx_close(&f);
  }
}

/* A durable subscriber's row given to rn_get as a key, and its calls. */
static int durable_sub(void *ctx, const rn_event *ev)
{
  probe *pr = ctx;
  pr->calls++;
  const void *row;
  size_t len;
  if (rn_get(pr->f->p, pr->f->a, ev->row, ev->row_len, &row, &len, NULL) != 0 || !row) return 1;
  call_everything(pr, ev->row, ev->row_len);
  return 0;
}

static void test_calls_from_a_durable_subscriber(void)
{
  for (int mode = 0; mode < 2; mode++) {
    fx f;
    fx_open(&f, mode & 1, 0);
    probe pr = { .f = &f };
    CHECK(rn_subscribe_durable(f.p, f.a, "d", durable_sub, &pr) == 0);
    CHECK(put(&f, f.a, RN_OP_INSERT, 1, "one", 1) == 0);
    CHECK(rn_errmsg(f.p)[0] == '\0');
    CHECK(rn_flush(f.p) == 0 && rn_errmsg(f.p)[0] == '\0');
    CHECK(rn_deliver(f.p) == 0 && rn_errmsg(f.p)[0] == '\0');
    CHECK(pr.calls == 1);
    check_refusals(&pr);
    CHECK(strcmp(pr.got, "one") == 0 && pr.rows == 1);
    CHECK(rn_unsubscribe(f.p, f.a, durable_sub, &pr) == 0); /* a durable subscriber goes too */
    CHECK(rn_unsubscribe(f.p, f.a, durable_sub, &pr) == RN_ENOTFOUND);
    if (pr.kept) rn_cursor_close(pr.kept); /* its end is not documented for delivery: closing must work */
    pr.kept = NULL;
    fx_reopen(&f);
    CHECK(count_rows(f.p, f.a) == 1 && count_rows(f.p, f.b) == 0);
    fx_close(&f);
  }
}

/* ---- cursors and groups ---- */

static void test_cursors_across_group_ends(void)
{
  for (int mode = 0; mode < 4; mode++) {
    fx f;
    fx_open(&f, mode & 1, mode & 2);
    for (int64_t id = 1; id <= 5; id++) CHECK(put(&f, f.a, RN_OP_INSERT, id, "r", id) == 0);
    const void *row;
    size_t len;
    uint64_t id;
    int done;
    /* opened in a group: a flush inside it is a no-op, the cursor goes on; the commit ends it */
    rn_cursor *t, *d;
    CHECK(rn_begin(f.p) == 0);
    CHECK(put(&f, f.a, RN_OP_INSERT, 6, "six", 60) == 0);
    CHECK(rn_cursor_open(f.p, f.a, &t) == 0 && rn_cursor_open(f.p, f.best, &d) == 0);
    CHECK(rn_cursor_next(t, &row, &len, &id, &done) == 0 && !done);
    CHECK(rn_cursor_next(d, &row, &len, &id, &done) == 0 && !done && id == 6); /* the group's row leads */
    CHECK(rn_flush(f.p) == 0);
    CHECK(rn_cursor_next(t, &row, &len, &id, &done) == 0 && !done);
    CHECK(rn_commit(f.p) == 0);
    CHECK(rn_cursor_next(t, &row, &len, &id, &done) == RN_EMISUSE);
    CHECK(rn_cursor_next(d, &row, &len, &id, &done) == RN_EMISUSE);
    CHECK(strstr(rn_errmsg(f.p), "best: rn_cursor_next: the group this cursor was opened in has ended"));
    CHECK(put(&f, f.a, RN_OP_INSERT, 7, "seven", 7) == 0); /* a later group does not revive it */
    CHECK(rn_begin(f.p) == 0);
    CHECK(rn_cursor_next(t, &row, &len, &id, &done) == RN_EMISUSE);
    CHECK(rn_rollback(f.p) == 0);
    rn_cursor_close(t);
    rn_cursor_close(d);
    /* opened in a group that rolls back */
    CHECK(rn_begin(f.p) == 0);
    CHECK(put(&f, f.a, RN_OP_INSERT, 8, "eight", 8) == 0);
    CHECK(rn_cursor_open(f.p, f.a, &t) == 0);
    CHECK(rn_rollback(f.p) == 0);
    CHECK(rn_cursor_next(t, &row, &len, &id, &done) == RN_EMISUSE);
    rn_cursor_close(t);
    /* opened in a group that a bad change rolls back */
    CHECK(rn_begin(f.p) == 0);
    CHECK(rn_cursor_open(f.p, f.a, &t) == 0);
    CHECK(put(&f, f.a, RN_OP_INSERT, 1, "dup", 1) == RN_EEXIST);
    CHECK(rn_cursor_next(t, &row, &len, &id, &done) == RN_EMISUSE);
    rn_cursor_close(t);
    /* opened outside: reads the state it was opened on while groups commit, roll back and flush */
    CHECK(rn_cursor_open(f.p, f.a, &t) == 0 && rn_cursor_open(f.p, f.best, &d) == 0);
    int n = 0, nd = 0;
    for (int64_t k = 100; k < 110; k++) {
      CHECK(put(&f, f.a, RN_OP_INSERT, k, "later", k) == 0);
      CHECK(rn_begin(f.p) == 0 && put(&f, f.a, RN_OP_INSERT, k + 100, "gone", k) == 0 && rn_rollback(f.p) == 0);
      CHECK(rn_flush(f.p) == 0);
      if (rn_cursor_next(t, &row, &len, &id, &done) == 0 && !done) n++;
      if (rn_cursor_next(d, &row, &len, &id, &done) == 0 && !done) nd++;
    }
    CHECK(n == 7 && nd == 3);
    /* closed after the pipeline: refused without a message, then freed */
    CHECK(put(&f, f.a, RN_OP_INSERT, 400, "carried", 400) == 0);
    CHECK(rn_begin(f.p) == 0);
    CHECK(put(&f, f.a, RN_OP_INSERT, 500, "open at close", 500) == 0);
    rn_cursor *g;
    CHECK(rn_cursor_open(f.p, f.a, &g) == 0);
    CHECK(rn_pipeline_close(f.p) == 0); /* rolls the open group back, keeps the carried one */
    CHECK(rn_cursor_next(t, &row, &len, &id, &done) == RN_EMISUSE);
    CHECK(rn_cursor_next(g, &row, &len, &id, &done) == RN_EMISUSE);
    CHECK(rn_cursor_next(d, &row, &len, &id, &done) == RN_EMISUSE);
    rn_cursor_close(g);
    rn_cursor_close(d);
    rn_cursor_close(t);
    fx_declare(&f);
    CHECK(count_rows(f.p, f.a) == 18 && count_rows(f.p, f.best) == 3);
    CHECK(get_name(&f, f.a, 400, NULL, 0) == 1 && get_name(&f, f.a, 500, NULL, 0) == 0);
    fx_close(&f);
  }
}

/* ---- groups: flush, begin twice, failed commits, a subscriber failing every Nth group ---- */

typedef struct model {
  int present[16];        /* the committed rows' ids */
} model;

static void test_failing_groups_against_a_model(void)
{
  for (int mode = 0; mode < 4; mode++) {
    fx f;
    fx_open(&f, mode & 1, mode & 2);
    probe pr = { .f = &f, .fail_every = 3 };
    CHECK(rn_subscribe(f.p, f.a, sub_calls, &pr) == 0);
    model m = { { 0 } };
    uint64_t seq = rn_seq(f.p);
    for (int g = 0; g < 60; g++) {
      int calls = pr.calls;
      int64_t id = g % 16;
      bool was = m.present[id];
      CHECK(rn_begin(f.p) == 0);
      CHECK(rn_begin(f.p) == RN_EMISUSE); /* stays open */
      CHECK(put(&f, f.a, was ? RN_OP_DELETE : RN_OP_INSERT, id, "x", g) == 0);
      CHECK(rn_flush(f.p) == 0);            /* a no-op inside a group */
      int rc = rn_commit(f.p);
      bool failed = pr.calls % 3 == 0 && pr.calls != calls;
      CHECK(rc == (failed ? RN_ECALLBACK : 0));
      if (!failed) m.present[id] = !was, seq++;
      CHECK(rn_seq(f.p) == seq);
      CHECK(rn_commit(f.p) == RN_EMISUSE);  /* nothing is open after either */
      CHECK(get_name(&f, f.a, id, NULL, 0) == m.present[id]);
      if (pr.kept) { rn_cursor_close(pr.kept); pr.kept = NULL; }
      if (g % 7 == 0) CHECK(rn_flush(f.p) == 0);
    }
    int want = 0;
    for (int i = 0; i < 16; i++) want += m.present[i];
    CHECK(count_rows(f.p, f.a) == want);
    fx_reopen(&f);
    CHECK(rn_seq(f.p) == seq && count_rows(f.p, f.a) == want);
    for (int i = 0; i < 16; i++) CHECK(get_name(&f, f.a, i, NULL, 0) == m.present[i]);
    fx_close(&f);
  }
}

/* ---- maps that are not a change ---- */

typedef struct bad {
  const char *what;
  const char *bytes;
  size_t len;
  const char *msg;        /* the message's start */
  int ops;                /* the ops it is bad for (1 << op); the others read only the key */
} bad;

#define ALL ((1 << RN_OP_INSERT) | (1 << RN_OP_UPDATE) | (1 << RN_OP_UPSERT) | (1 << RN_OP_DELETE))
#define WRITES ((1 << RN_OP_INSERT) | (1 << RN_OP_UPDATE) | (1 << RN_OP_UPSERT))
#define ROWS ((1 << RN_OP_INSERT) | (1 << RN_OP_UPSERT))
#define BAD(what, lit, msg, ops) { what, lit, sizeof lit - 1, msg, ops }

static void test_bad_maps(void)
{
  static char huge[1 << 20];
  static const bad cases[] = {
    BAD("an array", "\x92\x01\x02", "a: a change is a msgpack map keyed by column names, got ", ALL),
    BAD("an int", "\x07", "a: a change is a msgpack map keyed by column names, got ", ALL),
    BAD("nil", "\xc0", "a: a change is a msgpack map keyed by column names, got ", ALL),
    BAD("a duplicate key", "\x83\xa2id\x02\xa4name\xa1x\xa2id\x06", "a: duplicate column \"id\"", ALL),
    BAD("a duplicate in a map16", "\xde\x00\x03\xa2id\x02\xa4name\xa1x\xa4name\xa1y", "a: duplicate column \"name\"", ALL),
    BAD("an unknown column", "\x82\xa2id\x02\xa4nmae\xa1x", "a: unknown column \"nmae\"", ALL),
    BAD("a key that is no string", "\x82\xa2id\x02\x01\xa1x", "a: column names are strings", ALL),
    BAD("a string for an int key", "\x82\xa2id\xa1x\xa4name\xa1x", "a: column \"id\"", ALL),
    BAD("a map in a string column", "\x82\xa2id\x02\xa4name\x81\xa1x\x01", "a: column \"name\"", WRITES),
    BAD("an array in an int column", "\x83\xa2id\x02\xa4name\xa1x\xa1n\x91\x01", "a: column \"n\"", WRITES),
    BAD("a float in an int column", "\x83\xa2id\x02\xa4name\xa1x\xa1n\xcb\x3f\xf8\0\0\0\0\0\0", "a: column \"n\"", WRITES),
    BAD("a null key", "\x82\xa2id\xc0\xa4name\xa1x", "a: column \"id\"", ALL),
    BAD("a null in a column that is not nullable", "\x82\xa2id\x02\xa4name\xc0", "a: column \"name\"", WRITES),
    BAD("a missing column", "\x81\xa2id\x02", "a: column \"name\"", ROWS),
    BAD("truncated", "\x82\xa2id\x02\xa4name\xa1", "a: the change is not valid msgpack", ALL),
    BAD("a map that claims more", "\x83\xa2id\x02\xa4name\xa1x", "a: the change is not valid msgpack", ALL),
    BAD("trailing bytes", "\x82\xa2id\x02\xa4name\xa1x\x00", "a: the change is not valid msgpack", ALL),
    BAD("a str32 of 4 GB", "\x82\xa2id\x02\xa4name\xdb\xff\xff\xff\xff", "a: the change is not valid msgpack", ALL),
    BAD("a nested map claiming 4 G pairs", "\x82\xa2id\x02\xa4name\xdf\xff\xff\xff\xff", "a: the change is not valid msgpack", ALL),
  };
  fx f;
  fx_open(&f, 1, 0);
  CHECK(put(&f, f.a, RN_OP_INSERT, 1, "kept", 1) == 0);
  char *none = malloc(1); /* a change of 0 bytes at the end of an allocation: nothing is read */
  for (size_t i = 0; i <= sizeof cases / sizeof *cases; i++) {
    const bad empty = { "empty", none + 1, 0, "a: the change is not valid msgpack", ALL };
    const bad *c = i < sizeof cases / sizeof *cases ? &cases[i] : &empty;
    for (int op = RN_OP_INSERT; op <= RN_OP_DELETE; op++) {
      if (!(c->ops & (1 << op))) continue;
      CHECK(rn_begin(f.p) == 0);
      CHECK(put(&f, f.a, RN_OP_UPSERT, 2, "in the group", 2) == 0);
      int rc = rn_push(f.p, f.a, (rn_op)op, c->bytes, c->len);
      bool named = strncmp(rn_errmsg(f.p), c->msg, strlen(c->msg)) == 0;
      if (rc != RN_EINVAL || !named)
        fprintf(stderr, "  %s (op %d): %d \"%s\"\n", c->what, op, rc, rn_errmsg(f.p));
      CHECK(rc == RN_EINVAL && named);
      CHECK(rn_commit(f.p) == RN_EMISUSE);  /* the group was rolled back */
      CHECK(get_name(&f, f.a, 2, NULL, 0) == 0);
    }
  }
  free(none);
  /* a huge string is stored whole; the group around it too */
  memset(huge, 'h', sizeof huge - 1);
  CHECK(rn_begin(f.p) == 0);
  CHECK(put(&f, f.a, RN_OP_INSERT, 3, huge, 3) == 0);
  CHECK(put(&f, f.a, RN_OP_UPSERT, 4, huge + 1000, 4) == 0);
  CHECK(rn_commit(f.p) == 0);
  fx_reopen(&f);
  static char name[sizeof huge];
  CHECK(get_name(&f, f.a, 3, name, sizeof name) == 1 && strcmp(name, huge) == 0);
  CHECK(get_name(&f, f.a, 4, name, sizeof name) == 1 && strlen(name) == sizeof huge - 1001);
  CHECK(get_name(&f, f.a, 1, name, sizeof name) == 1 && strcmp(name, "kept") == 0);
  CHECK(count_rows(f.p, f.a) == 3);
  fx_close(&f);
}

/* ---- rn_errmsg, relation names given back ---- */

static void test_messages_given_back(void)
{
  fx f;
  fx_open(&f, 0, 0);
  CHECK(put(&f, f.a, RN_OP_INSERT, 1, "one", 1) == 0);
  CHECK(put(&f, f.a, RN_OP_INSERT, 1, "one", 1) == RN_EEXIST);
  const char *msg = rn_errmsg(f.p);
  CHECK(rn_insert(f.p, f.b, msg, strlen(msg)) == RN_EINVAL); /* text is no map */
  CHECK(strncmp(rn_errmsg(f.p), "b: ", 3) == 0);
  CHECK(rn_relation(f.p, rn_errmsg(f.p)) == NULL);
  rn_rel *r = NULL;
  CHECK(rn_declare_table(f.p, rn_errmsg(f.p), cols, 4, key, 1, &r) != 0 && r == NULL);
  CHECK(rn_drop(f.p, rn_errmsg(f.p)) != 0);
  CHECK(rn_drop(f.p, rn_relation_name(f.a)) == RN_EMISUSE && strstr(rn_errmsg(f.p), "drop \"a\": "));
  CHECK(rn_subscribe_durable(f.p, f.a, rn_relation_name(f.b), noop, NULL) == 0);
  CHECK(put(&f, f.a, RN_OP_INSERT, 2, "two", 2) == 0);
  CHECK(count_rows(f.p, f.a) == 2);
  fx_close(&f);
}

/* ---- rn_inspect of the state this process has open ---- */

typedef struct inspected {
  fx *f;
  int relations, found, refused;
} inspected;

/* Each relation's strings given back: its name finds it, its columns are no change. */
static int on_relation(void *ctx, const rn_inspect_relation *r)
{
  inspected *in = ctx;
  in->relations++;
  in->found += rn_relation(in->f->p, r->name) != NULL;
  in->refused += rn_insert(in->f->p, in->f->b, r->columns, strlen(r->columns)) == RN_EINVAL;
  return 0;
}

/* Whether this process holds a POSIX lock on dir's lock file, as LMDB's
 * environment of the writer does (/proc/locks lists them): without it, the
 * next process to open the state takes itself for its only user and resets
 * the reader table under the writer. */
static bool lock_held_for_others(const char *dir)
{
  char path[128], line[256], type[16];
  snprintf(path, sizeof path, "%s/lock.mdb", dir);
  struct stat st;
  FILE *locks = fopen("/proc/locks", "r");
  bool held = false;
  while (locks && stat(path, &st) == 0 && fgets(line, sizeof line, locks)) {
    long pid;
    unsigned long ino;
    if (sscanf(line, "%*d: %15s %*s %*s %ld %*x:%*x:%lu", type, &pid, &ino) == 3)
      held |= strcmp(type, "POSIX") == 0 && pid == (long)getpid() && ino == (unsigned long)st.st_ino;
  }
  if (locks) fclose(locks);
  return held;
}

/* rn_inspect of the state open in this very process (a host's monitoring)
 * reads it without disturbing its writer: every committed group stays
 * visible to the writer's reads, and other processes still find the state
 * in use. LMDB forbids opening an environment twice in a process. */
static void test_inspect_of_the_open_state(void)
{
  for (int mode = 0; mode < 2; mode++) {
    fx f;
    fx_open(&f, mode, 0);
    CHECK(lock_held_for_others(f.dir));
    for (int64_t id = 1; id <= 4; id++) {
      CHECK(put(&f, f.a, RN_OP_INSERT, id, "r", id) == 0);
      CHECK(rn_flush(f.p) == 0);
      rn_cursor *c;
      CHECK(rn_cursor_open(f.p, f.a, &c) == 0); /* a reader open across the inspection */
      inspected in = { &f, 0, 0, 0 };
      rn_inspect_state st;
      char err[256] = "";
      CHECK(rn_inspect(f.dir, on_relation, &in, &st, err, sizeof err) == 0);
      CHECK(st.seq == rn_seq(f.p) && st.relations == 4 && in.relations == 4 && in.found == 4 && in.refused == 4);
      CHECK(get_name(&f, f.a, id, NULL, 0) == 1); /* the group just committed is still there */
      CHECK(count_rows(f.p, f.a) == id);
      int n = 0, done = 0;
      const void *row;
      size_t len;
      uint64_t rid;
      for (int64_t k = 100 * id; k < 100 * id + 50; k++) CHECK(put(&f, f.b, RN_OP_UPSERT, k, "churn", k) == 0);
      while (rn_cursor_next(c, &row, &len, &rid, &done) == 0 && !done) n++;
      CHECK(done && n == id);
      rn_cursor_close(c);
      CHECK(lock_held_for_others(f.dir));
    }
    for (int64_t id = 5; id <= 6; id++) { /* rn_state_copy of it likewise */
      CHECK(put(&f, f.a, RN_OP_INSERT, id, "r", id) == 0 && rn_flush(f.p) == 0);
      char dest[128], err[256] = "";
      snprintf(dest, sizeof dest, "%s/copy%d", f.dir, (int)id);
      CHECK(rn_state_copy(f.dir, dest, err, sizeof err) == 0);
      CHECK(get_name(&f, f.a, id, NULL, 0) == 1 && count_rows(f.p, f.a) == id);
      rn_inspect_state st;
      CHECK(rn_inspect(dest, NULL, NULL, &st, err, sizeof err) == 0 && st.seq == rn_seq(f.p));
      CHECK(lock_held_for_others(f.dir));
    }
    fx_reopen(&f);
    CHECK(count_rows(f.p, f.a) == 6 && count_rows(f.p, f.b) == 200);
    fx_close(&f);
  }
}

/* ---- a got row as the key of the next read, a hook reading meanwhile ---- */

typedef struct reading_hook {
  fx *f;
  int calls;
  int64_t id;             /* the row it reads */
} reading_hook;

static void read_in_hook(void *ctx, uint64_t seq)
{
  (void)seq;
  reading_hook *h = ctx;
  mp own;
  mp_init(&own);
  h->calls += get_name_in(h->f, &own, h->f->a, h->id, NULL, 0) == 1;
  msgpack_sbuffer_destroy(&own.sb);
}

/* rn_get's row is valid until the next call, which may take it: here as
 * the key of a read of a derived relation that first commits the carried
 * groups (nosync with the write-back layer), whose durability hook reads
 * another (long) row meanwhile. The read answers for the key it was given. */
static void test_got_row_as_the_next_key(void)
{
  static char big[100000];
  memset(big, 'b', sizeof big - 1);
  fx f;
  fx_open(&f, 1, 1);
  CHECK(put(&f, f.a, RN_OP_INSERT, 1, big, 1) == 0);
  CHECK(put(&f, f.a, RN_OP_INSERT, 2, "two", 2) == 0);
  CHECK(rn_flush(f.p) == 0);
  reading_hook h = { &f, 0, 1 };
  CHECK(rn_on_durable(f.p, read_in_hook, &h) == 0);
  const mp *k = key_of(&f.key, 2);
  const void *row;
  size_t len;
  uint64_t id = 0;
  CHECK(rn_get(f.p, f.a, k->sb.data, k->sb.size, &row, &len, &id) == 0 && row && id == 2);
  CHECK(put(&f, f.b, RN_OP_INSERT, 3, "carried", 3) == 0); /* a carried group: the next read commits it */
  CHECK(rn_get(f.p, f.best, row, len, &row, &len, &id) == 0 && row != NULL);
  char name[16] = "";
  if (row) field(row, len, "name", name, sizeof name);
  CHECK(h.calls == 1 && id == 2 && strcmp(name, "two") == 0);
  fx_close(&f);
}

/* ---- rn_undeclared's callback dropping what it is told of ---- */

typedef struct dropper {
  fx *f;
  char names[8][16];
  int n, dropped, read;
} dropper;

/* Drops each relation it is told of (the names are valid during the call),
 * reading a table first. */
static int drop_each(void *ctx, const char *name, const char *kind)
{
  dropper *d = ctx;
  if (d->n < 8) snprintf(d->names[d->n++], sizeof d->names[0], "%s %s", name, kind);
  mp own;
  mp_init(&own);
  d->read += get_name_in(d->f, &own, d->f->a, 1, NULL, 0) == 1;
  msgpack_sbuffer_destroy(&own.sb);
  d->dropped += rn_drop(d->f->p, name) == 0;
  return 0;
}

/* A host drops what the state holds and it no longer declares from inside
 * rn_undeclared's walk (the C form of p:undeclared() then p:drop), with a
 * group carried (nosync) or not, reading meanwhile: every such relation is
 * told of once and dropped. */
static void test_dropping_the_undeclared_while_walking(void)
{
  for (int mode = 0; mode < 4; mode++) {
    fx f;
    fx_open(&f, mode & 1, mode & 2);
    rn_rel *r;
    CHECK(rn_declare_table(f.p, "x1", cols, 4, key, 1, &r) == 0 && put(&f, r, RN_OP_INSERT, 1, "x", 1) == 0);
    CHECK(rn_declare_table(f.p, "x2", cols, 4, NULL, 0, &r) == 0 && put(&f, r, RN_OP_INSERT, 1, "x", 1) == 0);
    CHECK(rn_declare_stream(f.p, "x3", cols, 4, &r) == 0);
    fx_reopen(&f);
    CHECK(put(&f, f.a, RN_OP_INSERT, 1, "one", 1) == 0); /* carried, with nosync */
    dropper d = { .f = &f };
    CHECK(rn_undeclared(f.p, drop_each, &d) == 0);
    CHECK(d.n == 3 && d.dropped == 3 && d.read == 3);
    CHECK(d.n == 3 && strcmp(d.names[0], "x1 table") == 0 && strcmp(d.names[1], "x2 table") == 0 &&
          strcmp(d.names[2], "x3 stream") == 0);
    dropper again = { .f = &f };
    CHECK(rn_undeclared(f.p, drop_each, &again) == 0 && again.n == 0);
    fx_reopen(&f);
    CHECK(rn_undeclared(f.p, drop_each, &again) == 0 && again.n == 0);
    CHECK(get_name(&f, f.a, 1, NULL, 0) == 1);
    fx_close(&f);
  }
}

int main(void)
{
  RUN(test_got_rows_given_back);
  RUN(test_cursor_rows_given_back);
  RUN(test_calls_from_a_subscriber);
  RUN(test_calls_from_a_rollback_notice);
  RUN(test_calls_from_a_durability_hook);
  RUN(test_calls_from_a_durable_subscriber);
  RUN(test_cursors_across_group_ends);
  RUN(test_failing_groups_against_a_model);
  RUN(test_bad_maps);
  RUN(test_messages_given_back);
  RUN(test_inspect_of_the_open_state);
  RUN(test_got_row_as_the_next_key);
  RUN(test_dropping_the_undeclared_while_walking);
  return CHECK_REPORT();
}
