/* index.c — rel:index{ cols… }: the rows of a table-like input kept in an
 * order in LMDB, for range reads, counts and ranks (index.h).
 *
 * Rules (INDEX-n in specs):
 * (1) The order is the top's (top.h: each column ascending or descending,
 *     null after every value either way), then row id ascending.
 * (2) The index is a relation: its rows and ids are the input's, its
 *     changes the input's, passed on as they came; rows() walks it in order.
 * (3) Reads go through a snapshot: inside a group they see its writes.
 * (4) Order values may be of any length, compared whole, in ranges and
 *     bounds too (longorder.h).
 *
 * State, "<prefix>" name (store.h): "ix:" |order key|u64 id BE| -> |row|
 * (an order key longer than a key holds: longorder.h),
 * and its declaration in "tp:" ("decl" -> [order slots, desc flags, order
 * key format]), so a changed order or encoding rebuilds it at open. */
#include "evolve_log.h"
#include "index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "key.h"
#include "longorder.h"
#include "ops.h"
#include "row.h"
#include "scan.h"
#include "snapshot.h"
#include "top.h"


typedef struct rn_index {
  rn_rel *out;
  MDB_dbi rows_dbi;       /* "ix:" */
  MDB_dbi decl_dbi;       /* "tp:" */
  rn_order order;
  int ncols;
  rn_longorder lo;        /* its long keys' (longorder.h) */
  msgpack_sbuffer kbuf;
} rn_index;

static int store_fail(rn_index *x, int rc)
{
  return rn_store_fail(&x->out->p->err, rc, x->out->name);
}

/* The error of rn_longorder_key's rc. */
static int longorder_fail(rn_rel *r, int rc)
{
  rn_pipeline *p = r->p;
  if (rc == RN_LONGORDER_DAMAGED)
    return rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: index \"%s\": an entry of its order does not decode",
                      p->store.path, r->name);
  if (rc == MDB_NOTFOUND)
    return rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: index \"%s\": %s deleted a row it never held",
                      p->store.path, r->name, r->input->name);
  if (rc == ENOMEM) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  return rn_store_fail(&p->err, rc, r->name);
}

/* The key of row (of id) in kbuf; *lng: a long one (longorder.h), whose
 * entry is found (place: or placed) in txn. */
static int row_key(rn_index *x, MDB_txn *txn, const char *row, size_t len, uint64_t id, bool place, bool *lng)
{
  rn_pipeline *p = x->out->p;
  const msgpack_object *vals = rn_row_unpack(row, len, x->ncols, &p->scratch);
  if (!vals) return rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: index \"%s\": a row of %s does not decode",
                               p->store.path, x->out->name, x->out->input->name);
  x->kbuf.size = 0;
  int bad = 0;
  if (rn_order_append(&x->order, vals, &x->kbuf, &bad) != 0)
    return rn_err_set(&p->err, RN_EINVAL, "%s: column \"%s\" of row id %llu is NaN: NaN has no place in an order",
                      x->out->name, x->out->input->schema->cols[bad].name, (unsigned long long)id);
  if (rn_group_oom(p, 0)) return p->err.code;
  *lng = x->kbuf.size > RN_LONGORDER_INLINE;
  if (*lng) {
    char key[RN_STORE_KEY_MAX];
    bool moved;
    int rc = rn_longorder_key(txn, &x->lo, x->kbuf.data, x->kbuf.size, id, place, key, &moved);
    if (rc) return longorder_fail(x->out, rc);
    x->kbuf.size = 0;
    rn_buf_write(&x->kbuf, key, sizeof key);
    return rn_group_oom(p, 0);
  }
  char idk[8];
  rn_be64_put(idk, id);
  rn_buf_write(&x->kbuf, idk, 8);
  return rn_group_oom(p, 0);
}

static int link_row(rn_index *x, MDB_txn *txn, uint64_t id, const char *row, size_t len, bool add)
{
  bool lng = false;
  int rc = row_key(x, txn, row, len, id, add, &lng);
  if (rc) return rc;
  MDB_val k = { x->kbuf.size, x->kbuf.data }, v = { len + (lng ? 8 : 0), (void *)row };
  if (!add) rc = mdb_del(txn, x->rows_dbi, &k, NULL);
  else if (!lng) rc = mdb_put(txn, x->rows_dbi, &k, &v, 0);
  else if (!(rc = mdb_put(txn, x->rows_dbi, &k, &v, MDB_RESERVE))) { /* the row, then its id (longorder.h) */
    memcpy(v.mv_data, row, len);
    rn_be64_put((char *)v.mv_data + len, id);
  }
  if (rc == MDB_NOTFOUND)
    return rn_err_set(&x->out->p->err, RN_ESTORE, "state damaged: %s: index \"%s\": %s deleted a row it never held",
                      x->out->p->store.path, x->out->name, x->out->input->name);
  return rc ? store_fail(x, rc) : 0;
}

/* The apply (ops.h): the old row's entry out, the new one's in, then the
 * change passed on (2). */
static int index_apply(rn_rel *r, rn_rel *from, const rn_change *c)
{
  (void)from;
  rn_index *x = r->ctx;
  MDB_txn *txn = r->p->store.wtxn;
  int rc = c->old ? link_row(x, txn, c->id, c->old, c->old_len, false) : 0;
  if (!rc && c->row) rc = link_row(x, txn, c->id, c->row, c->row_len, true);
  if (rc) return rc;
  r->count += (c->row ? 1 : 0) - (c->old ? 1 : 0);
  return rn_emit(r, c);
}

/* ---- reads ---- */

typedef struct walk {
  rn_index *x;
  rn_index_walk w;
} walk;

int rn_index_encode_bound(const rn_order *o, const rn_schema *s, rn_index_bound *b, msgpack_zone *z,
                          msgpack_sbuffer *out, const char *what, rn_err *e)
{
  if (!b || b->n == 0) return 0;
  if (b->n > o->n)
    return rn_err_set(e, RN_EINVAL, "%s: a bound of %d values for an order of %d columns", what, b->n, o->n);
  for (int i = 0; i < b->n; i++) {
    const rn_column *col = &s->cols[o->slots[i]];
    if (b->vals[i].type != MSGPACK_OBJECT_NIL && rn_value_normalize(col, &b->vals[i], z, what, e)) return e->code;
    if (rn_order_append_one(o, i, &b->vals[i], out) != 0)
      return rn_err_set(e, RN_EINVAL, "%s: a bound on \"%s\" is NaN", what, col->name);
  }
  return 0;
}

/* Encodes b into a malloc'd buffer (the caller frees it): not in scratch,
 * which a walk outside a group clears after each row while it still
 * compares every key with the bound. */
static int encode_bound(rn_index *x, rn_index_bound *b, const char **out, size_t *len)
{
  rn_pipeline *p = x->out->p;
  *out = NULL;
  *len = 0;
  if (!b || b->n == 0) return 0;
  x->kbuf.size = 0;
  int rc = rn_index_encode_bound(&x->order, x->out->schema, b, &p->scratch, &x->kbuf, x->out->name, &p->err);
  if (rc || rn_group_oom(p, 0)) return p->err.code;
  char *copy = malloc(x->kbuf.size ? x->kbuf.size : 1);
  if (!copy) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  memcpy(copy, x->kbuf.data, x->kbuf.size);
  *out = copy;
  *len = x->kbuf.size;
  return 0;
}

/* Whether key k (an entry's, or its whole order key then id) sorts after
 * the bound to (inclusive of rows whose values start with to's). */
static bool past(const rn_index_walk *w, const MDB_val *k)
{
  if (!w->to) return false;
  size_t n = k->mv_size < w->to_len ? k->mv_size : w->to_len;
  int c = memcmp(k->mv_data, w->to, n);
  return c > 0 || (c == 0 && k->mv_size < w->to_len);
}

/* Whether k (as above) sorts before the bound from. */
static bool before_from(const rn_index_walk *w, const MDB_val *k)
{
  return memcmp(k->mv_data, w->from, k->mv_size < w->from_len ? k->mv_size : w->from_len) < 0;
}

/* Whether the walk ends before key k (as above). */
static bool walk_ends(const rn_index_walk *w, const MDB_val *k)
{
  if (!w->before) return past(w, k);
  return !before_from(w, k);
}

int rn_index_walk_db(MDB_txn *txn, MDB_dbi dbi, rn_index_walk *w, int *lmdb_rc)
{
  MDB_cursor *cur;
  *lmdb_rc = mdb_cursor_open(txn, dbi, &cur);
  if (*lmdb_rc) return *lmdb_rc;
  int rc = 0;
  uint64_t skipped = 0;
  /* a long entry's key holds its order key's first RN_LONGORDER_INLINE
   * bytes (longorder.h): a longer from seeks there, then skips on */
  size_t seek = w->before || !w->from ? 0 : w->from_len < RN_LONGORDER_INLINE ? w->from_len : RN_LONGORDER_INLINE;
  bool skip_before = seek < w->from_len && !w->before;
  rn_longorder lo = { .order = w->order, .ncols = w->ncols };
  msgpack_sbuffer full;
  msgpack_sbuffer_init(&full);
  msgpack_zone z;
  bool zoned = false;
  MDB_val k = { seek, (void *)(seek ? w->from : NULL) }, v;
  int mrc = k.mv_size ? mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE) : mdb_cursor_get(cur, &k, &v, MDB_FIRST);
  for (; !rc && mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    uint64_t id;
    size_t len = v.mv_size;
    MDB_val at = k; /* what the bounds compare with */
    if (k.mv_size < 8) { mrc = MDB_CORRUPTED; break; }
    if (rn_longorder_entry(&k, &v, 0, &id, &len)) {
      if (w->order && (w->from || w->to)) {
        if (!zoned && !(zoned = rn_zone_init(&z, 1024))) { mrc = ENOMEM; break; }
        msgpack_zone_clear(&z);
        full.size = 0;
        char idk[8];
        rn_be64_put(idk, id);
        if (rn_longorder_full(&lo, v.mv_data, len, &z, &full) != 0) { mrc = rn_oom() ? ENOMEM : MDB_CORRUPTED; break; }
        rn_buf_write(&full, idk, 8);
        if (rn_oom()) { mrc = ENOMEM; break; }
        at = (MDB_val){ full.size, full.data };
      }
    } else id = rn_be64_get((const char *)k.mv_data + k.mv_size - 8);
    if (skip_before && before_from(w, &at)) continue;
    if (walk_ends(w, &at)) break;
    if (skipped < w->offset) { skipped++; continue; }
    if (w->limit && w->count == w->limit) break;
    w->count++;
    if (!w->fn) continue;
    const char *row = v.mv_data;
    if (w->zone && !(row = rn_zone_malloc_no_align(w->zone, len ? len : 1))) {
      mrc = ENOMEM;
      break;
    }
    if (w->zone) memcpy((char *)row, v.mv_data, len); /* fn may read on */
    rc = w->fn(w->ctx, id, row, len);
    if (w->zone && w->clear_zone) msgpack_zone_clear(w->zone);
  }
  mdb_cursor_close(cur);
  msgpack_sbuffer_destroy(&full);
  if (zoned) rn_zone_destroy(&z);
  *lmdb_rc = mrc == MDB_NOTFOUND ? 0 : mrc;
  return rc ? rc : *lmdb_rc;
}

static int walk_in(void *ctx, MDB_txn *txn, bool own_scratch)
{
  walk *wk = ctx;
  rn_pipeline *p = wk->x->out->p;
  wk->w.zone = &p->scratch;
  wk->w.clear_zone = own_scratch;
  int lmdb_rc, rc = rn_index_walk_db(txn, wk->x->rows_dbi, &wk->w, &lmdb_rc);
  if (rc && rc != lmdb_rc) return rc; /* the callback's error: the cursor's next step after it may only echo it */
  return lmdb_rc == ENOMEM ? rn_err_set(&p->err, RN_ENOMEM, "out of memory") : lmdb_rc ? store_fail(wk->x, lmdb_rc) : rc;
}

static int run_walk(rn_rel *ix, walk *wk, rn_index_bound *from, rn_index_bound *to)
{
  rn_pipeline *p = ix->p;
  if (ix->kind != RN_REL_INDEX) return rn_err_set(&p->err, RN_EMISUSE, "%s is no index", ix->name);
  wk->x = ix->ctx;
  int rc = encode_bound(wk->x, from, &wk->w.from, &wk->w.from_len);
  if (!rc) rc = encode_bound(wk->x, to, &wk->w.to, &wk->w.to_len);
  wk->w.order = &wk->x->order;
  wk->w.ncols = wk->x->ncols;
  if (!rc) rc = rn_snapshot_read(p, ix->name, NULL, walk_in, wk);
  free((char *)wk->w.from);
  free((char *)wk->w.to);
  return rc;
}

int rn_index_range(rn_rel *ix, rn_index_bound *from, rn_index_bound *to, uint64_t offset, uint64_t limit,
                   rn_index_fn fn, void *ctx)
{
  walk wk = { .w = { .offset = offset, .limit = limit, .fn = fn, .ctx = ctx } };
  return run_walk(ix, &wk, from, to);
}

int rn_index_count(rn_rel *ix, rn_index_bound *from, rn_index_bound *to, uint64_t *count)
{
  walk wk = { 0 };
  int rc = run_walk(ix, &wk, from, to);
  *count = wk.w.count;
  return rc;
}

int rn_index_rank(rn_rel *ix, rn_index_bound *at, uint64_t *rank)
{
  walk wk = { .w = { .before = true } };
  int rc = run_walk(ix, &wk, at, NULL);
  *rank = wk.w.count + 1;
  return rc;
}

const rn_order *rn_index_order(const rn_rel *ix)
{
  return ix->kind == RN_REL_INDEX ? &((const rn_index *)ix->ctx)->order : NULL;
}

/* The scan (ops.h): the rows in index order. */
static int index_scan(rn_rel *r, rn_scan_fn fn, void *ctx)
{
  walk wk = { .x = r->ctx, .w = { .fn = fn, .ctx = ctx } };
  return rn_snapshot_read(r->p, r->name, NULL, walk_in, &wk);
}

/* ---- state ---- */

/* Records the order under "decl"; *changed when another one was stored. */
static int record_decl(rn_index *x, MDB_txn *txn, bool *changed)
{
  msgpack_sbuffer d;
  msgpack_sbuffer_init(&d);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &d, rn_buf_write);
  msgpack_pack_array(&pk, 3);
  msgpack_pack_array(&pk, (size_t)x->order.n);
  for (int i = 0; i < x->order.n; i++) msgpack_pack_int(&pk, x->order.slots[i]);
  msgpack_pack_array(&pk, (size_t)x->order.n);
  for (int i = 0; i < x->order.n; i++) x->order.desc[i] ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
  msgpack_pack_int(&pk, RN_ORDER_FORMAT);
  static char decl_key[] = "decl";
  MDB_val k = { 4, decl_key }, v;
  int rc = mdb_get(txn, x->decl_dbi, &k, &v);
  *changed = rc == 0 && (v.mv_size != d.size || memcmp(v.mv_data, d.data, d.size) != 0);
  if (rc == 0 || rc == MDB_NOTFOUND) {
    v.mv_size = d.size;
    v.mv_data = d.data;
    rc = rn_group_oom(x->out->p, 0) ? -1 : mdb_put(txn, x->decl_dbi, &k, &v, 0);
  }
  msgpack_sbuffer_destroy(&d);
  if (rc == -1) return x->out->p->err.code;
  return rc ? store_fail(x, rc) : 0;
}

int rn_index_decl_decode(const char *data, size_t len, int ncols, rn_order *o)
{
  msgpack_zone z;
  if (!rn_zone_init(&z, 256)) return -1;
  msgpack_object d;
  size_t off = 0;
  int ok = rn_msgpack_size(data, len) == len && rn_unpack(data, len, &off, &z, &d) == MSGPACK_UNPACK_SUCCESS &&
           d.type == MSGPACK_OBJECT_ARRAY && d.via.array.size == 3 &&
           d.via.array.ptr[2].type == MSGPACK_OBJECT_POSITIVE_INTEGER && d.via.array.ptr[2].via.u64 == RN_ORDER_FORMAT;
  const msgpack_object *slots = ok ? &d.via.array.ptr[0] : NULL, *desc = ok ? &d.via.array.ptr[1] : NULL;
  ok = ok && slots->type == MSGPACK_OBJECT_ARRAY && desc->type == MSGPACK_OBJECT_ARRAY &&
       slots->via.array.size == desc->via.array.size && slots->via.array.size >= 1 &&
       slots->via.array.size <= RN_TOP_COLS;
  for (uint32_t i = 0; ok && i < slots->via.array.size; i++) {
    const msgpack_object *sl = &slots->via.array.ptr[i], *de = &desc->via.array.ptr[i];
    ok = sl->type == MSGPACK_OBJECT_POSITIVE_INTEGER && sl->via.u64 < (uint64_t)ncols &&
         de->type == MSGPACK_OBJECT_BOOLEAN;
    if (ok) {
      o->slots[i] = (int)sl->via.u64;
      o->desc[i] = de->via.boolean;
    }
  }
  if (ok) o->n = (int)slots->via.array.size;
  rn_zone_destroy(&z);
  return ok ? 0 : -1;
}

static int rebuild_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  rn_index *x = ctx;
  int rc = link_row(x, x->out->p->store.wtxn, id, row, len, true);
  if (!rc) x->out->count++;
  msgpack_zone_clear(&x->out->p->scratch);
  return rc;
}

static int setup_state(void *ctx, bool created, bool rebuild_it)
{
  (void)created;
  rn_index *x = ctx;
  rn_pipeline *p = x->out->p;
  MDB_txn *txn = p->store.wtxn;
  bool changed = false;
  int rc = rn_state_dbi(p, txn, RN_DB_INDEX, x->out->name, 0, &x->rows_dbi);
  x->lo = (rn_longorder){ .dbi = { x->rows_dbi }, .ndbi = 1, .order = &x->order, .ncols = x->ncols };
  if (!rc) rc = rn_state_dbi(p, txn, RN_DB_TOP_DECL, x->out->name, 0, &x->decl_dbi);
  if (!rc) rc = record_decl(x, txn, &changed);
  if (!rc) rc = rn_order_record_input(x->out, txn, x->decl_dbi, &changed);
  if (rc || !(rebuild_it || changed)) return rc;
  if ((rc = rn_rebuild_before(x->out))) return rc; /* its rows as its sinks were told (evolve_log.h) */
  if ((rc = mdb_drop(txn, x->rows_dbi, 0))) return store_fail(x, rc);
  x->out->count = 0;
  rc = rn_rel_scan(x->out->input, rebuild_row, x);
  return rc ? rc : rn_rebuild_after(x->out);
}

static void free_index(void *ctx)
{
  rn_index *x = ctx;
  msgpack_sbuffer_destroy(&x->kbuf);
  free(x);
}

int rn_declare_index(rn_pipeline *p, const char *name, rn_rel *in, int n, const char *const *cols,
                     const bool *desc, rn_rel **out)
{
  if (rn_check_not_lookup(p, name, "index", in)) return p->err.code;
  if (!in->tablelike)
    return rn_err_set(&p->err, RN_EINVAL,
                      "%s: index needs a table-like relation (a table, or a relation derived from one); "
                      "%s is a stream", name, in->name);
  rn_index *x = calloc(1, sizeof *x);
  if (!x) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  msgpack_sbuffer_init(&x->kbuf);
  x->ncols = in->schema->ncols;
  rn_schema *s = rn_schema_new();
  int rc = rn_order_resolve(p, name, in->schema, n, cols, desc, &x->order);
  if (!rc && !s) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (!rc) rc = rn_schema_copy_columns(s, in->schema, false, &p->err);
  if (rc) {
    rn_schema_free(s);
    free_index(x);
    return rc;
  }
  rn_rel *r = NULL;
  rc = rn_declare_derived(p, name, RN_REL_INDEX, in, s, x, &r);
  if (rc) return rc;
  x->out = r;
  r->persistent = r->stateful = true;
  rc = rn_open_derived_state(p, r, setup_state, x);
  if (rc) {
    in->noutputs--;
    rn_rel_discard_last(p);
    return rc;
  }
  *out = r;
  return 0;
}

const rn_rel_ops rn_index_ops = { .name = "index", .apply = index_apply, .scan = index_scan, .free = free_index };
