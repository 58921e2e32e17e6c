/* join_scan.c — a join's current results (join_int.h). */
#include "join_int.h"

#include <stdlib.h>
#include <string.h>

#include "scan.h"
#include "snapshot.h"
#include "wb.h"

/* ---- scanning results ---- */

/* A cursor on dbi in txn, or NULL with the error set. */
static MDB_cursor *scan_cursor(rn_rel *d, MDB_txn *txn, MDB_dbi dbi, int *rc)
{
  MDB_cursor *cur = NULL;
  *rc = rn_wb_cursor_open(&d->p->store, txn, dbi, false, &cur);
  if (!*rc) return cur;
  *rc = rn_store_fail(&d->p->err, *rc, d->name);
  return NULL;
}

/* ---- long right keys by their index part (rn_join_longfks_build) ---- */

typedef struct longfk {
  char part[RN_JOIN_FK_INLINE + 8];
  size_t off, len;        /* the whole key in encs */
} longfk;

struct rn_join_longfks {
  longfk *items;          /* sorted by part once built */
  size_t n, cap;
  msgpack_sbuffer encs;   /* the whole keys, one after another */
};

static int longfk_cmp(const void *a, const void *b)
{
  return memcmp(((const longfk *)a)->part, ((const longfk *)b)->part, RN_JOIN_FK_INLINE + 8);
}

/* Keeps right row `row`'s key when it is long. */
static int longfk_add(rn_join *j, const char *row, size_t len)
{
  struct rn_join_longfks *m = j->longfks;
  side r = { .row = row, .len = len };
  fk f;
  int rc = rn_join_right_key(j, &r, &f);
  if (rc || f.null || f.part_len != sizeof f.part) return rc;
  if (m->n == m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 16;
    longfk *items = realloc(m->items, cap * sizeof *items);
    if (!items) return nomem(j);
    m->items = items;
    m->cap = cap;
  }
  longfk *e = &m->items[m->n];
  memcpy(e->part, f.part, sizeof e->part);
  e->off = m->encs.size;
  e->len = f.len;
  if (rn_buf_write(&m->encs, f.enc, f.len)) return nomem(j);
  m->n++;
  return 0;
}

static int longfk_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  (void)id;
  rn_join *j = ctx;
  int rc = j->right_native && j->right_from ? rn_join_right_as_declared(j, &row, &len) : 0;
  if (!rc) rc = longfk_add(j, row, len);
  if (j->longfk_lazy) msgpack_zone_clear(zone_of(j)); /* its own zone while it builds (longfks_read) */
  return rc;
}

int rn_join_longfks_build(rn_join *j)
{
  rn_join_longfks_free(j);
  struct rn_join_longfks *m = calloc(1, sizeof *m);
  if (!m) return nomem(j);
  msgpack_sbuffer_init(&m->encs);
  j->longfks = m;
  int rc = 0;
  if (j->right_native && j->longfk_lazy) {
    rc = rn_table_scan_txn(j->right, txn_of(j), longfk_row, j); /* a reader's: in its read transaction */
  } else if (j->right_native) {
    rc = rn_rel_scan(j->right, longfk_row, j); /* the rows its results were made with */
  } else { /* its copy of the right side: what it joined with, though the right side was rebuilt since */
    MDB_cursor *cur = scan_cursor(j->out, txn_of(j), j->right_dbi, &rc);
    MDB_val k, v;
    int mrc = rc ? MDB_NOTFOUND : mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    for (; !rc && mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) rc = longfk_row(j, 0, v.mv_data, v.mv_size);
    if (!rc && mrc != MDB_NOTFOUND) rc = rn_store_fail(err_of(j), mrc, j->out->name);
    if (cur) mdb_cursor_close(cur);
  }
  if (!rc) qsort(m->items, m->n, sizeof *m->items, longfk_cmp);
  else rn_join_longfks_free(j);
  return rc;
}

void rn_join_longfks_free(rn_join *j)
{
  if (!j->longfks) return;
  free(j->longfks->items);
  msgpack_sbuffer_destroy(&j->longfks->encs);
  free(j->longfks);
  j->longfks = NULL;
}

/* A reader's long keys (longfk_lazy), built in the middle of a scan: the
 * right rows' keys are made in a zone of their own, so the scan's scratch
 * keeps what its row holds there. */
static int longfks_read(rn_join *j)
{
  msgpack_zone own, *z = zone_of(j);
  if (!rn_zone_init(&own, 1024)) return nomem(j);
  msgpack_zone kept = *z; /* a zone holds no pointer to itself */
  *z = own;
  int rc = rn_join_longfks_build(j);
  own = *z;
  *z = kept;
  rn_zone_destroy(&own);
  return rc;
}

/* The right key an index entry k is filed under (join.h's fk part): a
 * reader's, for a join whose mapper it cannot call. A long key's part is
 * hashed: then on slots recompute it, and a mapper's is found among the
 * right rows' keys when a rebuild kept them (rn_join_longfks_build) or a
 * reader finds them (longfks_read), else cannot be read (longfk_unread). */
static int index_fk(rn_join *j, const MDB_val *k, side *l, fk *f)
{
  size_t part_len = k->mv_size - 8;
  const char *part = k->mv_data;
  *f = (fk){ .null = part_len == 1 && part[0] == RN_KEY_NULL };
  if (f->null) {
    rn_join_set_part(f);
    return 0;
  }
  if (part_len == RN_JOIN_FK_INLINE + 8) { /* the first RN_JOIN_FK_INLINE bytes and a hash */
    if (j->on) return rn_join_left_fk(j, l, f);
    int rc = !j->longfks && j->longfk_lazy ? longfks_read(j) : 0;
    if (rc) return rc;
    if (j->longfks) {
      longfk want;
      memcpy(want.part, part, sizeof want.part);
      const longfk *e = bsearch(&want, j->longfks->items, j->longfks->n, sizeof *e, longfk_cmp);
      if (e) f->enc = j->longfks->encs.data + e->off, f->len = e->len;
      else f->null = true; /* no right row holds it: the result without a match */
      rn_join_set_part(f);
      return 0;
    }
    j->longfk_unread = true;
    return rn_err_set(err_of(j), RN_EINVAL, "%s: a right key longer than %d bytes, made by the mapper (a Lua "
                      "function in the script), is read only by its pipeline", j->out->name, RN_JOIN_FK_INLINE);
  }
  f->enc = part;
  f->len = part_len;
  rn_join_set_part(f);
  return 0;
}

/* Every result a left row holds, from the index. */
static int scan_left_rows(rn_join *j, MDB_txn *txn, bool own_scratch, rn_scan_fn fn, void *ctx)
{
  rn_pipeline *p = j->out->p;
  int rc;
  MDB_cursor *cur = scan_cursor(j->out, txn, j->index_dbi, &rc);
  MDB_val k, v;
  int mrc = rc ? MDB_NOTFOUND : mdb_cursor_get(cur, &k, &v, MDB_FIRST);
  for (; !rc && mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size < 8 || !rn_join_entry_whole(&v)) { rc = rn_join_entry_damaged(j); break; }
    uint32_t llen;
    memcpy(&llen, (const char *)v.mv_data + 8, 4);
    size_t left_len = llen & ~RN_JOIN_KEPT;
    entry e = { rn_be64_get((const char *)k.mv_data + k.mv_size - 8), 0, (const char *)v.mv_data + 12, left_len,
                v.mv_size - 12 - left_len, j->lookup || (llen & RN_JOIN_KEPT) };
    memcpy(&e.rid, v.mv_data, 8);
    side l, r = { 0 }, res = { 0 };
    fk f;
    rn_join_left_row(&e, &l);
    if (!rn_join_kept_result(&e, &res)) { /* else the result it emitted */
      if (l.row) rc = j->fk_of_index ? index_fk(j, &k, &l, &f) : rn_join_left_fk(j, &l, &f);
      if (!rc && l.row) rc = rn_join_right_current(j, &f, &r);
      if (!rc && l.row) rc = rn_join_make_result(j, &l, &r, &f, &res);
    }
    if (!rc && res.row) rc = fn(ctx, e.rid, res.row, res.len);
    if (own_scratch) msgpack_zone_clear(&p->scratch);
  }
  if (cur) mdb_cursor_close(cur);
  return rc;
}

/* An outer join's right rows no left row holds. */
static int scan_lone_right_rows(rn_join *j, MDB_txn *txn, bool own_scratch, rn_scan_fn fn, void *ctx)
{
  rn_pipeline *p = j->out->p;
  int rc;
  MDB_cursor *cur = scan_cursor(j->out, txn, j->result_dbi, &rc);
  MDB_val k, v;
  int mrc = rc ? MDB_NOTFOUND : mdb_cursor_get(cur, &k, &v, MDB_FIRST);
  for (; !rc && mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    bool hashed = v.mv_size > 16; /* |id|owner|whole key| (join_state.c) */
    fk f = { .null = false, .enc = hashed ? (const char *)v.mv_data + 16 : k.mv_data,
             .len = hashed ? v.mv_size - 16 : k.mv_size };
    rn_join_set_part(&f);
    side none = { 0 }, r = { 0 }, res = { 0 };
    entries es = { .items = NULL }; /* stack NULL: collect allocates */
    rc = rn_join_collect(j, &f, &es);
    free(es.items);
    if (!rc && es.n == 0) rc = rn_join_right_current(j, &f, &r);
    if (!rc && r.row) rc = rn_join_make_result(j, &none, &r, &f, &res);
    if (!rc && res.row) {
      uint64_t rid;
      memcpy(&rid, v.mv_data, 8);
      rc = fn(ctx, rid, res.row, res.len);
    }
    if (own_scratch) msgpack_zone_clear(&p->scratch);
  }
  if (cur) mdb_cursor_close(cur);
  return rc;
}

typedef struct join_scan {
  rn_join *j;
  rn_scan_fn fn;
  void *ctx;
} join_scan;

static int scan_in(void *ctx, MDB_txn *txn, bool own_scratch)
{
  join_scan *s = ctx;
  int rc = scan_left_rows(s->j, txn, own_scratch, s->fn, s->ctx);
  if (!rc && s->j->kind == RN_JOIN_OUTER) rc = scan_lone_right_rows(s->j, txn, own_scratch, s->fn, s->ctx);
  return rc;
}

int rn_join_scan_txn(rn_join *j, MDB_txn *txn, rn_scan_fn fn, void *ctx)
{
  join_scan s = { j, fn, ctx };
  j->reading = txn;
  int rc = scan_in(&s, txn, true);
  j->reading = NULL;
  return rc;
}

/* A scan reads a snapshot (snapshot.h), through which every helper here
 * then reads (j->reading). The cursors are closed on every path (LMDB frees
 * a read transaction's only when asked). The mappers and joiners it runs
 * are callbacks: they may read, but not change tables nor end the group
 * whose transaction it reads. */
int rn_join_scan(rn_rel *d, rn_scan_fn fn, void *ctx)
{
  rn_join *j = d->ctx;
  if (j->stream) return rn_err_set(err_of(j), RN_EINVAL, "%s: a stream join holds no rows", d->name);
  join_scan s = { j, fn, ctx };
  return rn_snapshot_read(d->p, d->name, &j->reading, scan_in, &s);
}

