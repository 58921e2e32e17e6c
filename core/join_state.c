/* join_state.c — a join's keys, right rows, results and fan-out index (join_int.h). */
#include "join_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "longkey.h"
#include "lookup.h"
#include "wb.h"

static const msgpack_object *decode(rn_join *j, rn_rel *r, const char *row, size_t len)
{
  return row ? rn_row_unpack(row, len, r->schema->ncols, zone_of(j)) : NULL;
}

static const msgpack_object *vals_of(rn_join *j, rn_rel *r, side *s)
{
  if (!s->vals && s->row) s->vals = decode(j, r, s->row, s->len);
  return s->vals;
}

/* rn_join_spans of a side not walked as far as upto yet (join_int.h). */
int rn_join_spans_walk(rn_join *j, rn_rel *of, side *s, int upto, const size_t **starts)
{
  int ncols = of->schema->ncols, walk = upto, reads = of == j->left ? j->on_upto : 0;
  if (j->projecting && j->fuse) {
    int fused = of == j->left ? j->fuse->lupto : j->fuse->rupto;
    if (fused > reads) reads = fused;
  }
  if (reads > walk && reads <= ncols) walk = reads;
  size_t *at = rn_zone_malloc(zone_of(j), sizeof *at * (size_t)(walk + 1));
  if (!at) return nomem(j);
  if (rn_row_spans(s->row, s->len, ncols, walk, at) != 0) {
    /* a value past upto that does not decode fails only a caller reading it */
    if (walk == upto || rn_row_spans(s->row, s->len, ncols, upto, at) != 0) return 1;
    walk = upto;
  }
  s->starts = *starts = at;
  s->walked = walk;
  return 0;
}

/* The values of the given slots of a row (its key or foreign key
 * columns), decoded alone: a scalar from its bytes, anything else by
 * msgpack. 1 when the row does not decode; RN_ENOMEM (noted). */
static int read_slots(rn_join *j, rn_rel *r, side *s, const int *slots, int n, msgpack_object *out)
{
  int upto = 0;
  for (int i = 0; i < n; i++) if (slots[i] + 1 > upto) upto = slots[i] + 1;
  const size_t *starts;
  int rc = rn_join_spans(j, r, s, upto, &starts);
  if (rc) return rc;
  for (int i = 0; i < n; i++) {
    const char *v = s->row + starts[slots[i]];
    size_t sz = starts[slots[i] + 1] - starts[slots[i]], off = 0;
    if (!rn_scalar_object((const unsigned char *)v, sz, &out[i]) &&
        rn_unpack(v, sz, &off, zone_of(j), &out[i]) != MSGPACK_UNPACK_SUCCESS)
      return 1;
  }
  return 0;
}

/* read_slots, saying which row did not decode. */
static int slot_values(rn_join *j, rn_rel *r, side *s, const int *slots, int n, msgpack_object *out)
{
  int rc = read_slots(j, r, s, slots, n, out);
  if (rc == 1) return rn_err_set(err_of(j), RN_ESTORE, "%s: a row of %s could not be decoded", j->out->name, r->name);
  return rc;
}

/* f->part from f->enc: the encoding itself, or for a long one its first
 * RN_JOIN_FK_INLINE bytes and a hash (join.h). */
void rn_join_set_part(fk *f)
{
  if (f->null) {
    f->part[0] = RN_KEY_NULL;
    f->part_len = 1;
  } else if (f->len <= RN_JOIN_FK_INLINE) {
    memcpy(f->part, f->enc, f->len);
    f->part_len = f->len;
  } else {
    memcpy(f->part, f->enc, RN_JOIN_FK_INLINE);
    rn_be64_put(f->part + RN_JOIN_FK_INLINE, rn_hash64(f->enc, f->len));
    f->part_len = sizeof f->part;
  }
}

static int keep_encoding(rn_join *j, fk *f, const msgpack_sbuffer *b)
{
  f->null = false;
  f->len = b->size;
  f->enc = rn_scratch_copy(j->out->p, b->data, b->size);
  if (!f->enc) return nomem(j);
  rn_join_set_part(f);
  return 0;
}

/* A value of on column on[i] that is no key of the right side: the error
 * (said of the right key column, under the right relation's name) names
 * the left column the user wrote too. */
static int on_value_error(rn_join *j, const int *on, int i)
{
  rn_err *e = err_of(j);
  return rn_err_set_with(e, e->code, e->msg, "%s: column \"%s\" of %s (on) cannot be a key of ", j->out->name,
                         j->left->schema->cols[on[i]].name, j->left->name);
}

/* Normalizes key values to the right key's column types and encodes them:
 * 7.0 finds the int key 7; 7.5 for an int key is an error, never a miss.
 * on: the left columns the values come from (NULL: a mapper's key). */
static int encode_right_key(rn_join *j, msgpack_object *vals, const int *on, fk *f)
{
  const rn_schema *rs = j->right->schema;
  msgpack_sbuffer *b = &j->keybuf;
  msgpack_sbuffer_clear(b);
  for (int i = 0; i < rs->nkey; i++) {
    if (vals[i].type == MSGPACK_OBJECT_NIL) { f->null = true; rn_join_set_part(f); return 0; }
    const rn_column *kc = &rs->cols[rs->key_slots[i]];
    int rc = rn_value_normalize(kc, &vals[i], zone_of(j), on ? j->right->name : j->out->name, err_of(j));
    if (rc) return on ? on_value_error(j, on, i) : rc;
    if (rn_key_append(b, &vals[i]) == 0) continue;
    if (!on)
      return rn_err_set(err_of(j), RN_EINVAL, "%s: NaN for key column \"%s\" of %s: NaN cannot be part of a key",
                        j->out->name, kc->name, j->right->name);
    rn_err_set(err_of(j), RN_EINVAL, "%s: column \"%s\": NaN cannot be part of a key", j->right->name, kc->name);
    return on_value_error(j, on, i);
  }
  return keep_encoding(j, f, b);
}

/* rn_join_left_fk of a single int column naming an int right key, read
 * from the row's bytes (no decoding, no normalizing: an int column holds
 * int64s); 1 when the bytes are not such an int (the general path then). */
static int int_fk(rn_join *j, side *l, int slot, fk *f)
{
  const size_t *starts;
  msgpack_object o;
  int rc = rn_join_spans(j, j->left, l, slot + 1, &starts);
  if (rc) return rc;
  if (!rn_scalar_object((const unsigned char *)l->row + starts[slot], starts[slot + 1] - starts[slot], &o))
    return 1;
  int64_t v;
  if (o.type == MSGPACK_OBJECT_NEGATIVE_INTEGER) v = o.via.i64;
  else if (o.type == MSGPACK_OBJECT_POSITIVE_INTEGER && o.via.u64 <= (uint64_t)INT64_MAX) v = (int64_t)o.via.u64;
  else if (o.type == MSGPACK_OBJECT_NIL) { f->null = true; rn_join_set_part(f); return 0; }
  else return 1;
  f->null = false;
  char *enc = rn_zone_malloc_no_align(zone_of(j), 9);
  if (!enc) return nomem(j);
  enc[0] = RN_KEY_INT; /* as rn_key_append encodes an int */
  rn_be64_put(enc + 1, (uint64_t)v ^ (1ULL << 63));
  f->enc = enc;
  f->len = 9;
  rn_join_set_part(f);
  return 0;
}

static bool int_on_int(const rn_join *j, const int *on, int non)
{
  const rn_schema *rs = j->right->schema;
  return non == 1 && rs->nkey == 1 && j->left->schema->cols[on[0]].type == RN_T_INT &&
         rs->cols[rs->key_slots[0]].type == RN_T_INT;
}

/* The right key the mapper gives for a left row, normalized and encoded;
 * j->mapper_read: the columns it read. A row holding, in the columns an
 * earlier call read, the bytes that call found gets that call's key from
 * the memo, without a call (join_fkmemo.h says why that is the same key).
 * A failed call is not remembered. */
static int mapper_fk(rn_join *j, side *l, fk *f)
{
  rn_fkmemo_key known;
  int ncols = j->left->schema->ncols;
  if (j->fns.mapper_reads && rn_fkmemo_find(j->fkmemo, l->row, l->len, ncols, &j->mapper_read, &known)) {
    f->null = known.null;
    f->len = known.len;
    f->enc = known.null ? NULL : rn_scratch_copy(j->out->p, known.enc, known.len); /* as keep_encoding */
    if (!known.null && !f->enc) return nomem(j);
    rn_join_set_part(f);
    return 0;
  }
  int nkey = j->right->schema->nkey, has_key = 0;
  msgpack_object *vals = rn_zone_malloc(zone_of(j), sizeof *vals * (size_t)nkey);
  if (!vals) return nomem(j);
  int rc = j->fns.mapper(j->fns.ctx, j->left, l->row, l->len, vals, nkey, &has_key, zone_of(j), err_of(j));
  j->mapper_read = j->fns.mapper_reads ? j->fns.mapper_reads(j->fns.ctx) : ~0ULL;
  if (rc) return rc;
  f->null = !has_key;
  if (f->null) rn_join_set_part(f);
  else if ((rc = encode_right_key(j, vals, NULL, f))) return rc;
  if (j->fns.mapper_reads) {
    rn_fkmemo_key got = { .null = f->null, .enc = f->enc, .len = f->null ? 0 : f->len };
    rn_fkmemo_store(&j->fkmemo, l->row, l->len, ncols, j->mapper_read, &got);
  }
  return 0;
}

/* The right key a left row points at. */
int rn_join_left_fk(rn_join *j, side *l, fk *f)
{
  const int *on = j->on;
  int non = j->non;
  if (j->mapper_column >= 0) { /* the mapper returns this column: read as on = it reads it */
    on = &j->mapper_column;
    non = 1;
  } else if (j->fns.mapper)
    return mapper_fk(j, l, f);
  if (int_on_int(j, on, non)) {
    int rc = int_fk(j, l, on[0], f);
    if (rc != 1) return rc;
  }
  int nkey = j->right->schema->nkey;
  msgpack_object *vals = rn_zone_malloc(zone_of(j), sizeof *vals * (size_t)nkey);
  if (!vals) return nomem(j);
  f->null = false;
  int rc = slot_values(j, j->left, l, on, nkey, vals);
  if (!rc) rc = encode_right_key(j, vals, j->on ? on : NULL, f); /* a mapper_column is no on column */
  if (rc == RN_EINVAL && j->mapper_column >= 0) /* a NaN: the mapper's own error, naming it and its line */
    return mapper_fk(j, l, f);
  return rc;
}

/* A right row's own key (its values are already normalized). */
int rn_join_right_key(rn_join *j, side *r, fk *f)
{
  const rn_schema *rs = j->right->schema;
  msgpack_object kv[rs->nkey];
  int rc = slot_values(j, j->right, r, rs->key_slots, rs->nkey, kv);
  if (rc) return rc;
  msgpack_sbuffer_clear(&j->keybuf);
  for (int i = 0; i < rs->nkey; i++) rn_key_append(&j->keybuf, &kv[i]);
  return keep_encoding(j, f, &j->keybuf);
}


/* The current right row with key f (NULL when absent or f is null). */
int rn_join_right_current(rn_join *j, const fk *f, side *r)
{
  *r = (side){ 0 };
  if (f->null) return 0;
  const char *row;
  size_t len;
  if (j->lookup) { /* through the lookup's cache; the row is in scratch already */
    int rc = rn_lookup_get(j->right, f->enc, f->len, &r->row, &r->len);
    return rc;
  }
  if (j->right_native) {
    uint64_t id;
    int rc = rn_table_row_by_key(j->right, txn_of(j), f->enc, f->len, &id, &row, &len);
    if (!rc && row && j->right_from) rc = rn_join_right_as_declared(j, &row, &len); /* in scratch already */
    if (rc) return rc;
    if (row && j->right_from) {
      r->row = row;
      r->len = len;
      return 0;
    }
  } else {
    MDB_val k = { f->len, (void *)f->enc }, v;
    if (f->len > RN_STORE_KEY_MAX) { /* the copy is keyed by the fk part for long keys */
      k.mv_size = f->part_len;
      k.mv_data = (void *)f->part;
    }
    int rc = rn_wb_get(&j->out->p->store, txn_of(j), j->right_dbi, &k, &v);
    if (rc && rc != MDB_NOTFOUND) return rn_store_fail(err_of(j), rc, j->out->name);
    row = rc ? NULL : v.mv_data;
    len = rc ? 0 : v.mv_size;
  }
  if (!row) return 0;
  r->row = rn_scratch_copy(j->out->p, row, len);
  r->len = len;
  return r->row ? 0 : nomem(j);
}

/* The right row with key f as it was before change undo (a self-join sees
 * its own change on both sides). */
int rn_join_right_before(rn_join *j, const fk *f, const rn_change *undo, side *r)
{
  if (undo && !f->null) {
    side o = { .row = undo->old, .len = undo->old_len }, n = { .row = undo->row, .len = undo->row_len };
    fk ko, kn;
    if (o.row) {
      if (rn_join_right_key(j, &o, &ko)) return err_of(j)->code;
      if (same_fk(&ko, f)) { *r = o; return 0; }
    }
    if (n.row) {
      if (rn_join_right_key(j, &n, &kn)) return err_of(j)->code;
      if (same_fk(&kn, f)) { *r = (side){ 0 }; return 0; }
    }
  }
  return rn_join_right_current(j, f, r);
}

/* ---- results ---- */

/* The bytes after a row's array header, and how many values it holds. */
static const char *row_body(const char *row, size_t len, size_t *body_len)
{
  unsigned char h = (unsigned char)row[0];
  size_t skip = h >= 0x90 && h <= 0x9f ? 1 : h == 0xdc ? 3 : 5;
  *body_len = len - skip;
  return row + skip;
}

/* The declared result: left values then right values, as the rows' own
 * encodings placed side by side (nothing decoded, nothing re-packed);
 * nils for an absent side. An outer join's right-only result fills the
 * left key from the join key. */
int rn_join_concat(rn_join *j, side *l, side *r, const fk *f, side *res)
{
  const rn_schema *ls = j->left->schema, *rs = j->right->schema;
  size_t lb = 0, rb = 0;
  const char *lbody = l->row ? row_body(l->row, l->len, &lb) : NULL;
  const char *rbody = r->row ? row_body(r->row, r->len, &rb) : NULL;
  if (!lbody) { /* right only: pack the left side */
    msgpack_object keyvals[rs->nkey];
    if (rn_key_decode(f->enc, f->len, keyvals, rs->nkey, zone_of(j)) != rs->nkey) return nomem(j);
    msgpack_sbuffer *b = &j->keybuf;
    msgpack_sbuffer_clear(b);
    msgpack_packer pk;
    msgpack_packer_init(&pk, b, rn_buf_write);
    for (int i = 0; i < ls->ncols; i++) {
      int k = -1;
      for (int q = 0; q < j->non; q++) if (j->on[q] == i) k = q;
      if (k >= 0) msgpack_pack_object(&pk, keyvals[k]); else msgpack_pack_nil(&pk);
    }
    lbody = rn_scratch_copy(j->out->p, b->data, b->size);
    lb = b->size;
    if (!lbody) return nomem(j);
  }
  if (!rbody) rb = (size_t)rs->ncols;
  uint32_t n = (uint32_t)(ls->ncols + rs->ncols);
  char head[5];
  size_t hl;
  if (n < 16) { head[0] = (char)(0x90 | n); hl = 1; }
  else if (n < 65536) { head[0] = (char)0xdc; head[1] = (char)(n >> 8); head[2] = (char)n; hl = 3; }
  else { head[0] = (char)0xdd; for (int i = 0; i < 4; i++) head[1 + i] = (char)(n >> (24 - 8 * i)); hl = 5; }
  char *out = rn_zone_malloc_no_align(zone_of(j), hl + lb + rb);
  if (!out) return nomem(j);
  memcpy(out, head, hl);
  memcpy(out + hl, lbody, lb);
  if (rbody) memcpy(out + hl + lb, rbody, rb);
  else memset(out + hl + lb, 0xc0, rb); /* msgpack nil */
  res->row = out;
  res->len = hl + lb + rb;
  res->vals = NULL;
  return 0;
}

/* Do the key columns of a joiner's row res hold the nw values wv (its
 * result's key)? Else the join would hold two rows of one key (its sinks,
 * a SQLite or store sink, one), and reading by key would miss the row;
 * whose: where the result's key comes from, for the message. */
static int key_columns_check(rn_join *j, side *l, msgpack_object *wv, int nw, side *res, const char *whose)
{
  const rn_schema *os = j->out->schema, *ls = j->left->schema;
  msgpack_sbuffer want, got;
  msgpack_sbuffer_init(&want);
  msgpack_sbuffer_init(&got);
  msgpack_object kv[os->nkey];
  int rc = 0;
  if ((rc = read_slots(j, j->out, res, os->key_slots, os->nkey, kv)) == 1)
    rc = rn_err_set(err_of(j), RN_ESTORE, "%s: a row could not be decoded", j->out->name);
  bool same = !rc && nw == os->nkey;
  for (int i = 0; same && i < os->nkey; i++) { /* the result key as the key columns' types hold it: 5 as 5.0 */
    rn_err ignored = { 0 };
    same = rn_value_normalize(&os->cols[os->key_slots[i]], &wv[i], zone_of(j), j->out->name, &ignored) == 0;
    if (same) rn_key_append(&want, &wv[i]), rn_key_append(&got, &kv[i]);
  }
  if (!rc && (!same || got.size != want.size || memcmp(got.data, want.data, got.size) != 0)) {
    char gk[256] = "?", wk[256] = "?";
    const msgpack_object *gv = rn_row_unpack(res->row, res->len, os->ncols, zone_of(j));
    const msgpack_object *lv = l->row ? rn_row_unpack(l->row, l->len, ls->ncols, zone_of(j)) : NULL;
    if (gv) rn_key_format(os, gv, gk, sizeof gk);
    if (lv) rn_key_format(ls, lv, wk, sizeof wk);
    rc = rn_err_set(err_of(j), RN_EINVAL,
                    "%s: joiner returned key (%s) for the result of %s (%s): its key columns hold the result's key "
                    "(%s)", j->out->name, gk, lv ? "left key" : "a right row without a left one",
                    lv ? wk : "the join key", whose);
  }
  msgpack_sbuffer_destroy(&want);
  msgpack_sbuffer_destroy(&got);
  return rc;
}

/* Whether each of the result's key columns holds the very bytes of the
 * left row's key column: the joiner's common answer, seen without
 * decoding (equal bytes are an equal key; any other answer is weighed
 * below, 5 against 5.0 included). */
static bool key_bytes_kept(rn_join *j, side *l, side *res)
{
  const rn_schema *os = j->out->schema, *ls = j->left->schema;
  if (ls->nkey != os->nkey) return false;
  int lup = 0, oup = 0;
  for (int i = 0; i < os->nkey; i++) {
    if (ls->key_slots[i] + 1 > lup) lup = ls->key_slots[i] + 1;
    if (os->key_slots[i] + 1 > oup) oup = os->key_slots[i] + 1;
  }
  const size_t *la, *oa;
  if (rn_join_spans(j, j->left, l, lup, &la) || rn_join_spans(j, j->out, res, oup, &oa)) return false;
  for (int i = 0; i < os->nkey; i++) {
    int a = ls->key_slots[i], b = os->key_slots[i];
    size_t n = la[a + 1] - la[a];
    if (n != oa[b + 1] - oa[b] || memcmp(l->row + la[a], res->row + oa[b], n) != 0) return false;
  }
  return true;
}

/* A joiner's row holds its result's key in the key columns it declares
 * when that key is the left key (or the join key). A selector's key is
 * checked where it is made (rn_join_selected_key_check: made here, the
 * selector would be called once more per row). */
static int joiner_key_check(rn_join *j, side *l, const fk *f, side *res)
{
  const rn_schema *os = j->out->schema, *ls = j->left->schema;
  if (!os->nkey || j->fns.selector || !(j->key_join || (l->row && ls->nkey))) return 0;
  if (!j->key_join && key_bytes_kept(j, l, res)) return 0;
  int nw = j->key_join ? j->right->schema->nkey : ls->nkey, rc = 0;
  msgpack_object wv[nw];
  if (j->key_join) nw = rn_key_decode(f->enc, f->len, wv, nw, zone_of(j)), rc = nw < 0 ? nomem(j) : 0;
  else if ((rc = read_slots(j, j->left, l, ls->key_slots, nw, wv)) == 1)
    rc = rn_err_set(err_of(j), RN_ESTORE, "%s: a row could not be decoded", j->out->name);
  return rc ? rc : key_columns_check(j, l, wv, nw, res, "the left key");
}

/* The check joiner_key_check makes, of a selector's key (join_int.h). */
int rn_join_selected_key_check(rn_join *j, side *l, const msgpack_sbuffer *key, side *res)
{
  const rn_schema *os = j->out->schema;
  if (!os->nkey || !j->fns.selector || !j->fns.joiner || !res->row) return 0; /* else: joiner_key_check */
  msgpack_object wv[os->nkey + 1]; /* one more: a key of more parts than the columns differs */
  int nw = rn_key_decode(key->data, key->size, wv, os->nkey + 1, zone_of(j));
  if (nw < 0) return nomem(j);
  return key_columns_check(j, l, wv, nw, res, "the selector's key");
}

/* The key a result row's key columns hold, encoded into b (to check a
 * selector's result against the one it replaces, the key being the same). */
int rn_join_row_key(rn_join *j, side *res, msgpack_sbuffer *b)
{
  const rn_schema *os = j->out->schema;
  msgpack_object kv[os->nkey ? os->nkey : 1];
  msgpack_sbuffer_clear(b);
  int rc = read_slots(j, j->out, res, os->key_slots, os->nkey, kv);
  if (rc == 1) return rn_err_set(err_of(j), RN_ESTORE, "%s: a row could not be decoded", j->out->name);
  for (int i = 0; !rc && i < os->nkey; i++) rn_key_append(b, &kv[i]);
  return rc;
}

/* The result row of l and r (either may be absent), into scratch. NULL row:
 * no result (inner join without a match, or the joiner said none). */
int rn_join_make_result(rn_join *j, side *l, side *r, const fk *f, side *res)
{
  *res = (side){ 0 };
  if (!l->row && !r->row) return 0;
  if (!r->row && j->kind == RN_JOIN_INNER) return 0;
  if (!l->row && j->kind != RN_JOIN_OUTER) return 0;
  if (j->projecting && !j->reading) { /* a fused select's row: made at emit, when the join's would change */
    res->made_of[0] = l;
    res->made_of[1] = r;
    res->row = l->row; /* present; its bytes come later (rn_join_emit_fused) */
    return 0;
  }
  if (j->proj) return rn_join_project(j, j->proj, l, r, f, res);
  if (!j->fns.joiner) return rn_join_concat(j, l, r, f, res);
  msgpack_sbuffer local, *b = j->resultbuf_busy ? &local : &j->resultbuf; /* busy: a joiner's scan of its join */
  if (b == &local) msgpack_sbuffer_init(&local);
  msgpack_sbuffer_clear(b);
  j->resultbuf_busy = true;
  int has_row = 1;
  int rc = j->fns.joiner(j->fns.ctx, j->out, l->row, l->len, r->row, r->len, b, &has_row, err_of(j));
  if (!rc && has_row) {
    res->row = rn_scratch_copy(j->out->p, b->data, b->size);
    res->len = b->size;
    if (!res->row) rc = nomem(j);
  }
  if (b == &local) msgpack_sbuffer_destroy(&local);
  else j->resultbuf_busy = false;
  if (!rc && res->row) rc = joiner_key_check(j, l, f, res);
  return rc;
}

/* A selector's key b as the result's key columns hold it (7.0 for an int
 * column as 7): kept as given, 7 and 7.0 were two results, two rows of one
 * key. A result a state kept under the key as given (before keys were
 * typed) is still found there. A key of another shape or type stays as
 * given: rn_join_selected_key_check refuses the joiner's row for it. */
static int selected_key_typed(rn_join *j, msgpack_sbuffer *b)
{
  const rn_schema *os = j->out->schema;
  if (!os->nkey) return 0;
  msgpack_object kv[os->nkey + 1]; /* one more: a key of more parts than the columns stays */
  int n = rn_key_decode(b->data, b->size, kv, os->nkey + 1, zone_of(j));
  if (n < 0) return nomem(j);
  if (n != os->nkey) return 0;
  for (int i = 0; i < n; i++) {
    rn_err ignored = { 0 };
    if (rn_value_normalize(&os->cols[os->key_slots[i]], &kv[i], zone_of(j), j->out->name, &ignored)) return 0;
  }
  msgpack_sbuffer typed;
  msgpack_sbuffer_init(&typed);
  int rc = 0;
  bool as_given = false;
  for (int i = 0; !as_given && i < n; i++) as_given = rn_key_append(&typed, &kv[i]) != 0;
  if (!as_given && (typed.size != b->size || memcmp(typed.data, b->data, b->size) != 0) &&
      b->size <= RN_STORE_KEY_MAX) { /* a result kept under the key as given: found there */
    MDB_val key = { b->size, b->data }, v;
    int got = rn_wb_get(&j->out->p->store, txn_of(j), j->result_dbi, &key, &v);
    if (got && got != MDB_NOTFOUND) rc = rn_store_fail(err_of(j), got, j->out->name);
    as_given = got == 0;
  }
  if (!rc && !as_given) {
    msgpack_sbuffer_clear(b);
    rn_buf_write(b, typed.data, typed.size);
  }
  msgpack_sbuffer_destroy(&typed);
  return rc;
}

/* The key of a left row's result (default: the left key, or the left id
 * when the left side has no key; a key join: the join key; with a
 * selector: what it returns), appended to b. */
int rn_join_result_key(rn_join *j, uint64_t lid, side *l, const fk *f, msgpack_sbuffer *b)
{
  msgpack_sbuffer_clear(b);
  const rn_schema *ls = j->left->schema;
  if (j->key_join || (!l->row && f)) {
    rn_buf_write(b, f->enc, f->len);
    return 0;
  }
  if (ls->nkey && !j->fns.selector) { /* the key columns alone, not the whole row decoded */
    msgpack_object kv[ls->nkey];
    int rc = read_slots(j, j->left, l, ls->key_slots, ls->nkey, kv);
    if (rc == 1) return rn_err_set(err_of(j), RN_ESTORE, "%s: a row could not be decoded", j->out->name);
    for (int i = 0; !rc && i < ls->nkey; i++) rn_key_append(b, &kv[i]); /* as rn_key_encode */
    return rc;
  }
  const msgpack_object *lv = vals_of(j, j->left, l);
  if (!lv) return rn_err_set(err_of(j), RN_ESTORE, "%s: a row could not be decoded", j->out->name);
  if (j->fns.selector) {
    msgpack_object lkey[ls->nkey ? ls->nkey : 1], rkey[j->right->schema->nkey];
    for (int i = 0; i < ls->nkey; i++) lkey[i] = lv[ls->key_slots[i]];
    int nr = 0;
    if (!f->null) {
      nr = rn_key_decode(f->enc, f->len, rkey, j->right->schema->nkey, zone_of(j));
      if (nr < 0) return nomem(j);
    }
    int rc = j->fns.selector(j->fns.ctx, j->left, lkey, ls->nkey, j->right, rkey, nr, b, err_of(j));
    return rc ? rc : selected_key_typed(j, b);
  }
  char idk[9] = { RN_KEY_INT }; /* no left key: the left id */
  rn_be64_put(idk + 1, lid ^ (1ULL << 63));
  rn_buf_write(b, idk, 9);
  return 0;
}

/* "jr:" |result key| -> |u64 id|u64 owner|[whole key]|: a result key
 * longer than an LMDB key goes under its hashed form (longkey.h), its
 * whole key after the id and owner (entries are never removed:
 * LONGKEY-1). */
static bool result_whole(void *ctx, const MDB_val *v, const char **key, size_t *klen)
{
  (void)ctx;
  if (v->mv_size <= 16) return false;
  *key = (const char *)v->mv_data + 16;
  *klen = v->mv_size - 16;
  return true;
}

void rn_join_key_text(rn_join *j, const msgpack_sbuffer *k, char *buf, size_t cap)
{
  enum { MAX_PARTS = 16 }; /* more parts: "?" */
  msgpack_object kv[MAX_PARTS];
  int n = rn_key_decode(k->data, k->size, kv, MAX_PARTS, zone_of(j));
  size_t off = 0;
  if (n <= 0) { snprintf(buf, cap, "?"); return; }
  if (n > 1) off += (size_t)snprintf(buf, cap, "(");
  for (int i = 0; i < n && off + 1 < cap; i++) {
    if (i) off += (size_t)snprintf(buf + off, cap - off, ", ");
    if (off + 1 >= cap) break;
    int w = rn_key_value_text(buf + off, cap - off, &kv[i]); /* 1e-07, not msgpack-c's %f 0.000000 */
    off = w < 0 || (size_t)w >= cap - off ? cap - 1 : off + (size_t)w;
  }
  if (n > 1 && off + 1 < cap) snprintf(buf + off, cap - off, ")");
}

/* The result key that has id, as rn_join_key_text shows it ("?" when none
 * has): "jr:" keeps no index by id, so every result key ever made is walked
 * — for a message that fails the group, never on the way of a change. */
void rn_join_id_key_text(rn_join *j, uint64_t id, char *buf, size_t cap)
{
  rn_wb_iter it;
  MDB_val k, v;
  snprintf(buf, cap, "?");
  int rc = rn_wb_iter_seek(&j->out->p->store, txn_of(j), j->result_dbi, &it, NULL, &k, &v);
  for (; rc == 0; rc = rn_wb_iter_next(&it, &k, &v)) {
    uint64_t has;
    if (v.mv_size < 16) continue;
    memcpy(&has, v.mv_data, sizeof has);
    if (has != id) continue;
    bool hashed = v.mv_size > 16; /* |id|owner|whole key| */
    msgpack_sbuffer whole = { hashed ? v.mv_size - 16 : k.mv_size, hashed ? (char *)v.mv_data + 16 : k.mv_data, 0 };
    rn_join_key_text(j, &whole, buf, cap);
    break;
  }
  rn_wb_iter_close(&it);
}

/* Settles the id of result key k found (val, from its entry) or not (val
 * zero) at key; hashed: key is k's hashed form. */
static int result_id_at(rn_join *j, const msgpack_sbuffer *k, MDB_val key, bool hashed, uint64_t val[2],
                        uint64_t owner, bool take, uint64_t *id)
{
  if (j->fns.selector && take && val[1] && val[1] != owner) {
    char kbuf[256];
    rn_join_key_text(j, k, kbuf, sizeof kbuf);
    return rn_err_set(err_of(j), RN_EINVAL,
                      "%s: the selector gave result key %s to two left rows (ids %llu and %llu)",
                      j->out->name, kbuf, (unsigned long long)val[1], (unsigned long long)owner);
  }
  bool changed = false;
  if (!val[0]) { val[0] = j->out->next_id++; changed = true; }
  if (j->fns.selector && val[1] != (take ? owner : 0) && (take || val[1] == owner)) {
    val[1] = take ? owner : 0;
    changed = true;
  }
  *id = val[0];
  if (!changed) return 0;
  MDB_val v = { sizeof *val * 2, val };
  char *whole = NULL;
  if (hashed) { /* |id|owner|whole key| */
    if (!(whole = malloc(16 + k->size))) return nomem(j);
    memcpy(whole, val, 16);
    memcpy(whole + 16, k->data, k->size);
    v = (MDB_val){ 16 + k->size, whole };
  }
  int rc = rn_wb_put(&j->out->p->store, txn_of(j), j->result_dbi, &key, &v, 0);
  free(whole);
  return rc ? rn_store_fail(err_of(j), rc, j->out->name) : 0;
}

/* The id of a result key stored hashed: longer than an LMDB key, or one
 * whose place a hashed key holds (a key as long as a hashed form). */
static int long_result_id(rn_join *j, const msgpack_sbuffer *k, uint64_t owner, bool take, uint64_t *id)
{
  char stored[RN_LONGKEY_STORED];
  MDB_val v;
  int rc = rn_longkey_find(&j->out->p->store, txn_of(j), j->result_dbi, k->data, k->size, result_whole, NULL, stored,
                           &v);
  if (rc == RN_LONGKEY_FULL) return rn_err_set(err_of(j), RN_ESTORE, "%s: too many long result keys share one hash",
                                               j->out->name);
  if (rc && rc != MDB_NOTFOUND) return rn_store_fail(err_of(j), rc, j->out->name);
  uint64_t val[2] = { 0, 0 };
  if (rc == 0) memcpy(val, v.mv_data, sizeof val);
  return result_id_at(j, k, (MDB_val){ sizeof stored, stored }, true, val, owner, take, id);
}

/* The id of result key k: its old id if it ever had one, else the next.
 * owner: the left id that now holds it (0: release); with a selector two
 * left rows may not hold one key at once. */
int rn_join_result_id(rn_join *j, const msgpack_sbuffer *k, uint64_t owner, bool take, uint64_t *id)
{
  if (k->size > RN_STORE_KEY_MAX) return long_result_id(j, k, owner, take, id);
  MDB_val key = { k->size, k->data }, v;
  if (!j->fns.selector) { /* no owners to track: one descent puts a new key or finds its id */
    uint64_t fresh[2] = { j->out->next_id, 0 };
    v = (MDB_val){ sizeof fresh, fresh };
    int rc = rn_wb_put(&j->out->p->store, txn_of(j), j->result_dbi, &key, &v, MDB_NOOVERWRITE);
    if (rc == 0) { *id = j->out->next_id++; return 0; }
    if (rc != MDB_KEYEXIST) return rn_store_fail(err_of(j), rc, j->out->name);
    if (v.mv_size > 16) return long_result_id(j, k, owner, take, id); /* a hashed key's place */
    memcpy(id, v.mv_data, sizeof *id); /* LMDB points v at the stored value */
    return 0;
  }
  int rc = rn_wb_get(&j->out->p->store, txn_of(j), j->result_dbi, &key, &v);
  if (rc && rc != MDB_NOTFOUND) return rn_store_fail(err_of(j), rc, j->out->name);
  if (rc == 0 && v.mv_size > 16) return long_result_id(j, k, owner, take, id); /* a hashed key's place */
  uint64_t val[2] = { 0, 0 };
  if (rc == 0) memcpy(val, v.mv_data, sizeof val);
  return result_id_at(j, k, key, false, val, owner, take, id);
}

/* Emits the change from result old (id old_id) to result now (id new_id):
 * an INSERT, DELETE, UPDATE, or a DELETE then an INSERT when the id moves;
 * nothing when they are equal (JOIN-2). */
int rn_join_emit_result(rn_join *j, uint64_t old_id, const side *old, uint64_t new_id, const side *now)
{
  if (j->projecting && !j->reading) return rn_join_emit_fused(j, old_id, old, new_id, now);
  if (old->row && now->row && old_id == new_id) {
    if (old->len == now->len && memcmp(old->row, now->row, old->len) == 0) return 0; /* (2) */
    rn_change c = { RN_UPDATE, new_id, now->row, now->len, old->row, old->len };
    return rn_emit(j->out, &c);
  }
  if (old->row) { /* a result whose key moved: DELETE first (2) */
    rn_change c = { RN_DELETE, old_id, NULL, 0, old->row, old->len };
    int rc = rn_emit(j->out, &c);
    if (rc) return rc;
  }
  if (now->row) {
    rn_change c = { RN_INSERT, new_id, now->row, now->len, NULL, 0 };
    return rn_emit(j->out, &c);
  }
  return 0;
}

/* ---- the fan-out index ---- */

static void index_key(const fk *f, uint64_t lid, char *out, size_t *len)
{
  memcpy(out, f->part, f->part_len);
  rn_be64_put(out + f->part_len, lid);
  *len = f->part_len + 8;
}

/* The join's index cursor in the write transaction, or NULL outside one. */
static MDB_cursor *index_cursor(rn_join *j)
{
  rn_store *s = &j->out->p->store;
  if (j->reading || !s->wtxn || s->wb) return NULL; /* the write-back layer finds keys without it */
  if (j->index_cur && j->index_cur_txn == s->txn_serial) return j->index_cur;
  j->index_at = j->index_near = false;
  if (mdb_cursor_open(s->wtxn, j->index_dbi, &j->index_cur)) return j->index_cur = NULL;
  j->index_cur_txn = s->txn_serial;
  return j->index_cur;
}

/* |u64 result id|u32 left length|left row|result|: fan-out reads the left
 * row here, no lookup; a join that keeps results (lookup, joiner) keeps the
 * one it emitted, flagged RN_JOIN_KEPT in the length. An entry index_entry
 * just read is rewritten in place (no second descent): with exactly
 * MDB_CURRENT, since LMDB 0.9.24 searches again for MDB_CURRENT|MDB_RESERVE. */
int rn_join_index_put(rn_join *j, const fk *f, uint64_t lid, uint64_t rid, const side *l, const side *res)
{
  char k[sizeof ((fk *)0)->part + 8];
  size_t klen;
  index_key(f, lid, k, &klen);
  size_t rlen = j->keeps_results && res && res->row ? res->len : 0;
  uint32_t llen = (uint32_t)l->len | (j->keeps_results ? RN_JOIN_KEPT : 0);
  MDB_val key = { klen, k }, v = { 12 + l->len + rlen, NULL };
  MDB_cursor *cur = index_cursor(j);
  bool here = cur && j->index_at && j->index_at_len == klen && memcmp(j->index_at_key, k, klen) == 0;
  j->index_at = false;
  char *d = here ? rn_zone_malloc_no_align(zone_of(j), v.mv_size) : NULL;
  if (here && !d) return nomem(j);
  v.mv_data = d;
  int rc = here ? 0 : rn_wb_put(&j->out->p->store, txn_of(j), j->index_dbi, &key, &v, MDB_RESERVE);
  if (rc) return rn_store_fail(err_of(j), rc, j->out->name);
  d = v.mv_data;
  memcpy(d, &rid, 8);
  memcpy(d + 8, &llen, 4);
  memcpy(d + 12, l->row, l->len);
  if (rlen) memcpy(d + 12 + l->len, res->row, rlen);
  rc = here ? mdb_cursor_put(cur, &key, &v, MDB_CURRENT) : 0;
  if (here && !rc) rn_store_wrote(&j->out->p->store, j->index_dbi);
  j->index_near = here && !rc; /* LMDB leaves the cursor on the item it put */
  return rc ? rn_store_fail(err_of(j), rc, j->out->name) : 0;
}

/* Puts the index cursor on entry (f, lid), so that rn_join_index_put
 * rewrites it in place: one step from the entry the cursor was left on
 * when it is the next one (a fan-out rewrites a key's entries in ascending
 * left id), else a search. Only a hint: nothing happens without a cursor
 * (write-back layer, reads), and a missing entry leaves it unpositioned. */
int rn_join_index_seek(rn_join *j, const fk *f, uint64_t lid)
{
  MDB_cursor *cur = index_cursor(j);
  if (!cur) return 0;
  char k[sizeof ((fk *)0)->part + 8];
  size_t klen;
  index_key(f, lid, k, &klen);
  MDB_val key, v;
  int rc = MDB_NOTFOUND;
  if (j->index_near) {
    rc = mdb_cursor_get(cur, &key, &v, MDB_NEXT);
    if (!rc && (key.mv_size != klen || memcmp(key.mv_data, k, klen) != 0)) rc = MDB_NOTFOUND;
  }
  if (rc) {
    key = (MDB_val){ klen, k };
    rc = mdb_cursor_get(cur, &key, &v, MDB_SET);
  }
  j->index_at = j->index_near = rc == 0;
  if (j->index_at) {
    memcpy(j->index_at_key, k, klen);
    j->index_at_len = klen;
  }
  return rc && rc != MDB_NOTFOUND ? rn_store_fail(err_of(j), rc, j->out->name) : 0;
}

/* An entry index_entry just read is deleted where the cursor stands. */
int rn_join_index_del(rn_join *j, const fk *f, uint64_t lid)
{
  char k[sizeof ((fk *)0)->part + 8];
  size_t klen;
  index_key(f, lid, k, &klen);
  MDB_cursor *cur = index_cursor(j);
  bool here = cur && j->index_at && j->index_at_len == klen && memcmp(j->index_at_key, k, klen) == 0;
  j->index_at = false;
  MDB_val key = { klen, k };
  int rc = here ? mdb_cursor_del(cur, 0) : rn_wb_del(&j->out->p->store, txn_of(j), j->index_dbi, &key);
  if (here && !rc) rn_store_wrote(&j->out->p->store, j->index_dbi);
  return rc && rc != MDB_NOTFOUND ? rn_store_fail(err_of(j), rc, j->out->name) : 0;
}

/* A left row's entry: its result id (0: none yet or no entry) and, for a
 * join that keeps results, the result it emitted (stored->row NULL: none;
 * *kept false when the entry does not say). */
int rn_join_index_entry(rn_join *j, const fk *f, uint64_t lid, uint64_t *rid, side *stored, bool *kept)
{
  char k[sizeof ((fk *)0)->part + 8];
  size_t klen;
  index_key(f, lid, k, &klen);
  MDB_val key = { klen, k }, v;
  MDB_cursor *cur = index_cursor(j);
  int rc = cur ? mdb_cursor_get(cur, &key, &v, MDB_SET) : rn_wb_get(&j->out->p->store, txn_of(j), j->index_dbi, &key, &v);
  j->index_at = j->index_near = cur && rc == 0;
  if (j->index_at) {
    memcpy(j->index_at_key, k, klen);
    j->index_at_len = klen;
  }
  *rid = 0;
  if (stored) *stored = (side){ 0 };
  if (kept) *kept = j->lookup; /* a lookup join's entries always hold theirs */
  if (rc == 0 && !rn_join_entry_whole(&v)) return rn_join_entry_damaged(j);
  if (rc == 0) {
    uint32_t llen;
    memcpy(rid, v.mv_data, 8);
    memcpy(&llen, (char *)v.mv_data + 8, 4);
    if (kept) *kept = j->lookup || (llen & RN_JOIN_KEPT);
    llen &= ~RN_JOIN_KEPT;
    size_t rlen = v.mv_size - 12 - llen;
    if (stored && rlen) {
      stored->row = rn_scratch_copy(j->out->p, (char *)v.mv_data + 12 + llen, rlen);
      stored->len = rlen;
      if (!stored->row) return nomem(j);
    }
  }
  return rc && rc != MDB_NOTFOUND ? rn_store_fail(err_of(j), rc, j->out->name) : 0;
}
