/* join_apply.c — a change of a join's input applied (JOIN-1..3, join.h). */
#include "join_int.h"
#include "wb.h"

#include <stdlib.h>
#include <string.h>

/* ---- one left row: the step every change is made of ---- */

/* f as no right key. An fk is ~420 bytes (its inline part): zeroing or
 * copying whole ones showed in every change's profile, so only the fields
 * an absent key is read by are set. */
static void no_fk(fk *f)
{
  f->null = true;
  f->enc = NULL;
  f->len = f->part_len = 0;
}

/* *to = *from, copying of the inline part only the bytes it holds. */
static void copy_fk(fk *to, const fk *from)
{
  to->null = from->null;
  to->enc = from->enc;
  to->len = from->len;
  to->part_len = from->part_len;
  memcpy(to->part, from->part, from->part_len);
}

/* Do two left rows hold the same bytes in the columns of mask (a bit per
 * slot; bit 63: slot 63 and later)? */
static bool same_cols_bytes(rn_join *j, side *a, side *b, uint64_t mask)
{
  int ncols = j->left->schema->ncols, upto = 0;
  for (int c = 0; c < ncols && c < 64; c++) if (mask & (1ULL << c)) upto = c + 1;
  if (mask >> 63) upto = ncols;
  if (upto == 0) return true;
  const size_t *sa, *sb;
  if (rn_join_spans(j, j->left, a, upto, &sa) || rn_join_spans(j, j->left, b, upto, &sb)) return false;
  for (int c = 0; c < upto; c++) {
    if (!(mask & (1ULL << (c < 63 ? c : 63)))) continue;
    size_t n = sa[c + 1] - sa[c];
    if (n != sb[c + 1] - sb[c] || memcmp(a->row + sa[c], b->row + sb[c], n) != 0) return false;
  }
  return true;
}

/* The on columns as a mask, or what the mapper read of the row it was
 * last given (or would have read, when the memo answered for it); 0 with
 * *known false when that is not known. */
static uint64_t key_columns(rn_join *j, bool *known)
{
  uint64_t mask = 0;
  *known = true;
  if (j->on) {
    for (int i = 0; i < j->non; i++) mask |= 1ULL << (j->on[i] < 63 ? j->on[i] : 63);
    return mask;
  }
  if (j->mapper_column >= 0) return 1ULL << (j->mapper_column < 63 ? j->mapper_column : 63);
  if (j->fns.mapper && j->fns.mapper_reads) return j->mapper_read;
  *known = false;
  return 0;
}

/* The right keys of lb (before) and la (after): the second is not worked
 * out again (no mapper call) when the columns the first was made of kept
 * their bytes. */
static int left_fks(rn_join *j, side *lb, side *la, fk *fb, fk *fa)
{
  int rc = 0;
  uint64_t mask = 0;
  bool known = false;
  if (lb->row) {
    rc = rn_join_left_fk(j, lb, fb);
    mask = key_columns(j, &known);
  }
  if (rc || !la->row) return rc;
  if (lb->row && known && same_cols_bytes(j, lb, la, mask)) { copy_fk(fa, fb); return 0; }
  return rn_join_left_fk(j, la, fa);
}

/* A selector gave left row lid's result, for the keys it had, key k (of
 * id rid) where the key of id had was emitted. */
static int selector_moved(rn_join *j, uint64_t lid, const msgpack_sbuffer *k, uint64_t rid, uint64_t had)
{
  char kbuf[256], was[256];
  rn_join_key_text(j, k, kbuf, sizeof kbuf);
  rn_join_id_key_text(j, had, was, sizeof was);
  return rn_err_set(err_of(j), RN_EINVAL,
                    "%s: the selector gave the result of left row id %llu another key than before for the same "
                    "keys (key %s, id %llu; was key %s, id %llu): a selector must depend on its two keys alone",
                    j->out->name, (unsigned long long)lid, kbuf, (unsigned long long)rid, was, (unsigned long long)had);
}

/* Recomputes the result of left row lid from lb (before) to la (after),
 * keeping its index entry; undo is a right-side change the "before"
 * lookups must not see yet (self-joins), or NULL. A join that keeps
 * results reads the old one from the entry instead of making it again. */
int rn_join_left_step(rn_join *j, uint64_t lid, side *lb, side *la, const rn_change *undo)
{
  fk fb, fa;
  no_fk(&fb);
  no_fk(&fa);
  side rb = { 0 }, ra = { 0 }, ob = { 0 }, oa = { 0 };
  side *now_r = &ra; /* rb itself when it is the current row too: its offsets are walked once */
  msgpack_sbuffer kb, ka;
  msgpack_sbuffer_init(&kb);
  msgpack_sbuffer_init(&ka);
  uint64_t rid_b = 0, rid_a = 0;
  side stored = { 0 };
  bool kept = false, rb_read = false;
  int rc = left_fks(j, lb, la, &fb, &fa);
  if (!rc && lb->row) {
    rc = rn_join_index_entry(j, &fb, lid, &rid_b, j->keeps_results ? &stored : NULL, &kept);
    if (!rc && !kept && !j->lookup) rc = rn_join_right_before(j, &fb, undo, &rb), rb_read = true;
  }
  if (!rc && la->row) {
    /* The foreign key stayed and nothing undone hides the right row: the
     * row just read before the change is the current one (one read less). */
    if (rb_read && !undo && same_fk(&fb, &fa)) now_r = &rb;
    else rc = rn_join_right_current(j, &fa, &ra);
  }
  if (rc) goto out;
  /* Outer key joins: a side without a left row still has a right-only result. */
  if (j->kind == RN_JOIN_OUTER && !lb->row && la->row) rc = rn_join_right_before(j, &fa, undo, &rb), fb = fa;
  if (!rc && j->kind == RN_JOIN_OUTER && lb->row && !la->row) rc = rn_join_right_current(j, &fb, &ra), fa = fb;
  if (!rc && kept) ob = stored; /* what was emitted, without asking the source or joiner again */
  else if (!rc) rc = rn_join_make_result(j, lb, &rb, &fb, &ob);
  if (!rc) rc = rn_join_make_result(j, la, now_r, &fa, &oa);
  if (rc) goto out;
  if (ob.row) {
    uint64_t had = lb->row ? rid_b : 0; /* the id the entry says the result has */
    if (!rid_b || !lb->row || j->fns.selector) {
      if (!(rc = rn_join_result_key(j, lid, lb, &fb, &kb))) rc = rn_join_result_id(j, &kb, lid, true, &rid_b);
    }
    /* The old result's key, made again, must be the key it was emitted
     * under: else its sinks would get an UPDATE of an id never inserted
     * and the old id would stay theirs for ever. */
    if (!rc && j->fns.selector && had && rid_b != had) rc = selector_moved(j, lid, &kb, rid_b, had);
  }
  if (!rc && oa.row) {
    /* Without a selector the result key follows from the left key alone,
     * which an update keeps: the entry's id stays, wherever the fk moved. */
    if (!j->fns.selector && lb->row && la->row && rid_b) {
      rid_a = rid_b;
    } else if (!(rc = rn_join_result_key(j, lid, la, &fa, &ka))) {
      bool same_key = ob.row && kb.size == ka.size && memcmp(kb.data, ka.data, ka.size) == 0;
      rc = j->fns.selector ? rn_join_selected_key_check(j, la, &ka, &oa) : 0;
      if (!rc && same_key) rid_a = rid_b;
      else if (!rc) rc = rn_join_result_id(j, &ka, lid, true, &rid_a);
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
 * (JOIN-3); payloads are copied to scratch. out->items starts as
 * out->stack (NULL, or cap items of the caller's) and moves to the heap
 * when they are full. */
int rn_join_collect(rn_join *j, const fk *f, entries *out)
{
  rn_wb_iter cur;
  MDB_val from = { f->part_len, (void *)f->part }, k, v;
  int rc = rn_wb_iter_seek(&j->out->p->store, txn_of(j), j->index_dbi, &cur, &from, &k, &v);
  for (; rc == 0; rc = rn_wb_iter_next(&cur, &k, &v)) {
    if (k.mv_size != f->part_len + 8 || memcmp(k.mv_data, f->part, f->part_len) != 0) break;
    if (!rn_join_entry_whole(&v)) { rn_wb_iter_close(&cur); return rn_join_entry_damaged(j); }
    if (out->n == out->cap) {
      size_t cap = out->cap ? out->cap * 2 : 64;
      bool first = out->items == out->stack; /* grows off the caller's stack */
      entry *items = first ? malloc(cap * sizeof *items) : realloc(out->items, cap * sizeof *items);
      if (!items) { rn_wb_iter_close(&cur); return nomem(j); }
      if (first && out->n) memcpy(items, out->items, out->n * sizeof *items);
      out->items = items;
      out->cap = cap;
    }
    entry *e = &out->items[out->n++];
    e->lid = rn_be64_get((const char *)k.mv_data + f->part_len);
    memcpy(&e->rid, v.mv_data, 8);
    uint32_t llen;
    memcpy(&llen, (const char *)v.mv_data + 8, 4);
    e->kept = j->lookup || (llen & RN_JOIN_KEPT);
    e->len = llen & ~RN_JOIN_KEPT;
    e->res_len = v.mv_size - 12 - e->len;
    e->payload = rn_scratch_copy(j->out->p, (const char *)v.mv_data + 12, v.mv_size - 12);
    if (!e->payload) { rn_wb_iter_close(&cur); return nomem(j); }
  }
  rn_wb_iter_close(&cur);
  return rc == 0 || rc == MDB_NOTFOUND ? 0 : rn_store_fail(err_of(j), rc, j->out->name);
}

/* The current left row of an index entry: the entry holds it. */
void rn_join_left_row(const entry *e, side *l)
{
  *l = (side){ .row = e->len ? e->payload : NULL, .len = e->len };
}

/* The result an entry says it emitted; false when it does not say. */
bool rn_join_kept_result(const entry *e, side *res)
{
  *res = (side){ .row = e->res_len ? e->payload + e->len : NULL, .len = e->res_len };
  return e->kept;
}

/* Keeps the right copy of a derived right side current. */
int rn_join_right_copy(rn_join *j, const fk *ko, const fk *kn, const rn_change *c)
{
  if (j->right_native) return 0;
  int rc = 0;
  if (c->old && (!c->row || !same_fk(ko, kn))) {
    MDB_val k = { ko->len > RN_STORE_KEY_MAX ? ko->part_len : ko->len, (void *)(ko->len > RN_STORE_KEY_MAX ? ko->part : ko->enc) };
    rc = rn_wb_del(&j->out->p->store, txn_of(j), j->right_dbi, &k);
  }
  if (!rc && c->row) {
    MDB_val k = { kn->len > RN_STORE_KEY_MAX ? kn->part_len : kn->len, (void *)(kn->len > RN_STORE_KEY_MAX ? kn->part : kn->enc) };
    MDB_val v = { c->row_len, (void *)c->row };
    rc = rn_wb_put(&j->out->p->store, txn_of(j), j->right_dbi, &k, &v, 0);
  }
  return rc ? rn_store_fail(err_of(j), rc, j->out->name) : 0;
}

static bool same_result(const side *a, const side *b)
{
  if (!a->row || !b->row) return !a->row && !b->row;
  return a->len == b->len && memcmp(a->row, b->row, a->len) == 0;
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

/* A fan-out's left row lost its result: the key of id had is free again.
 * The key is made again, so it must still be that one (as the left step
 * checks): else the key that was emitted would stay lid's for ever, and
 * a later left row given it would fail as its second holder. */
static int release_result_key(rn_join *j, uint64_t lid, side *l, const fk *f, uint64_t had)
{
  msgpack_sbuffer k;
  msgpack_sbuffer_init(&k);
  uint64_t id = 0;
  int rc = rn_join_result_key(j, lid, l, f, &k);
  if (!rc) rc = rn_join_result_id(j, &k, lid, true, &id);
  if (!rc && id != had) rc = selector_moved(j, lid, &k, id, had);
  if (!rc) rc = rn_join_result_id(j, &k, lid, false, &id);
  msgpack_sbuffer_destroy(&k);
  return rc;
}

#define FANOUT_STACK 32

/* A right change: every left row that references the old or the new key
 * gets its result recomputed, in ascending left id (3); skip is a left id
 * already done (a self-join's own row). */
static int right_step(rn_join *j, const rn_change *c, uint64_t skip)
{
  side o = { .row = c->old, .len = c->old_len }, n = { .row = c->row, .len = c->row_len };
  fk ko, kn;
  no_fk(&ko);
  no_fk(&kn);
  int rc = 0;
  if (o.row) rc = rn_join_right_key(j, &o, &ko);
  if (!rc && n.row) rc = rn_join_right_key(j, &n, &kn);
  if (!rc) rc = rn_join_right_copy(j, &ko, &kn, c);
  if (rc || j->stream) return rc;
  entry first[FANOUT_STACK]; /* most keys have few left rows: no heap for them */
  size_t first_order[FANOUT_STACK];
  entries es = { first, 0, FANOUT_STACK, first };
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
  size_t *order = es.n <= FANOUT_STACK ? first_order : malloc(es.n * sizeof *order);
  if (!rc && !order) rc = nomem(j);
  for (size_t a = 0, b = from_old, k = 0; !rc && k < es.n; k++) {
    if (b >= es.n || (a < from_old && es.items[a].lid <= es.items[b].lid)) order[k] = a++;
    else order[k] = b++;
  }
  for (size_t q = 0; !rc && q < es.n; q++) {
    size_t i = order[q];
    const entry *e = &es.items[i];
    if (e->lid == skip) continue;
    side l;
    fk own;
    const fk *f;
    rn_join_left_row(e, &l);
    if (!l.row) continue;
    /* The entry sits under the fk part of the right key it references; a
     * hashed (long) fk part is checked against the row itself. */
    bool under_old = i < from_old;
    const fk *at = under_old ? &ko : &kn;
    if (at->part_len == at->len) f = at;
    else if ((rc = rn_join_left_fk(j, &l, &own))) break;
    else f = &own;
    /* o and n themselves, so their offsets are walked once for all results */
    side none_b = { 0 }, none_a = { 0 }, ob, oa;
    side *rb = o.row && same_fk(f, &ko) ? &o : &none_b, *ra = n.row && same_fk(f, &kn) ? &n : &none_a;
    if (!rb->row && !ra->row) continue; /* a long key's hash neighbour */
    bool kept = rn_join_kept_result(e, &ob); /* the joiner runs once per pair, not twice */
    if (!kept) rc = rn_join_make_result(j, &l, rb, f, &ob);
    if (!rc) rc = rn_join_make_result(j, &l, ra, f, &oa);
    uint64_t rid = e->rid;
    bool rewritten = false;
    if (!rc && oa.row && !rid) {
      msgpack_sbuffer k;
      msgpack_sbuffer_init(&k);
      if (!(rc = rn_join_result_key(j, e->lid, &l, f, &k))) rc = rn_join_selected_key_check(j, &l, &k, &oa);
      if (!rc) rc = rn_join_result_id(j, &k, e->lid, true, &rid);
      msgpack_sbuffer_destroy(&k);
      if (!rc && !(rc = rn_join_index_seek(j, f, e->lid))) rc = rn_join_index_put(j, f, e->lid, rid, &l, &oa);
      rewritten = true;
    }
    if (!rc && ob.row && oa.row && j->fns.selector && j->fns.joiner) { /* the key stays: ob's, checked when made */
      msgpack_sbuffer k;
      msgpack_sbuffer_init(&k);
      if (!(rc = rn_join_row_key(j, &ob, &k))) rc = rn_join_selected_key_check(j, &l, &k, &oa);
      msgpack_sbuffer_destroy(&k);
    }
    if (!rc && ob.row && !oa.row && j->fns.selector) { /* the key is free again */
      rc = release_result_key(j, e->lid, &l, f, rid);
      if (!rc && !(rc = rn_join_index_seek(j, f, e->lid))) rc = rn_join_index_put(j, f, e->lid, 0, &l, NULL);
      rewritten = true;
    }
    if (!rc && j->keeps_results && !rewritten && !same_result(&ob, &oa) && !(rc = rn_join_index_seek(j, f, e->lid)))
      rc = rn_join_index_put(j, f, e->lid, rid, &l, &oa); /* the entry keeps what is emitted */
    if (!rc) rc = rn_join_emit_result(j, rid, &ob, rid, &oa);
  }
  if (order != first_order) free(order);
  if (es.items != first) free(es.items);
  return rc;
}

/* ---- stream ⋈ table ---- */

static int stream_step(rn_join *j, const rn_change *c)
{
  side l = { .row = c->row, .len = c->row_len }, r = { 0 }, res;
  fk f = { .null = true };
  int rc = rn_join_left_fk(j, &l, &f);
  if (!rc) rc = rn_join_right_current(j, &f, &r);
  if (!rc) rc = rn_join_make_result(j, &l, &r, &f, &res);
  if (rc || !res.row) return rc; /* an event an inner join drops uses no id */
  rn_change out = { RN_INSERT, j->out->next_id++, res.row, res.len, NULL, 0 };
  j->out->count++; /* the ids given (store.h) */
  return rn_emit(j->out, &out);
}

static int apply_change(rn_join *j, rn_rel *from, const rn_change *c)
{
  if (j->stream) return from == j->left ? stream_step(j, c) : right_step(j, c, 0);
  if (from == j->left) {
    side lb = { .row = c->old, .len = c->old_len };
    side la = { .row = c->row, .len = c->row_len };
    int rc = rn_join_left_step(j, c->id, &lb, &la, from == j->right ? c : NULL);
    if (rc || from != j->right) return rc;
    return right_step(j, c, c->id); /* a self-join: then the rows that reference it */
  }
  return right_step(j, c, 0);
}

int rn_join_apply(rn_rel *d, rn_rel *from, const rn_change *c)
{
  rn_join *j = d->ctx;
  rn_join_fuse_begin(j);
  int rc = apply_change(j, from, c);
  j->projecting = false;
  return rc;
}

