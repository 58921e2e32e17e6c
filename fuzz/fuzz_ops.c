/* fuzz_ops.c — sequences of C API calls (rn_begin, rn_push, rn_commit,
 * rn_rollback, rn_flush, cursors, a close and reopen) on a state with
 * source tables, a stream, and the derived relations a cursor reads
 * (a join, aggregates, a windowed aggregate, a top, an index, a
 * distinct), with a Lua filter and a C subscriber that fail some groups.
 *
 * The input: one configuration byte (bit 0: write-back on; bits 1-2:
 * carry_groups 1, 2, 4 or 256; bit 3: a 64 KiB map, so that it fills and
 * grows, the open group and the carried ones applied again; bit 4:
 * carry_page_share 2), then operations, each a ctl byte:
 *
 *   ctl & 7 < 4: a change, op RN_OP_INSERT + (ctl & 3), to the relation
 *                (ctl >> 3) % NPUSH of push_names, then |len (1 byte)|len
 *                bytes of msgpack| (running past the end takes the rest)
 *   4: rn_begin   5: rn_commit   6: rn_rollback
 *   7: by (ctl >> 3) & 3: rn_flush, a close and reopen, a cursor read of
 *      every relation (inside a group: its changes so far), rn_deliver;
 *      with bit 5 instead, fill (big rows into t, or kl with bit 6) from
 *      the base the next byte gives (the first MAX_FILLS fills only)
 *
 * The all-or-nothing promise, checked after every call that ends a group
 * (a commit, a rollback, a failing change or commit): every relation reads
 * exactly as after the last committed group, or as that plus the changes
 * the subscribers were given for the group that committed (applied to the
 * rows as they were: an insert of an absent id, an update or delete of the
 * row as it was), and rn_seq moved by one group at most, only on a commit.
 * A reopen reads what was committed. At the end, the committed groups
 * replayed alone into a fresh state make the same rows, ids and seq. RUNNEL_FUZZ_TRACE=1 prints each call
 * and its answer. */
#include <errno.h>
#include <ftw.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "must.h"
#include "runnel.h"

static const char SCRIPT[] =
  "local runnel = require 'runnel'\n"
  "local t = p:table('t', { {'id','int'}, {'team','int', null = true}, {'score','int', default = 0},\n"
  "  {'s','string', null = true}, {'m','map', null = true}, key = 'id' })\n"
  "local teams = p:table('teams', { {'tid','int'}, {'name','string'}, key = 'tid' })\n"
  "local kl = p:table('kl', { {'a','int', null = true}, {'b','string', null = true} })\n"
  "local c = p:table('c', { {'k1','string'}, {'k2','int'}, {'v','any', null = true}, key = {'k1','k2'} })\n"
  "local ev = p:stream('ev', { {'player','int'}, {'ts','int'}, {'v','float', null = true} })\n"
  "t:join(teams, { on = 'team', kind = 'left', name = 'roster' })\n"
  "t:aggregate{ by = 'team', name = 'per_team', n = runnel.count(), total = runnel.sum('score'),\n"
  "  best = runnel.max('score'), low = runnel.min('s') }\n"
  "ev:aggregate{ by = 'player', window = runnel.tumbling(60, 'ts'), grace = 10, name = 'per_min',\n"
  "  n = runnel.count(), total = runnel.sum('v') }\n"
  "t:top{ n = 2, by = 'team', order = { {'score', 'desc'} }, name = 'best' }\n"
  "t:index{ 'score', 'desc', name = 'by_score' }\n"
  "kl:distinct('kd')\n"
  "c:aggregate{ by = 'k1', name = 'per_k1', n = runnel.count() }\n"
  "t:filter(function(r) if r.s == 'boom' then error('boom') end return r.score > 5 end)\n"
  "  :sink(function() end)\n";

static const char *const push_names[] = { "t", "teams", "kl", "c", "ev" };
#define NPUSH 5
/* Every relation a cursor reads, and whether its subscriber's changes are
 * checked against its rows (a top's and an index's are rank movements). */
static const char *const read_names[] = { "t", "teams", "kl", "c", "roster", "per_team", "per_min",
                                          "best", "by_score", "kd", "per_k1" };
static const bool modelled[] = { true, true, true, true, true, true, true, false, false, true, true };
#define NREAD 11

typedef struct entry {
  uint64_t id;
  char *row;
  size_t len;
} entry;

typedef struct rows {
  entry *e;
  size_t n, cap;
} rows;

typedef struct change {
  int rel, verb;
  uint64_t id;
  char *row, *old;
  size_t row_len, old_len;
} change;

typedef struct fuzz {
  rn_pipeline *p;
  rn_rel *push[NPUSH], *read[NREAD];
  rows committed[NREAD];  /* as after the last committed group */
  uint64_t seq;           /* rn_seq then */
  bool open;              /* a group is open */
  change *pending;        /* the subscribers' changes of the group committing */
  size_t npending, pendcap;
  bool told_rollback[NREAD];
  int cfg;
  /* The changes of the open group, then of every committed group, each
   * |rel|op|len (4 bytes)|msgpack|; a group in the log is |count (4 bytes)|
   * changes|. Replayed alone into a fresh state at the end, they must
   * make the same state: what failed or was rolled back left nothing. */
  msgpack_sbuffer group, log;
  uint32_t ngroup;
} fuzz;

static char *dup_bytes(const void *d, size_t n)
{
  char *c = malloc(n ? n : 1);
  MUST(c);
  if (n) memcpy(c, d, n);
  return c;
}

static void rows_free(rows *r)
{
  for (size_t i = 0; i < r->n; i++) free(r->e[i].row);
  free(r->e);
  memset(r, 0, sizeof *r);
}

static void rows_add(rows *r, uint64_t id, const void *row, size_t len)
{
  if (r->n == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 16;
    r->e = realloc(r->e, r->cap * sizeof *r->e);
    MUST(r->e);
  }
  r->e[r->n++] = (entry){ id, dup_bytes(row, len), len };
}

static int by_id(const void *a, const void *b)
{
  uint64_t x = ((const entry *)a)->id, y = ((const entry *)b)->id;
  return (x > y) - (x < y);
}

static entry *rows_find(rows *r, uint64_t id)
{
  for (size_t i = 0; i < r->n; i++)
    if (r->e[i].id == id) return &r->e[i];
  return NULL;
}

static bool same_bytes(const char *a, size_t na, const char *b, size_t nb)
{
  return na == nb && (na == 0 || memcmp(a, b, na) == 0);
}

/* Whether two row sets are equal, whatever their order. */
static bool rows_equal(rows *a, rows *b)
{
  if (a->n != b->n) return false;
  if (a->n == 0) return true;
  qsort(a->e, a->n, sizeof *a->e, by_id);
  qsort(b->e, b->n, sizeof *b->e, by_id);
  for (size_t i = 0; i < a->n; i++)
    if (a->e[i].id != b->e[i].id || !same_bytes(a->e[i].row, a->e[i].len, b->e[i].row, b->e[i].len))
      return false;
  return true;
}

static void rows_copy(rows *to, const rows *from)
{
  rows_free(to);
  for (size_t i = 0; i < from->n; i++) rows_add(to, from->e[i].id, from->e[i].row, from->e[i].len);
}

/* Every row of relation i; a cursor that fails is a bug (the state is the
 * fuzzer's own, always readable). */
static void scan(fuzz *f, int i, rows *out)
{
  rows_free(out);
  rn_cursor *c = NULL;
  int rc = rn_cursor_open(f->p, f->read[i], &c);
  if (rc) {
    fprintf(stderr, "fuzz: cursor of %s: %s\n", read_names[i], rn_errmsg(f->p));
    abort();
  }
  for (;;) {
    const void *row;
    size_t len;
    uint64_t id;
    int done = 0;
    rc = rn_cursor_next(c, &row, &len, &id, &done);
    if (rc) {
      fprintf(stderr, "fuzz: cursor of %s: %s\n", read_names[i], rn_errmsg(f->p));
      abort();
    }
    if (done) break;
    rows_add(out, id, row, len);
  }
  rn_cursor_close(c);
}

static void put_u32(msgpack_sbuffer *b, uint32_t v)
{
  char w[4] = { (char)(v >> 24), (char)(v >> 16), (char)(v >> 8), (char)v };
  msgpack_sbuffer_write(b, w, 4);
}

static uint32_t get_u32(const char *d)
{
  const unsigned char *u = (const unsigned char *)d;
  return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

static void group_add(fuzz *f, int rel, rn_op op, const uint8_t *d, size_t len)
{
  char head[2] = { (char)rel, (char)op };
  msgpack_sbuffer_write(&f->group, head, 2);
  put_u32(&f->group, (uint32_t)len);
  if (len) msgpack_sbuffer_write(&f->group, (const char *)d, len);
  f->ngroup++;
}

static void group_drop(fuzz *f)
{
  msgpack_sbuffer_clear(&f->group);
  f->ngroup = 0;
}

static void group_log(fuzz *f)
{
  put_u32(&f->log, f->ngroup);
  if (f->group.size) msgpack_sbuffer_write(&f->log, f->group.data, f->group.size);
  group_drop(f);
}

static void pending_clear(fuzz *f)
{
  for (size_t i = 0; i < f->npending; i++) {
    free(f->pending[i].row);
    free(f->pending[i].old);
  }
  f->npending = 0;
  memset(f->told_rollback, 0, sizeof f->told_rollback);
}

/* ctx: the relation's index in read_names, as a pointer into this array. */
static int rel_index[NREAD];
static fuzz *current;

static int record(void *ctx, const rn_event *ev)
{
  fuzz *f = current;
  if (f->npending == f->pendcap) {
    f->pendcap = f->pendcap ? 2 * f->pendcap : 32;
    f->pending = realloc(f->pending, f->pendcap * sizeof *f->pending);
    MUST(f->pending);
  }
  change *c = &f->pending[f->npending++];
  c->rel = *(const int *)ctx;
  c->verb = ev->verb;
  c->id = ev->id;
  c->row = ev->row ? dup_bytes(ev->row, ev->row_len) : NULL;
  c->row_len = ev->row_len;
  c->old = ev->old ? dup_bytes(ev->old, ev->old_len) : NULL;
  c->old_len = ev->old_len;
  return 0;
}

static void told_rollback(void *ctx, uint64_t seq)
{
  (void)seq;
  current->told_rollback[*(const int *)ctx] = true;
}

/* A C subscriber of t that fails the group of a row whose score is 13. */
static int refuse_13(void *ctx, const rn_event *ev)
{
  (void)ctx;
  if (!ev->row) return 0;
  msgpack_zone z;
  msgpack_zone_init(&z, 256);
  msgpack_object o;
  size_t off = 0;
  int refuse = 0;
  if (msgpack_unpack(ev->row, ev->row_len, &off, &z, &o) == MSGPACK_UNPACK_SUCCESS && o.type == MSGPACK_OBJECT_MAP)
    for (uint32_t i = 0; i < o.via.map.size; i++) {
      const msgpack_object_kv *kv = &o.via.map.ptr[i];
      if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == 5 &&
          memcmp(kv->key.via.str.ptr, "score", 5) == 0 && kv->val.type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
          kv->val.via.u64 == 13)
        refuse = 1;
    }
  msgpack_zone_destroy(&z);
  return refuse;
}

/* RUNNEL_FUZZ_TRACE=1: each call and its answer on stderr. */
static bool tracing;
#define TRACE(...) do { if (tracing) fprintf(stderr, __VA_ARGS__); } while (0)

static char base[64];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

/* The directory of the states, removed at exit. */
static void remove_base(void)
{
  nftw(base, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static const char *state_path(void)
{
  static char path[96];
  if (!base[0]) {
    snprintf(base, sizeof base, "%s/runnel-fuzz-ops-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    MUST(mkdtemp(base));
    atexit(remove_base);
  }
  snprintf(path, sizeof path, "%s/st", base);
  return path;
}

static void open_state_at(fuzz *f, const char *path)
{
  static const int carry[] = { 1, 2, 4, 256 };
  rn_open_opts o = { .path = path, .nosync = 1, .carry_groups = carry[f->cfg >> 1 & 3],
                     .write_back = f->cfg & 1 ? 1 : -1, .map_size = f->cfg & 8 ? 64 << 10 : 0,
                     .carry_page_share = f->cfg & 16 ? 2 : -1 };
  char err[256];
  if (rn_pipeline_open(&o, &f->p, err, sizeof err)) { fprintf(stderr, "fuzz: open: %s\n", err); abort(); }
  if (rn_run_lua_string(f->p, NULL, SCRIPT, "=fuzz-ops")) {
    fprintf(stderr, "fuzz: script: %s\n", rn_errmsg(f->p));
    abort();
  }
  for (int i = 0; i < NPUSH; i++) MUST((f->push[i] = rn_relation(f->p, push_names[i])));
  for (int i = 0; i < NREAD; i++) {
    rel_index[i] = i;
    MUST((f->read[i] = rn_relation(f->p, read_names[i])));
    MUST(rn_subscribe_rollback(f->p, f->read[i], record, told_rollback, &rel_index[i]) == 0);
  }
  MUST(rn_subscribe(f->p, f->push[0], refuse_13, NULL) == 0);
  f->open = false;
}

static void open_state(fuzz *f)
{
  open_state_at(f, state_path());
}

/* A failing call: an RN_E… code other than the store's, and a message. */
static void check_failure(fuzz *f, int rc, const char *what)
{
  TRACE("  %s: %s\n", what, rn_errmsg(f->p));
  if (rc > RN_EINVAL || rc < RN_EIO || rc == RN_ESTORE || rc == RN_EIO || rc == RN_EFULL || rc == RN_ENOMEM) {
    fprintf(stderr, "fuzz: %s returned %d (%s): %s\n", what, rc, rn_strerror(rc), rn_errmsg(f->p));
    abort();
  }
  if (!rn_errmsg(f->p)[0]) {
    fprintf(stderr, "fuzz: %s failed with %s and an empty message\n", what, rn_strerror(rc));
    abort();
  }
}

/* After a group ended without committing: every relation as committed. */
static void check_unchanged(fuzz *f, const char *what)
{
  if (rn_seq(f->p) != f->seq) {
    fprintf(stderr, "fuzz: after %s, seq %llu, not %llu\n", what, (unsigned long long)rn_seq(f->p),
            (unsigned long long)f->seq);
    abort();
  }
  rows now = { 0 };
  for (int i = 0; i < NREAD; i++) {
    scan(f, i, &now);
    if (!rows_equal(&now, &f->committed[i])) {
      fprintf(stderr, "fuzz: after %s, %s reads otherwise than after the last commit (%zu rows, %zu then)\n",
              what, read_names[i], now.n, f->committed[i].n);
      abort();
    }
  }
  rows_free(&now);
  pending_clear(f);
  group_drop(f);
}

/* The subscriber's change c applied to the rows m as they were. */
static void apply(rows *m, const change *c, const char *rel)
{
  entry *e = rows_find(m, c->id);
  if (c->verb == RN_VERB_INSERT) {
    if (e) { fprintf(stderr, "fuzz: %s: INSERT of id %llu, present\n", rel, (unsigned long long)c->id); abort(); }
    rows_add(m, c->id, c->row, c->row_len);
    return;
  }
  if (!e) {
    fprintf(stderr, "fuzz: %s: %s of id %llu, absent\n", rel, c->verb == RN_VERB_UPDATE ? "UPDATE" : "DELETE",
            (unsigned long long)c->id);
    abort();
  }
  if (!same_bytes(e->row, e->len, c->old, c->old_len)) {
    fprintf(stderr, "fuzz: %s: the old row of id %llu is not the row it was\n", rel, (unsigned long long)c->id);
    abort();
  }
  free(e->row);
  if (c->verb == RN_VERB_UPDATE) {
    e->row = dup_bytes(c->row, c->row_len);
    e->len = c->row_len;
  } else {
    *e = m->e[--m->n];
  }
}

/* After a commit: the relations read as the subscribers' changes say. */
static void check_committed(fuzz *f)
{
  uint64_t seq = rn_seq(f->p);
  if (seq != f->seq && seq != f->seq + 1) {
    fprintf(stderr, "fuzz: a commit moved seq from %llu to %llu\n", (unsigned long long)f->seq,
            (unsigned long long)seq);
    abort();
  }
  if (seq == f->seq && f->npending) {
    fprintf(stderr, "fuzz: a commit told %zu changes without a new group\n", f->npending);
    abort();
  }
  f->seq = seq;
  TRACE("  committed group %llu: %zu changes told\n", (unsigned long long)seq, f->npending);
  rows model = { 0 };
  for (int i = 0; i < NREAD; i++) {
    if (modelled[i]) {
      rows_copy(&model, &f->committed[i]);
      for (size_t k = 0; k < f->npending; k++)
        if (f->pending[k].rel == i) apply(&model, &f->pending[k], read_names[i]);
    }
    scan(f, i, &f->committed[i]);
    if (modelled[i] && !rows_equal(&model, &f->committed[i])) {
      fprintf(stderr, "fuzz: after a commit, %s reads otherwise than its changes say (%zu rows, %zu by them)\n",
              read_names[i], f->committed[i].n, model.n);
      abort();
    }
  }
  rows_free(&model);
  pending_clear(f);
  group_log(f);
}

/* A group that failed: rolled back, the subscribers that had its changes
 * told so. */
static void failed_group(fuzz *f, int rc, const char *what)
{
  check_failure(f, rc, what);
  for (size_t k = 0; k < f->npending; k++)
    if (!f->told_rollback[f->pending[k].rel]) {
      fprintf(stderr, "fuzz: %s failed; the subscriber of %s had its changes, no rollback notice\n", what,
              read_names[f->pending[k].rel]);
      abort();
    }
  f->open = false;
  check_unchanged(f, what);
}

static void reopen(fuzz *f)
{
  char err[256];
  if (f->open) {
    MUST(rn_rollback(f->p) == 0);
    f->open = false;
    check_unchanged(f, "a rollback before a close");
  }
  if (rn_pipeline_close_report(f->p, err, sizeof err)) { fprintf(stderr, "fuzz: close: %s\n", err); abort(); }
  open_state(f);
  check_unchanged(f, "a reopen");
}

/* The committed groups replayed alone into a fresh temporary state read
 * as the fuzzed state does: the same rows under the same ids, the same
 * seq. */
static void check_replay(fuzz *f)
{
  fuzz r = { .cfg = f->cfg };
  current = &r;
  open_state_at(&r, NULL);
  uint64_t groups = 0;
  for (size_t at = 0; at < f->log.size; groups++) {
    uint32_t n = get_u32(f->log.data + at);
    at += 4;
    MUST(rn_begin(r.p) == 0);
    for (uint32_t i = 0; i < n; i++) {
      int rel = f->log.data[at], op = f->log.data[at + 1];
      uint32_t len = get_u32(f->log.data + at + 2);
      at += 6;
      int rc = rn_push(r.p, r.push[rel], (rn_op)op, f->log.data + at, len);
      if (rc) {
        fprintf(stderr, "fuzz: replayed alone, a change of committed group %llu to %s fails: %s\n",
                (unsigned long long)groups + 1, push_names[rel], rn_errmsg(r.p));
        abort();
      }
      at += len;
    }
    int rc = rn_commit(r.p);
    if (rc) {
      fprintf(stderr, "fuzz: replayed alone, committed group %llu fails: %s\n", (unsigned long long)groups + 1,
              rn_errmsg(r.p));
      abort();
    }
    pending_clear(&r);
  }
  if (rn_seq(r.p) != f->seq) {
    fprintf(stderr, "fuzz: the %llu committed groups replayed alone end at seq %llu, not %llu\n",
            (unsigned long long)groups, (unsigned long long)rn_seq(r.p), (unsigned long long)f->seq);
    abort();
  }
  rows now = { 0 };
  for (int i = 0; i < NREAD; i++) {
    scan(&r, i, &now);
    if (!rows_equal(&now, &f->committed[i])) {
      fprintf(stderr, "fuzz: the committed groups replayed alone make %s otherwise (%zu rows, %zu here)\n",
              read_names[i], now.n, f->committed[i].n);
      for (size_t k = 0; tracing && k < now.n; k++)
        fprintf(stderr, "  replayed id %llu %zu bytes | here id %llu %zu bytes\n", (unsigned long long)now.e[k].id,
                now.e[k].len, k < f->committed[i].n ? (unsigned long long)f->committed[i].e[k].id : 0ULL,
                k < f->committed[i].n ? f->committed[i].e[k].len : 0);
      abort();
    }
  }
  rows_free(&now);
  rn_pipeline_close(r.p);
  pending_clear(&r);
  free(r.pending);
  current = f;
}

/* FILL_ROWS upserts of FILL_BYTES-byte rows into t (or kl) under ids from
 * from * FILL_ROWS on, in the open group or one of their own: a few fill
 * the 1 MiB map a 64 KiB map_size gives, so it grows. */
#define FILL_ROWS 128
#define MAX_FILLS 8
#define FILL_BYTES 480
static void fill(fuzz *f, uint8_t from, int keyless)
{
  bool own = !f->open;
  if (own) {
    MUST(rn_begin(f->p) == 0);
    f->open = true;
    group_drop(f);
  }
  char text[FILL_BYTES];
  memset(text, 'a' + from % 26, sizeof text);
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  for (int i = 0; i < FILL_ROWS; i++) {
    msgpack_sbuffer_clear(&b);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
    int64_t id = (int64_t)from * FILL_ROWS + i;
    msgpack_pack_map(&pk, keyless ? 2 : 4);
    msgpack_pack_str_with_body(&pk, keyless ? "a" : "id", keyless ? 1 : 2);
    msgpack_pack_int64(&pk, id);
    msgpack_pack_str_with_body(&pk, keyless ? "b" : "s", 1);
    msgpack_pack_str_with_body(&pk, text, sizeof text);
    if (!keyless) {
      msgpack_pack_str_with_body(&pk, "team", 4);
      msgpack_pack_int64(&pk, i % 4);
      msgpack_pack_str_with_body(&pk, "score", 5);
      msgpack_pack_int64(&pk, i);
    }
    rn_op op = keyless ? RN_OP_INSERT : RN_OP_UPSERT;
    int rel = keyless ? 2 : 0;
    int rc = rn_push(f->p, f->push[rel], op, b.data, b.size);
    TRACE("fill %s %lld: %d\n", push_names[rel], (long long)id, rc);
    if (rc) {
      msgpack_sbuffer_destroy(&b);
      failed_group(f, rc, "rn_push");
      return;
    }
    group_add(f, rel, op, (const uint8_t *)b.data, b.size);
  }
  msgpack_sbuffer_destroy(&b);
  if (!own) return;
  int rc = rn_commit(f->p);
  f->open = false;
  if (rc) failed_group(f, rc, "rn_commit");
  else check_committed(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  fuzz f = { .cfg = size ? data[0] : 0 };
  current = &f;
  tracing = getenv("RUNNEL_FUZZ_TRACE") != NULL;
  nftw(state_path(), rm_entry, 8, FTW_DEPTH | FTW_PHYS);
  open_state(&f);
  f.seq = rn_seq(f.p);
  for (int i = 0; i < NREAD; i++) scan(&f, i, &f.committed[i]);
  size_t at = size ? 1 : 0;
  int fills = 0;
  while (at < size) {
    uint8_t ctl = data[at++];
    int rc;
    if ((ctl & 7) < 4) {
      size_t len = at < size ? data[at++] : 0;
      if (len > size - at) len = size - at;
      rn_op op = (rn_op)(RN_OP_INSERT + (ctl & 3));
      rc = rn_push(f.p, f.push[(ctl >> 3) % NPUSH], op, data + at, len);
      if (!rc) group_add(&f, (ctl >> 3) % NPUSH, op, data + at, len);
      TRACE("push %s op %d (%zu bytes): %d\n", push_names[(ctl >> 3) % NPUSH], (int)op, len, rc);
      at += len;
      if (rc) failed_group(&f, rc, "rn_push");
      else if (!f.open) check_committed(&f);
      continue;
    }
    TRACE("call %d.%d\n", ctl & 7, ctl >> 3 & 3);
    switch (ctl & 7) {
    case 4:
      rc = rn_begin(f.p);
      MUST(f.open ? rc == RN_EMISUSE : rc == 0);
      if (!f.open) group_drop(&f);
      f.open = true;
      break;
    case 5:
      rc = rn_commit(f.p);
      if (!f.open) { MUST(rc == RN_EMISUSE); break; }
      f.open = false;
      if (rc) failed_group(&f, rc, "rn_commit");
      else check_committed(&f);
      break;
    case 6:
      rc = rn_rollback(f.p);
      if (!f.open) break; /* nothing to roll back: either answer */
      MUST(rc == 0);
      f.open = false;
      check_unchanged(&f, "rn_rollback");
      break;
    default:
      if (ctl & 0x20) {
        uint8_t from = at < size ? data[at++] : 0;
        if (fills++ < MAX_FILLS) fill(&f, from, ctl & 0x40); /* more would be slow, not new */
        break;
      }
      switch (ctl >> 3 & 3) {
      case 0: MUST(rn_flush(f.p) == 0); break;
      case 1: reopen(&f); break;
      case 2: {
        rows r = { 0 };
        for (int i = 0; i < NREAD; i++) scan(&f, i, &r);
        rows_free(&r);
        break;
      }
      default:
        rc = rn_deliver(f.p);
        if (rc) check_failure(&f, rc, "rn_deliver");
      }
    }
  }
  if (f.open) {
    int rc = rn_commit(f.p);
    f.open = false;
    if (rc) failed_group(&f, rc, "rn_commit");
    else check_committed(&f);
  }
  check_replay(&f);
  rn_pipeline_close(f.p);
  msgpack_sbuffer_destroy(&f.group);
  msgpack_sbuffer_destroy(&f.log);
  for (int i = 0; i < NREAD; i++) rows_free(&f.committed[i]);
  pending_clear(&f);
  free(f.pending);
  return 0;
}
