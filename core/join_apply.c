/* join_apply.c — a change of a join's input applied (JOIN-1..3, join.h). */
#include "join_int.h"
#include "wb.h"

#include <stdlib.h>
#include <string.h>

/* ---- one left row: the step every change is made of ---- */

/* Do two left rows hold the same bytes in the on columns? Then they point
 * at the same right key, and the second need not be worked out again. */
static bool same_on_bytes(rn_join *j, const side *a, const side *b)
{
  if (!j->on) return false;
  int ncols = j->left->schema->ncols;
  size_t sa[j->on_upto + 1], sb[j->on_upto + 1];
  if (rn_row_spans(a->row, a->len, ncols, j->on_upto, sa) || rn_row_spans(b->row, b->len, ncols, j->on_upto, sb))
    return false;
  for (int i = 0; i < j->non; i++) {
    int c = j->on[i];
    size_t n = sa[c + 1] - sa[c];
    if (n != sb[c + 1] - sb[c] || memcmp(a->row + sa[c], b->row + sb[c], n) != 0) return false;
  }
  return true;
}

/* Recomputes the result of left row lid from lb (before) to la (after),
 * keeping its index entry; undo is a right-side change the "before"
 * lookups must not see yet (self-joins), or NULL. */
int rn_join_left_step(rn_join *j, uint64_t lid, side *lb, side *la, const rn_change *undo)
{
  fk fb = { .null = true }, fa = { .null = true };
  side rb = { 0 }, ra = { 0 }, ob = { 0 }, oa = { 0 };
  msgpack_sbuffer kb, ka;
  msgpack_sbuffer_init(&kb);
  msgpack_sbuffer_init(&ka);
  uint64_t rid_b = 0, rid_a = 0;
  int rc = 0;
  side stored = { 0 };
  if (lb->row) {
    if (!(rc = rn_join_left_fk(j, lb, &fb)) && !(rc = rn_join_index_entry(j, &fb, lid, &rid_b, j->lookup ? &stored : NULL)) &&
        !j->lookup)
      rc = rn_join_right_before(j, &fb, undo, &rb);
  }
  if (!rc && la->row) {
    if (lb->row && same_on_bytes(j, lb, la)) fa = fb;
    else rc = rn_join_left_fk(j, la, &fa);
  }
  if (!rc && la->row) {
    /* The foreign key stayed and nothing undone hides the right row: the
     * row just read before the change is the current one (one read less). */
    if (lb->row && !undo && !j->lookup && same_fk(&fb, &fa)) ra = rb;
    else rc = rn_join_right_current(j, &fa, &ra);
  }
  if (rc) goto out;
  /* Outer key joins: a side without a left row still has a right-only result. */
  if (j->kind == RN_JOIN_OUTER && !lb->row && la->row) rc = rn_join_right_before(j, &fa, undo, &rb), fb = fa;
  if (!rc && j->kind == RN_JOIN_OUTER && lb->row && !la->row) rc = rn_join_right_current(j, &fb, &ra), fa = fb;
  if (!rc && j->lookup) ob = stored; /* what was emitted, without asking the source again */
  else if (!rc) rc = rn_join_make_result(j, lb, &rb, &fb, &ob);
  if (!rc) rc = rn_join_make_result(j, la, &ra, &fa, &oa);
  if (rc) goto out;
  if (ob.row) {
    if (!rid_b || !lb->row || j->fns.selector) {
      if (!(rc = rn_join_result_key(j, lid, lb, &fb, &kb))) rc = rn_join_result_id(j, &kb, lid, true, &rid_b);
    }
  }
  if (!rc && oa.row) {
    /* Without a selector the result key follows from the left key alone,
     * which an update keeps: the entry's id stays, wherever the fk moved. */
    if (!j->fns.selector && lb->row && la->row && rid_b) {
      rid_a = rid_b;
    } else if (!(rc = rn_join_result_key(j, lid, la, &fa, &ka))) {
      bool same_key = ob.row && kb.size == ka.size && memcmp(kb.data, ka.data, ka.size) == 0;
      if (same_key) rid_a = rid_b;
      else rc = rn_join_result_id(j, &ka, lid, true, &rid_a);
    }
  }
  if (rc) goto out;
  if (j->fns.selector && ob.row && (!oa.row || rid_a != rid_b)) rc = rn_join_result_id(j, &kb, lid, false, &rid_b);
  /* Index: the entry moves with the foreign key and is rewritten on every
   * change, since it holds the left row (and a lookup join's result). */
  if (!rc && lb->row && (!la->row || !same_fk(&fb, &fa))) rc = rn_join_index_del(j, &fb, lid);
  if (!rc && la->row) {
    /* The entry keeps the id of the row's result key: for ever when that
     * key is fixed (default, key join), only while it exists with a selector. */
    uint64_t keep = oa.row ? rid_a : j->fns.selector ? 0 : rid_b;
    rc = rn_join_index_put(j, &fa, lid, keep, la, &oa);
  }
  if (!rc) rc = rn_join_emit_result(j, rid_b, &ob, rid_a, &oa);
out:
  msgpack_sbuffer_destroy(&kb);
  msgpack_sbuffer_destroy(&ka);
  return rc;
}

/* ---- the right side: fan-out ---- */

/* Appends to out every index entry of right key f, in ascending left id
 * (JOIN-3); payloads are copied to scratch. */
int rn_join_collect(rn_join *j, const fk *f, entries *out)
{
  rn_wb_iter cur;
  MDB_val from = { f->part_len, (void *)f->part }, k, v;
  int rc = rn_wb_iter_seek(&j->out->p->store, txn_of(j), j->index_dbi, &cur, &from, &k, &v);
  for (; rc == 0; rc = rn_wb_iter_next(&cur, &k, &v)) {
    if (k.mv_size != f->part_len + 8 || memcmp(k.mv_data, f->part, f->part_len) != 0) break;
    if (out->n == out->cap) {
      size_t cap = out->cap ? out->cap * 2 : 64;
      entry *items = realloc(out->items, cap * sizeof *items);
      if (!items) { rn_wb_iter_close(&cur); return nomem(j); }
      out->items = items;
      out->cap = cap;
    }
    entry *e = &out->items[out->n++];
    e->lid = rn_be64_get((const char *)k.mv_data + f->part_len);
    memcpy(&e->rid, v.mv_data, 8);
    uint32_t llen;
    memcpy(&llen, (const char *)v.mv_data + 8, 4);
    e->len = llen;
    e->payload = rn_scratch_copy(j->out->p, (const char *)v.mv_data + 12, e->len);
    if (!e->payload) { rn_wb_iter_close(&cur); return nomem(j); }
  }
  rn_wb_iter_close(&cur);
  return rc == 0 || rc == MDB_NOTFOUND ? 0 : rn_store_fail(err_of(j), rc, j->out->name);
}

/* The current left row of an index entry: the entry holds it. */
void rn_join_left_row(const entry *e, side *l)
{
  l->row = e->len ? e->payload : NULL;
  l->len = e->len;
  l->vals = NULL;
}

/* Keeps the right copy of a derived right side current. */
int rn_join_right_copy(rn_join *j, const fk *ko, const fk *kn, const rn_change *c)
{
  if (j->right_native) return 0;
  int rc = 0;
  if (c->old && (!c->row || !same_fk(ko, kn))) {
    MDB_val k = { ko->len > 511 ? ko->part_len : ko->len, (void *)(ko->len > 511 ? ko->part : ko->enc) };
    rc = rn_wb_del(&j->out->p->store, txn_of(j), j->right_dbi, &k);
  }
  if (!rc && c->row) {
    MDB_val k = { kn->len > 511 ? kn->part_len : kn->len, (void *)(kn->len > 511 ? kn->part : kn->enc) };
    MDB_val v = { c->row_len, (void *)c->row };
    rc = rn_wb_put(&j->out->p->store, txn_of(j), j->right_dbi, &k, &v, 0);
  }
  return rc ? rn_store_fail(err_of(j), rc, j->out->name) : 0;
}

/* Outer key join: a right key no left row holds has a right-only result. */
static int right_only(rn_join *j, const fk *f, side *o, side *n)
{
  side none = { 0 }, ro = { 0 }, rn = { 0 };
  int rc = rn_join_make_result(j, &none, o, f, &ro);
  if (!rc) rc = rn_join_make_result(j, &none, n, f, &rn);
  if (rc || (!ro.row && !rn.row)) return rc;
  msgpack_sbuffer k;
  msgpack_sbuffer_init(&k);
  rn_buf_write(&k, f->enc, f->len);
  uint64_t rid;
  rc = rn_join_result_id(j, &k, 0, false, &rid);
  msgpack_sbuffer_destroy(&k);
  return rc ? rc : rn_join_emit_result(j, rid, &ro, rid, &rn);
}

/* A right change: every left row that references the old or the new key
 * gets its result recomputed, in ascending left id (3); skip is a left id
 * already done (a self-join's own row). */
static int right_step(rn_join *j, const rn_change *c, uint64_t skip)
{
  side o = { c->old, c->old_len, NULL }, n = { c->row, c->row_len, NULL };
  fk ko = { .null = true }, kn = { .null = true };
  int rc = 0;
  if (o.row) rc = rn_join_right_key(j, &o, &ko);
  if (!rc && n.row) rc = rn_join_right_key(j, &n, &kn);
  if (!rc) rc = rn_join_right_copy(j, &ko, &kn, c);
  if (rc || j->stream) return rc;
  entries es = { NULL, 0, 0 };
  if (o.row) rc = rn_join_collect(j, &ko, &es);
  size_t from_old = es.n;
  if (!rc && n.row && !(o.row && same_fk(&ko, &kn))) rc = rn_join_collect(j, &kn, &es);
  if (!rc && j->kind == RN_JOIN_OUTER) {
    if (o.row && n.row && same_fk(&ko, &kn)) { if (es.n == 0) rc = right_only(j, &ko, &o, &n); }
    else {
      side none = { 0 };
      if (o.row && from_old == 0) rc = right_only(j, &ko, &o, &none);
      if (!rc && n.row && es.n == from_old) rc = right_only(j, &kn, &none, &n);
    }
  }
  /* Each key's entries come in ascending left id; a right row whose key
   * moved (a derived right side) has two runs: merge them (3). */
  size_t *order = es.n ? malloc(es.n * sizeof *order) : NULL;
  if (!rc && es.n && !order) rc = nomem(j);
  for (size_t a = 0, b = from_old, k = 0; !rc && k < es.n; k++) {
    if (b >= es.n || (a < from_old && es.items[a].lid <= es.items[b].lid)) order[k] = a++;
    else order[k] = b++;
  }
  for (size_t q = 0; !rc && q < es.n; q++) {
    size_t i = order[q];
    const entry *e = &es.items[i];
    if (e->lid == skip) continue;
    side l;
    fk f;
    rn_join_left_row(e, &l);
    if (!l.row) continue;
    /* The entry sits under the fk part of the right key it references; a
     * hashed (long) fk part is checked against the row itself. */
    bool under_old = i < from_old;
    const fk *at = under_old ? &ko : &kn;
    if (at->part_len == at->len) f = *at;
    else if ((rc = rn_join_left_fk(j, &l, &f))) break;
    side rb = { 0 }, ra = { 0 }, ob, oa;
    if (o.row && same_fk(&f, &ko)) rb = o;
    if (n.row && same_fk(&f, &kn)) ra = n;
    if (!rb.row && !ra.row) continue; /* a long key's hash neighbour */
    rc = rn_join_make_result(j, &l, &rb, &f, &ob);
    if (!rc) rc = rn_join_make_result(j, &l, &ra, &f, &oa);
    uint64_t rid = e->rid;
    if (!rc && oa.row && !rid) {
      msgpack_sbuffer k;
      msgpack_sbuffer_init(&k);
      if (!(rc = rn_join_result_key(j, e->lid, &l, &f, &k))) rc = rn_join_result_id(j, &k, e->lid, true, &rid);
      msgpack_sbuffer_destroy(&k);
      if (!rc) rc = rn_join_index_put(j, &f, e->lid, rid, &l, &oa);
    }
    if (!rc && ob.row && !oa.row && j->fns.selector) { /* the key is free again */
      msgpack_sbuffer k;
      msgpack_sbuffer_init(&k);
      uint64_t ignored;
      if (!(rc = rn_join_result_key(j, e->lid, &l, &f, &k))) rc = rn_join_result_id(j, &k, e->lid, false, &ignored);
      msgpack_sbuffer_destroy(&k);
      if (!rc) rc = rn_join_index_put(j, &f, e->lid, 0, &l, NULL);
    }
    if (!rc) rc = rn_join_emit_result(j, rid, &ob, rid, &oa);
  }
  free(order);
  free(es.items);
  return rc;
}

/* ---- stream ⋈ table ---- */

static int stream_step(rn_join *j, const rn_change *c)
{
  side l = { c->row, c->row_len, NULL }, r = { 0 }, res;
  fk f = { .null = true };
  int rc = rn_join_left_fk(j, &l, &f);
  if (!rc) rc = rn_join_right_current(j, &f, &r);
  if (!rc) rc = rn_join_make_result(j, &l, &r, &f, &res);
  if (rc || !res.row) return rc; /* an event an inner join drops uses no id */
  rn_change out = { RN_INSERT, j->out->next_id++, res.row, res.len, NULL, 0 };
  return rn_emit(j->out, &out);
}

int rn_join_apply(rn_rel *d, rn_rel *from, const rn_change *c)
{
  rn_join *j = d->ctx;
  if (j->stream) return from == j->left ? stream_step(j, c) : right_step(j, c, 0);
  if (from == j->left) {
    side lb = { c->old, c->old_len, NULL };
    side la = { c->row, c->row_len, NULL };
    int rc = rn_join_left_step(j, c->id, &lb, &la, from == j->right ? c : NULL);
    if (rc || from != j->right) return rc;
    return right_step(j, c, c->id); /* a self-join: then the rows that reference it */
  }
  return right_step(j, c, 0);
}

