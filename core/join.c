/* join.c — join maintenance (the state and invariants are in join.h). */
#include "join.h"

#include <stdlib.h>
#include <string.h>

#include "key.h"
#include "lookup.h"
#include "row.h"
#include "scan.h"
#include "snapshot.h"

typedef struct rn_join {
  rn_rel *out, *left, *right;
  rn_join_kind kind;
  bool stream;            /* the left side is a stream: the output is a stream */
  bool key_join;          /* on = the left key: at most one left row per right key */
  int non;                /* left slots forming the right key (declarative) */
  int *on;
  int on_upto;            /* 1 + the largest of them: how far a left row is walked */
  rn_join_fns fns;
  bool right_native;      /* the right side is a keyed source table */
  bool lookup;            /* the right side is a lookup: results are stored, not recomputed */
  MDB_dbi index_dbi, result_dbi, right_dbi;
  MDB_txn *reading;       /* a scan's read transaction, or NULL: the group's */
  msgpack_sbuffer keybuf; /* scratch: encoding a key */
  MDB_cursor *index_cur;  /* on index_dbi in the write transaction, positioned by index_entry */
  uint64_t index_cur_txn; /* the store's txn_serial it belongs to (LMDB frees it with it) */
  bool index_at;          /* index_cur is positioned at index_at_key */
  char index_at_key[RN_JOIN_FK_INLINE + 16];
  size_t index_at_len;
} rn_join;

/* A right key, encoded, with its fk part as the index uses it. */
typedef struct fk {
  bool null;              /* no right key: null foreign key or no mapper match */
  const char *enc;        /* the full encoding (scratch) */
  size_t len;
  char part[RN_JOIN_FK_INLINE + 8];
  size_t part_len;
} fk;

/* One side of a result: a row and, once needed, its decoded values. */
typedef struct side {
  const char *row;        /* NULL: absent */
  size_t len;
  const msgpack_object *vals; /* NULL until vals_of() */
} side;

/* Where the join reads and writes: the group's transaction, or a scan's. */
static MDB_txn *txn_of(rn_join *j) { return j->reading ? j->reading : j->out->p->store.wtxn; }
static rn_err *err_of(rn_join *j) { return &j->out->p->err; }
static msgpack_zone *zone_of(rn_join *j) { return &j->out->p->scratch; }

static int nomem(rn_join *j) { return rn_err_set(err_of(j), RN_ENOMEM, "out of memory"); }

static const msgpack_object *decode(rn_join *j, rn_rel *r, const char *row, size_t len)
{
  return row ? rn_row_unpack(row, len, r->schema->ncols, zone_of(j)) : NULL;
}

static const msgpack_object *vals_of(rn_join *j, rn_rel *r, side *s)
{
  if (!s->vals && s->row) s->vals = decode(j, r, s->row, s->len);
  return s->vals;
}

/* Decodes only the given slots of a row (its key or foreign key columns). */
static int slot_values(rn_join *j, rn_rel *r, const side *s, const int *slots, int n, msgpack_object *out)
{
  int upto = 0;
  for (int i = 0; i < n; i++) if (slots[i] + 1 > upto) upto = slots[i] + 1;
  size_t starts[upto + 1];
  if (rn_row_spans(s->row, s->len, r->schema->ncols, upto, starts) != 0)
    return rn_err_set(err_of(j), RN_ESTORE, "%s: a row of %s could not be decoded", j->out->name, r->name);
  for (int i = 0; i < n; i++) {
    size_t off = 0;
    if (rn_unpack(s->row + starts[slots[i]], starts[slots[i] + 1] - starts[slots[i]], &off,
                       zone_of(j), &out[i]) != MSGPACK_UNPACK_SUCCESS)
      return rn_err_set(err_of(j), RN_ESTORE, "%s: a row of %s could not be decoded", j->out->name, r->name);
  }
  return 0;
}

static void set_part(fk *f)
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
  set_part(f);
  return 0;
}

/* Normalizes key values to the right key's column types and encodes them:
 * 7.0 finds the int key 7; 7.5 for an int key is an error, never a miss. */
static int encode_right_key(rn_join *j, msgpack_object *vals, fk *f)
{
  const rn_schema *rs = j->right->schema;
  msgpack_sbuffer *b = &j->keybuf;
  msgpack_sbuffer_clear(b);
  for (int i = 0; i < rs->nkey; i++) {
    if (vals[i].type == MSGPACK_OBJECT_NIL) { f->null = true; set_part(f); return 0; }
    int rc = rn_value_normalize(&rs->cols[rs->key_slots[i]], &vals[i], zone_of(j), j->out->name, err_of(j));
    if (rc) return rc;
    if (rn_key_append(b, &vals[i]) != 0)
      return rn_err_set(err_of(j), RN_EINVAL, "%s: NaN cannot be part of a key", j->out->name);
  }
  return keep_encoding(j, f, b);
}

/* The right key a left row points at. */
static int left_fk(rn_join *j, side *l, fk *f)
{
  int nkey = j->right->schema->nkey;
  msgpack_object *vals = rn_zone_malloc(zone_of(j), sizeof *vals * (size_t)nkey);
  if (!vals) return nomem(j);
  f->null = false;
  if (j->fns.mapper) {
    int has_key = 0;
    int rc = j->fns.mapper(j->fns.ctx, j->left, l->row, l->len, vals, nkey, &has_key, zone_of(j), err_of(j));
    if (rc) return rc;
    if (!has_key) { f->null = true; set_part(f); return 0; }
  } else {
    int rc = slot_values(j, j->left, l, j->on, nkey, vals);
    if (rc) return rc;
  }
  return encode_right_key(j, vals, f);
}

/* A right row's own key (its values are already normalized). */
static int right_key(rn_join *j, side *r, fk *f)
{
  const rn_schema *rs = j->right->schema;
  msgpack_object kv[rs->nkey];
  int rc = slot_values(j, j->right, r, rs->key_slots, rs->nkey, kv);
  if (rc) return rc;
  msgpack_sbuffer_clear(&j->keybuf);
  for (int i = 0; i < rs->nkey; i++) rn_key_append(&j->keybuf, &kv[i]);
  return keep_encoding(j, f, &j->keybuf);
}

static bool same_fk(const fk *a, const fk *b)
{
  if (a->null || b->null) return a->null && b->null;
  return a->len == b->len && memcmp(a->enc, b->enc, a->len) == 0;
}

/* The current right row with key f (NULL when absent or f is null). */
static int right_current(rn_join *j, const fk *f, side *r)
{
  r->row = NULL;
  r->vals = NULL;
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
    if (rc) return rc;
  } else {
    MDB_val k = { f->len, (void *)f->enc }, v;
    if (f->len > 511) { /* the copy is keyed by the fk part for long keys */
      k.mv_size = f->part_len;
      k.mv_data = (void *)f->part;
    }
    int rc = mdb_get(txn_of(j), j->right_dbi, &k, &v);
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
static int right_before(rn_join *j, const fk *f, const rn_change *undo, side *r)
{
  if (undo && !f->null) {
    side o = { undo->old, undo->old_len, NULL }, n = { undo->row, undo->row_len, NULL };
    fk ko, kn;
    if (o.row) {
      if (right_key(j, &o, &ko)) return err_of(j)->code;
      if (same_fk(&ko, f)) { *r = o; return 0; }
    }
    if (n.row) {
      if (right_key(j, &n, &kn)) return err_of(j)->code;
      if (same_fk(&kn, f)) { r->row = NULL; r->vals = NULL; return 0; }
    }
  }
  return right_current(j, f, r);
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
static int concat_result(rn_join *j, side *l, side *r, const fk *f, side *res)
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

/* The result row of l and r (either may be absent), into scratch. NULL row:
 * no result (inner join without a match, or the joiner said none). */
static int make_result(rn_join *j, side *l, side *r, const fk *f, side *res)
{
  res->row = NULL;
  res->len = 0;
  res->vals = NULL;
  if (!l->row && !r->row) return 0;
  if (!r->row && j->kind == RN_JOIN_INNER) return 0;
  if (!l->row && j->kind != RN_JOIN_OUTER) return 0;
  if (!j->fns.joiner) return concat_result(j, l, r, f, res);
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  int has_row = 1;
  int rc = j->fns.joiner(j->fns.ctx, j->out, l->row, l->len, r->row, r->len, &b, &has_row, err_of(j));
  if (!rc && has_row) {
    res->row = rn_scratch_copy(j->out->p, b.data, b.size);
    res->len = b.size;
    if (!res->row) rc = nomem(j);
  }
  msgpack_sbuffer_destroy(&b);
  return rc;
}

/* The key of a left row's result (default: the left key, or the left id
 * when the left side has no key; a key join: the join key; with a
 * selector: what it returns), appended to b. */
static int result_key(rn_join *j, uint64_t lid, side *l, const fk *f, msgpack_sbuffer *b)
{
  msgpack_sbuffer_clear(b);
  const rn_schema *ls = j->left->schema;
  if (j->key_join || (!l->row && f)) {
    rn_buf_write(b, f->enc, f->len);
    return 0;
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
    return j->fns.selector(j->fns.ctx, j->left, lkey, ls->nkey, j->right, rkey, nr, b, err_of(j));
  }
  if (ls->nkey) {
    rn_key_encode(ls, lv, b);
  } else {
    char idk[9] = { RN_KEY_INT };
    rn_be64_put(idk + 1, lid ^ (1ULL << 63));
    rn_buf_write(b, idk, 9);
  }
  return 0;
}

/* The id of result key k: its old id if it ever had one, else the next.
 * owner: the left id that now holds it (0: release); with a selector two
 * left rows may not hold one key at once. */
static int result_id(rn_join *j, const msgpack_sbuffer *k, uint64_t owner, bool take, uint64_t *id)
{
  if (k->size > 511) return rn_err_set(err_of(j), RN_EINVAL, "%s: a result key longer than 511 bytes", j->out->name);
  MDB_val key = { k->size, k->data }, v;
  if (!j->fns.selector) { /* no owners to track: one descent puts a new key or finds its id */
    uint64_t fresh[2] = { j->out->next_id, 0 };
    v = (MDB_val){ sizeof fresh, fresh };
    int rc = mdb_put(txn_of(j), j->result_dbi, &key, &v, MDB_NOOVERWRITE);
    if (rc == 0) { *id = j->out->next_id++; return 0; }
    if (rc != MDB_KEYEXIST) return rn_store_fail(err_of(j), rc, j->out->name);
    memcpy(id, v.mv_data, sizeof *id); /* LMDB points v at the stored value */
    return 0;
  }
  int rc = mdb_get(txn_of(j), j->result_dbi, &key, &v);
  if (rc && rc != MDB_NOTFOUND) return rn_store_fail(err_of(j), rc, j->out->name);
  uint64_t val[2] = { 0, 0 };
  if (rc == 0) memcpy(val, v.mv_data, sizeof val);
  if (j->fns.selector && take && val[1] && val[1] != owner) {
    char kbuf[128];
    msgpack_object kv[8];
    int n = rn_key_decode(k->data, k->size, kv, 8, zone_of(j));
    if (n > 0) msgpack_object_print_buffer(kbuf, sizeof kbuf, kv[0]); else strcpy(kbuf, "?");
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
  v.mv_size = sizeof val;
  v.mv_data = val;
  rc = mdb_put(txn_of(j), j->result_dbi, &key, &v, 0);
  return rc ? rn_store_fail(err_of(j), rc, j->out->name) : 0;
}

static int emit_result(rn_join *j, uint64_t old_id, const side *old, uint64_t new_id, const side *now)
{
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
  if (j->reading || !s->wtxn) return NULL;
  if (j->index_cur && j->index_cur_txn == s->txn_serial) return j->index_cur;
  j->index_at = false;
  if (mdb_cursor_open(s->wtxn, j->index_dbi, &j->index_cur)) return j->index_cur = NULL;
  j->index_cur_txn = s->txn_serial;
  return j->index_cur;
}

/* |u64 result id|u32 left length|left row|result|: fan-out reads the left
 * row here, no lookup; a lookup join keeps the result it emitted. An entry
 * index_entry just read is rewritten in place (no second descent). */
static int index_put(rn_join *j, const fk *f, uint64_t lid, uint64_t rid, const side *l, const side *res)
{
  char k[sizeof ((fk *)0)->part + 8];
  size_t klen;
  index_key(f, lid, k, &klen);
  size_t rlen = j->lookup && res && res->row ? res->len : 0;
  uint32_t llen = (uint32_t)l->len;
  MDB_val key = { klen, k }, v = { 12 + l->len + rlen, NULL };
  MDB_cursor *cur = index_cursor(j);
  bool here = cur && j->index_at && j->index_at_len == klen && memcmp(j->index_at_key, k, klen) == 0;
  j->index_at = false;
  int rc = here ? mdb_cursor_put(cur, &key, &v, MDB_CURRENT | MDB_RESERVE)
                : mdb_put(txn_of(j), j->index_dbi, &key, &v, MDB_RESERVE);
  if (rc) return rn_store_fail(err_of(j), rc, j->out->name);
  char *d = v.mv_data;
  memcpy(d, &rid, 8);
  memcpy(d + 8, &llen, 4);
  memcpy(d + 12, l->row, l->len);
  if (rlen) memcpy(d + 12 + l->len, res->row, rlen);
  return 0;
}

/* An entry index_entry just read is deleted where the cursor stands. */
static int index_del(rn_join *j, const fk *f, uint64_t lid)
{
  char k[sizeof ((fk *)0)->part + 8];
  size_t klen;
  index_key(f, lid, k, &klen);
  MDB_cursor *cur = index_cursor(j);
  bool here = cur && j->index_at && j->index_at_len == klen && memcmp(j->index_at_key, k, klen) == 0;
  j->index_at = false;
  MDB_val key = { klen, k };
  int rc = here ? mdb_cursor_del(cur, 0) : mdb_del(txn_of(j), j->index_dbi, &key, NULL);
  return rc && rc != MDB_NOTFOUND ? rn_store_fail(err_of(j), rc, j->out->name) : 0;
}

/* A left row's entry: its result id (0: none yet or no entry) and, for a
 * lookup join, the result it emitted (stored->row NULL: none). */
static int index_entry(rn_join *j, const fk *f, uint64_t lid, uint64_t *rid, side *stored)
{
  char k[sizeof ((fk *)0)->part + 8];
  size_t klen;
  index_key(f, lid, k, &klen);
  MDB_val key = { klen, k }, v;
  MDB_cursor *cur = index_cursor(j);
  int rc = cur ? mdb_cursor_get(cur, &key, &v, MDB_SET) : mdb_get(txn_of(j), j->index_dbi, &key, &v);
  j->index_at = cur && rc == 0;
  if (j->index_at) {
    memcpy(j->index_at_key, k, klen);
    j->index_at_len = klen;
  }
  *rid = 0;
  if (stored) *stored = (side){ 0 };
  if (rc == 0) {
    uint32_t llen;
    memcpy(rid, v.mv_data, 8);
    memcpy(&llen, (char *)v.mv_data + 8, 4);
    size_t rlen = v.mv_size - 12 - llen;
    if (stored && rlen) {
      stored->row = rn_scratch_copy(j->out->p, (char *)v.mv_data + 12 + llen, rlen);
      stored->len = rlen;
      if (!stored->row) return nomem(j);
    }
  }
  return rc && rc != MDB_NOTFOUND ? rn_store_fail(err_of(j), rc, j->out->name) : 0;
}

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
static int left_step(rn_join *j, uint64_t lid, side *lb, side *la, const rn_change *undo)
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
    if (!(rc = left_fk(j, lb, &fb)) && !(rc = index_entry(j, &fb, lid, &rid_b, j->lookup ? &stored : NULL)) &&
        !j->lookup)
      rc = right_before(j, &fb, undo, &rb);
  }
  if (!rc && la->row) {
    if (lb->row && same_on_bytes(j, lb, la)) fa = fb;
    else rc = left_fk(j, la, &fa);
  }
  if (!rc && la->row) {
    /* The foreign key stayed and nothing undone hides the right row: the
     * row just read before the change is the current one (one read less). */
    if (lb->row && !undo && !j->lookup && same_fk(&fb, &fa)) ra = rb;
    else rc = right_current(j, &fa, &ra);
  }
  if (rc) goto out;
  /* Outer key joins: a side without a left row still has a right-only result. */
  if (j->kind == RN_JOIN_OUTER && !lb->row && la->row) rc = right_before(j, &fa, undo, &rb), fb = fa;
  if (!rc && j->kind == RN_JOIN_OUTER && lb->row && !la->row) rc = right_current(j, &fb, &ra), fa = fb;
  if (!rc && j->lookup) ob = stored; /* what was emitted, without asking the source again */
  else if (!rc) rc = make_result(j, lb, &rb, &fb, &ob);
  if (!rc) rc = make_result(j, la, &ra, &fa, &oa);
  if (rc) goto out;
  if (ob.row) {
    if (!rid_b || !lb->row || j->fns.selector) {
      if (!(rc = result_key(j, lid, lb, &fb, &kb))) rc = result_id(j, &kb, lid, true, &rid_b);
    }
  }
  if (!rc && oa.row) {
    /* Without a selector the result key follows from the left key alone,
     * which an update keeps: the entry's id stays, wherever the fk moved. */
    if (!j->fns.selector && lb->row && la->row && rid_b) {
      rid_a = rid_b;
    } else if (!(rc = result_key(j, lid, la, &fa, &ka))) {
      bool same_key = ob.row && kb.size == ka.size && memcmp(kb.data, ka.data, ka.size) == 0;
      if (same_key) rid_a = rid_b;
      else rc = result_id(j, &ka, lid, true, &rid_a);
    }
  }
  if (rc) goto out;
  if (j->fns.selector && ob.row && (!oa.row || rid_a != rid_b)) rc = result_id(j, &kb, lid, false, &rid_b);
  /* Index: the entry moves with the foreign key and is rewritten on every
   * change, since it holds the left row (and a lookup join's result). */
  if (!rc && lb->row && (!la->row || !same_fk(&fb, &fa))) rc = index_del(j, &fb, lid);
  if (!rc && la->row) {
    /* The entry keeps the id of the row's result key: for ever when that
     * key is fixed (default, key join), only while it exists with a selector. */
    uint64_t keep = oa.row ? rid_a : j->fns.selector ? 0 : rid_b;
    rc = index_put(j, &fa, lid, keep, la, &oa);
  }
  if (!rc) rc = emit_result(j, rid_b, &ob, rid_a, &oa);
out:
  msgpack_sbuffer_destroy(&kb);
  msgpack_sbuffer_destroy(&ka);
  return rc;
}

/* ---- the right side: fan-out ---- */

typedef struct entry {
  uint64_t lid, rid;
  const char *payload;    /* scratch copy */
  size_t len;
} entry;

typedef struct entries {
  entry *items;
  size_t n, cap;
} entries;

static int collect(rn_join *j, const fk *f, entries *out)
{
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn_of(j), j->index_dbi, &cur);
  if (rc) return rn_store_fail(err_of(j), rc, j->out->name);
  MDB_val k = { f->part_len, (void *)f->part }, v;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size != f->part_len + 8 || memcmp(k.mv_data, f->part, f->part_len) != 0) break;
    if (out->n == out->cap) {
      size_t cap = out->cap ? out->cap * 2 : 64;
      entry *items = realloc(out->items, cap * sizeof *items);
      if (!items) { mdb_cursor_close(cur); return nomem(j); }
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
    if (!e->payload) { mdb_cursor_close(cur); return nomem(j); }
  }
  mdb_cursor_close(cur);
  return rc == 0 || rc == MDB_NOTFOUND ? 0 : rn_store_fail(err_of(j), rc, j->out->name);
}

/* The current left row of an index entry: the entry holds it. */
static void left_row(const entry *e, side *l)
{
  l->row = e->len ? e->payload : NULL;
  l->len = e->len;
  l->vals = NULL;
}

/* Keeps the right copy of a derived right side current. */
static int right_copy(rn_join *j, const fk *ko, const fk *kn, const rn_change *c)
{
  if (j->right_native) return 0;
  int rc = 0;
  if (c->old && (!c->row || !same_fk(ko, kn))) {
    MDB_val k = { ko->len > 511 ? ko->part_len : ko->len, (void *)(ko->len > 511 ? ko->part : ko->enc) };
    rc = mdb_del(txn_of(j), j->right_dbi, &k, NULL);
    if (rc == MDB_NOTFOUND) rc = 0;
  }
  if (!rc && c->row) {
    MDB_val k = { kn->len > 511 ? kn->part_len : kn->len, (void *)(kn->len > 511 ? kn->part : kn->enc) };
    MDB_val v = { c->row_len, (void *)c->row };
    rc = mdb_put(txn_of(j), j->right_dbi, &k, &v, 0);
  }
  return rc ? rn_store_fail(err_of(j), rc, j->out->name) : 0;
}

/* Outer key join: a right key no left row holds has a right-only result. */
static int right_only(rn_join *j, const fk *f, side *o, side *n)
{
  side none = { 0 }, ro = { 0 }, rn = { 0 };
  int rc = make_result(j, &none, o, f, &ro);
  if (!rc) rc = make_result(j, &none, n, f, &rn);
  if (rc || (!ro.row && !rn.row)) return rc;
  msgpack_sbuffer k;
  msgpack_sbuffer_init(&k);
  rn_buf_write(&k, f->enc, f->len);
  uint64_t rid;
  rc = result_id(j, &k, 0, false, &rid);
  msgpack_sbuffer_destroy(&k);
  return rc ? rc : emit_result(j, rid, &ro, rid, &rn);
}

/* A right change: every left row that references the old or the new key
 * gets its result recomputed, in ascending left id (3); skip is a left id
 * already done (a self-join's own row). */
static int right_step(rn_join *j, const rn_change *c, uint64_t skip)
{
  side o = { c->old, c->old_len, NULL }, n = { c->row, c->row_len, NULL };
  fk ko = { .null = true }, kn = { .null = true };
  int rc = 0;
  if (o.row) rc = right_key(j, &o, &ko);
  if (!rc && n.row) rc = right_key(j, &n, &kn);
  if (!rc) rc = right_copy(j, &ko, &kn, c);
  if (rc || j->stream) return rc;
  entries es = { NULL, 0, 0 };
  if (o.row) rc = collect(j, &ko, &es);
  size_t from_old = es.n;
  if (!rc && n.row && !(o.row && same_fk(&ko, &kn))) rc = collect(j, &kn, &es);
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
    left_row(e, &l);
    if (!l.row) continue;
    /* The entry sits under the fk part of the right key it references; a
     * hashed (long) fk part is checked against the row itself. */
    bool under_old = i < from_old;
    const fk *at = under_old ? &ko : &kn;
    if (at->part_len == at->len) f = *at;
    else if ((rc = left_fk(j, &l, &f))) break;
    side rb = { 0 }, ra = { 0 }, ob, oa;
    if (o.row && same_fk(&f, &ko)) rb = o;
    if (n.row && same_fk(&f, &kn)) ra = n;
    if (!rb.row && !ra.row) continue; /* a long key's hash neighbour */
    rc = make_result(j, &l, &rb, &f, &ob);
    if (!rc) rc = make_result(j, &l, &ra, &f, &oa);
    uint64_t rid = e->rid;
    if (!rc && oa.row && !rid) {
      msgpack_sbuffer k;
      msgpack_sbuffer_init(&k);
      if (!(rc = result_key(j, e->lid, &l, &f, &k))) rc = result_id(j, &k, e->lid, true, &rid);
      msgpack_sbuffer_destroy(&k);
      if (!rc) rc = index_put(j, &f, e->lid, rid, &l, &oa);
    }
    if (!rc && ob.row && !oa.row && j->fns.selector) { /* the key is free again */
      msgpack_sbuffer k;
      msgpack_sbuffer_init(&k);
      uint64_t ignored;
      if (!(rc = result_key(j, e->lid, &l, &f, &k))) rc = result_id(j, &k, e->lid, false, &ignored);
      msgpack_sbuffer_destroy(&k);
      if (!rc) rc = index_put(j, &f, e->lid, 0, &l, NULL);
    }
    if (!rc) rc = emit_result(j, rid, &ob, rid, &oa);
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
  int rc = left_fk(j, &l, &f);
  if (!rc) rc = right_current(j, &f, &r);
  if (!rc) rc = make_result(j, &l, &r, &f, &res);
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
    int rc = left_step(j, c->id, &lb, &la, from == j->right ? c : NULL);
    if (rc || from != j->right) return rc;
    return right_step(j, c, c->id); /* a self-join: then the rows that reference it */
  }
  return right_step(j, c, 0);
}

/* ---- declaration ---- */

static void free_join(void *ctx)
{
  rn_join *j = ctx;
  if (j->fns.free_ctx) j->fns.free_ctx(j->fns.ctx);
  msgpack_sbuffer_destroy(&j->keybuf);
  free(j->on);
  free(j);
}

/* Left columns then right columns; a right column whose name clashes is
 * renamed "<right relation>.<column>". */
static rn_schema *default_schema(rn_pipeline *p, const char *name, rn_rel *left, rn_rel *right,
                                 bool stream, bool outer, bool keyed)
{
  rn_schema *s = rn_schema_new();
  if (!s) { rn_err_set(&p->err, RN_ENOMEM, "out of memory"); return NULL; }
  for (int pass = 0; pass < 2; pass++) {
    const rn_schema *in = pass ? right->schema : left->schema;
    for (int i = 0; i < in->ncols; i++) {
      const rn_column *c = &in->cols[i];
      char *cname = c->name;
      char *renamed = NULL;
      if (pass && rn_schema_slot(s, c->name, c->name_len) >= 0) {
        size_t n = strlen(right->name) + c->name_len + 2;
        renamed = malloc(n);
        if (!renamed) { rn_schema_free(s); rn_err_set(&p->err, RN_ENOMEM, "out of memory"); return NULL; }
        snprintf(renamed, n, "%s.%s", right->name, c->name);
        cname = renamed;
      }
      rn_schema *fields = NULL;
      if (c->fields) {
        fields = rn_schema_new();
        if (!fields || rn_schema_copy_columns(fields, c->fields, false, &p->err)) {
          rn_schema_free(fields);
          free(renamed);
          rn_schema_free(s);
          return NULL;
        }
      }
      bool nullable = c->nullable || pass == 1 || (outer && !c->is_key);
      int slot = rn_schema_add(s, cname, strlen(cname), c->type, nullable, fields, &p->err);
      free(renamed);
      if (slot < 0) { rn_err_prefix(&p->err, name); rn_schema_free(s); return NULL; }
    }
  }
  if (!stream && keyed && left->schema->nkey) {
    if (rn_schema_set_key(s, left->schema->key_slots, left->schema->nkey, name, &p->err)) {
      rn_schema_free(s);
      return NULL;
    }
  }
  return s;
}

static int check_spec(rn_pipeline *p, const char *name, rn_rel *left, rn_rel *right,
                      const rn_join_spec *spec, const rn_join_fns *fns, bool *key_join)
{
  const rn_schema *ls = left->schema, *rs = right->schema;
  *key_join = false;
  if (left->p != p || right->p != p) /* rows of one would be read in the other's transactions */
    return rn_err_set(&p->err, RN_EINVAL, "%s: %s and %s belong to different pipelines", name, left->name,
                      right->name);
  if (right->kind == RN_REL_LOOKUP && spec->kind == RN_JOIN_OUTER)
    return rn_err_set(&p->err, RN_EINVAL, "%s: a lookup has no rows of its own to outer-join", name);
  if (!right->tablelike && right->kind != RN_REL_LOOKUP)
    return rn_err_set(&p->err, RN_EINVAL, "%s: the right side of a join must be a table, and %s is a stream",
                      name, right->name);
  if (!rs->nkey)
    return rn_err_set(&p->err, RN_EINVAL, "%s: the right side of a join needs a key, and %s has none",
                      name, right->name);
  if (spec->on) {
    if (spec->non != rs->nkey)
      return rn_err_set(&p->err, RN_EINVAL, "%s: on names %d column%s but the key of %s has %d",
                        name, spec->non, spec->non == 1 ? "" : "s", right->name, rs->nkey);
    bool all_key = left->tablelike && ls->nkey == spec->non;
    for (int i = 0; i < spec->non; i++) {
      const rn_column *lc = &ls->cols[spec->on[i]], *rc = &rs->cols[rs->key_slots[i]];
      bool numeric = (lc->type == RN_T_INT || lc->type == RN_T_FLOAT) &&
                     (rc->type == RN_T_INT || rc->type == RN_T_FLOAT);
      if (lc->type != rc->type && !numeric && lc->type != RN_T_ANY)
        return rn_err_set(&p->err, RN_EINVAL, "%s: column \"%s\" (%s) cannot match key column \"%s\" of %s (%s)",
                          name, lc->name, rn_type_name(lc->type), rc->name, right->name, rn_type_name(rc->type));
      if (all_key && spec->on[i] != ls->key_slots[i]) all_key = false;
    }
    *key_join = all_key && !fns->selector;
  }
  if (spec->kind == RN_JOIN_OUTER && !*key_join)
    return rn_err_set(&p->err, RN_EINVAL,
                      "%s: kind = \"outer\" joins two tables on both keys (on = the left key, matching the key of %s)",
                      name, right->name);
  if (!left->tablelike && fns->selector)
    return rn_err_set(&p->err, RN_EINVAL, "%s: a stream join has no result key to select", name);
  return 0;
}

/* Builds the join's state from its inputs' current contents: at the first
 * declaration over existing rows, or when the state missed groups. */
typedef struct boot { rn_join *j; } boot;

static int boot_right(void *ctx, uint64_t id, const char *row, size_t len)
{
  (void)id;
  rn_join *j = ((boot *)ctx)->j;
  rn_change c = { RN_INSERT, id, row, len, NULL, 0 };
  side n = { row, len, NULL };
  fk kn, none = { .null = true };
  int rc = right_key(j, &n, &kn);
  return rc ? rc : right_copy(j, &none, &kn, &c);
}

static int boot_left(void *ctx, uint64_t id, const char *row, size_t len)
{
  rn_join *j = ((boot *)ctx)->j;
  side lb = { 0 }, la = { row, len, NULL };
  rn_rel *out = j->out; /* declared just now: nothing listens to it yet */
  int rc = left_step(j, id, &lb, &la, NULL);
  out->emitted[0] = out->emitted[1] = out->emitted[2] = 0;
  return rc;
}

static int rebuild(rn_join *j)
{
  MDB_txn *txn = txn_of(j);
  int rc = j->stream ? 0 : mdb_drop(txn, j->index_dbi, 0);
  if (!rc && !j->right_native && !j->lookup) rc = mdb_drop(txn, j->right_dbi, 0);
  if (rc) return rn_store_fail(err_of(j), rc, j->out->name);
  boot b = { j };
  if (!j->right_native && !j->lookup && (rc = rn_rel_scan(j->right, boot_right, &b))) return rc;
  if (j->stream) return 0;
  return rn_rel_scan(j->left, boot_left, &b);
}

/* Opens the join's databases and, when its state is new or stale,
 * rebuilds it (rn_open_derived_state). */
static int setup_state(void *ctx, bool created, bool rebuild_it)
{
  rn_join *j = ctx;
  rn_pipeline *p = j->out->p;
  const char *name = j->out->name;
  int rc = 0;
  if (!j->stream) rc = rn_state_dbi(p, p->store.wtxn, RN_DB_JOIN_INDEX, name, 0, &j->index_dbi);
  if (!rc && !j->stream) rc = rn_state_dbi(p, p->store.wtxn, RN_DB_JOIN_RESULTS, name, 0, &j->result_dbi);
  if (!rc && !j->right_native && !j->lookup) rc = rn_state_dbi(p, p->store.wtxn, RN_DB_JOIN_RIGHT, name, 0, &j->right_dbi);
  (void)created; /* a new join is built like a stale one: from its inputs */
  if (!rc && rebuild_it && j->out->stateful) rc = rebuild(j);
  return rc;
}

int rn_declare_join(rn_pipeline *p, const char *name, rn_rel *left, rn_rel *right,
                    const rn_join_spec *spec, const rn_join_fns *fns, rn_rel **out)
{
  rn_schema *schema = spec->schema;
  bool key_join = false;
  int rc = rn_check_declarable(p, name);
  if (!rc) rc = check_spec(p, name, left, right, spec, fns, &key_join);
  rn_join *j = rc ? NULL : calloc(1, sizeof *j);
  if (!rc && !j) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (!rc && spec->on && !(j->on = malloc(sizeof *j->on * (size_t)spec->non)))
    rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  bool stream = !left->tablelike;
  if (!rc && !schema &&
      !(schema = default_schema(p, name, left, right, stream, spec->kind == RN_JOIN_OUTER, !fns->selector)))
    rc = p->err.code;
  if (rc) {
    if (j) free(j->on);
    free(j);
    if (fns->free_ctx) fns->free_ctx(fns->ctx);
    rn_schema_free(schema);
    return rc;
  }
  j->kind = spec->kind;
  j->stream = stream;
  j->key_join = key_join;
  j->non = spec->on ? spec->non : 0;
  if (spec->on) memcpy(j->on, spec->on, sizeof *j->on * (size_t)spec->non);
  for (int i = 0; i < j->non; i++) if (j->on[i] + 1 > j->on_upto) j->on_upto = j->on[i] + 1;
  j->fns = *fns;
  j->left = left;
  j->right = right;
  msgpack_sbuffer_init(&j->keybuf);
  j->right_native = right->kind == RN_REL_TABLE;
  j->lookup = right->kind == RN_REL_LOOKUP;
  rn_rel *r = rn_rel_new(p, name, RN_REL_JOIN, schema);
  if (!r) {
    free_join(j);
    rn_schema_free(schema);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  j->out = r;
  r->ctx = j;
  r->input = left;
  r->tablelike = !stream;
  r->persistent = true;
  r->stateful = !stream || (!j->right_native && !j->lookup);

  rc = rn_open_derived_state(p, r, setup_state, j);
  if (!rc) rc = rn_push_ptr((void ***)&left->outputs, &left->noutputs, &left->outcap, r);
  if (!rc && right != left && rn_push_ptr((void ***)&right->outputs, &right->noutputs, &right->outcap, r))
    rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (rc) {
    if (left->noutputs && left->outputs[left->noutputs - 1] == r) left->noutputs--;
    rn_rel_discard_last(p);
    return rc;
  }
  *out = r;
  return 0;
}

/* ---- scanning results ---- */

/* A cursor on dbi in txn, or NULL with the error set. */
static MDB_cursor *scan_cursor(rn_rel *d, MDB_txn *txn, MDB_dbi dbi, int *rc)
{
  MDB_cursor *cur = NULL;
  *rc = mdb_cursor_open(txn, dbi, &cur);
  if (!*rc) return cur;
  *rc = rn_store_fail(&d->p->err, *rc, d->name);
  return NULL;
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
    uint32_t llen;
    memcpy(&llen, (const char *)v.mv_data + 8, 4);
    entry e = { rn_be64_get((const char *)k.mv_data + k.mv_size - 8), 0, (const char *)v.mv_data + 12, llen };
    memcpy(&e.rid, v.mv_data, 8);
    side l, r = { 0 }, res = { 0 };
    fk f;
    left_row(&e, &l);
    if (j->lookup) { /* the results it emitted */
      size_t rlen = v.mv_size - 12 - llen;
      res.row = rlen ? (const char *)v.mv_data + 12 + llen : NULL;
      res.len = rlen;
    } else {
      if (l.row) rc = left_fk(j, &l, &f);
      if (!rc && l.row) rc = right_current(j, &f, &r);
      if (!rc && l.row) rc = make_result(j, &l, &r, &f, &res);
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
    fk f = { .null = false, .enc = k.mv_data, .len = k.mv_size };
    set_part(&f);
    side none = { 0 }, r = { 0 }, res = { 0 };
    entries es = { NULL, 0, 0 };
    rc = collect(j, &f, &es);
    free(es.items);
    if (!rc && es.n == 0) rc = right_current(j, &f, &r);
    if (!rc && r.row) rc = make_result(j, &none, &r, &f, &res);
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

const rn_rel_ops rn_join_ops = { .name = "join", .apply = rn_join_apply, .scan = rn_join_scan, .free = free_join };
