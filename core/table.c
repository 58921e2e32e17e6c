/* table.c — source relations: row ids, stored rows, and their changes.
 *
 * Invariants (cited in asserts and specs as ROWID-n):
 * (1) A keyed table maps each key it has ever held to one id, for ever: the
 *     entry of a deleted row stays as a tombstone, so re-inserting the key
 *     gets its old id back.
 * (2) New ids count up from 1 per relation; the counter is written at commit
 *     and restored on rollback, so a rolled-back group uses up no id.
 * (3) A keyless table gives every insert a new id; delete and replace find
 *     the stored row equal to the given one with the smallest id.
 * (4) A change that leaves a row byte-for-byte as it was is dropped here and
 *     never reaches an operator or a sink.
 *
 * Keyed value layout (the key is the encoded primary key, key.h):
 *
 *     |u64 id|u8 flags|[u32 klen|full key]|row msgpack|
 *
 * flags: 1 = live (a row follows), 2 = long key. Keys longer than
 * RN_KEY_INLINE_MAX are stored as |first RN_KEY_INLINE_MAX bytes|u64
 * hash|u8 probe| with the full key in the value: a lookup walks the probes
 * comparing full keys. Entries are never removed (1), so probing never
 * meets a hole that hides a later probe. Long keys sort by their first
 * RN_KEY_INLINE_MAX bytes, then in hash order. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "key.h"
#include "longkey.h"
#include "ops.h"
#include "pipeline.h"
#include "row.h"
#include "rowcache.h"
#include "snapshot.h"
#include "wb.h"

#define RN_KEY_INLINE_MAX RN_LONGKEY_INLINE /* longer keys are stored hashed (longkey.h) */
#define RN_FLAG_LIVE 1
#define RN_FLAG_LONGKEY 2

typedef struct located {
  char stored[RN_KEY_INLINE_MAX + 9]; /* the stored form of a long key */
  MDB_cursor *cur;        /* the table's cursor in the write transaction, left by the search
                             for key: at its entry when found, else where it would go */
  MDB_val key;            /* the key as stored in rows_dbi */
  bool found;             /* an entry (live or tombstone) exists */
  bool live;              /* it holds a row */
  uint64_t id;
  const char *row;        /* into LMDB: copy before writing */
  size_t row_len;
} located;

static void parse_value(const MDB_val *v, located *l)
{
  const char *d = v->mv_data;
  memcpy(&l->id, d, 8);
  uint8_t flags = (uint8_t)d[8];
  size_t off = 9;
  if (flags & RN_FLAG_LONGKEY) {
    uint32_t klen;
    memcpy(&klen, d + off, 4);
    off += 4 + klen;
  }
  l->found = true;
  l->live = flags & RN_FLAG_LIVE;
  l->row = l->live ? d + off : NULL;
  l->row_len = l->live ? v->mv_size - off : 0;
}

/* The whole key a long key's entry keeps (longkey.h). */
static bool long_key_of(void *ctx, const MDB_val *v, const char **key, size_t *klen)
{
  (void)ctx;
  const char *d = v->mv_data;
  uint32_t stored_len;
  if (v->mv_size < 13 || !(d[8] & RN_FLAG_LONGKEY)) return false;
  memcpy(&stored_len, d + 9, 4);
  if (v->mv_size - 13 < stored_len) return false;
  *key = d + 13;
  *klen = stored_len;
  return true;
}

/* The table's cursor in the open write transaction (one per transaction:
 * a change finds its key once and writes there without a second descent). */
static MDB_cursor *rows_cursor(rn_rel *t)
{
  rn_store *s = &t->p->store;
  if (t->rows_cur && t->rows_cur_txn == s->txn_serial) return t->rows_cur;
  if (mdb_cursor_open(s->wtxn, t->rows_dbi, &t->rows_cur)) return t->rows_cur = NULL;
  t->rows_cur_txn = s->txn_serial;
  return t->rows_cur;
}

/* Finds the entry of an encoded key. */
static int locate(rn_rel *t, MDB_txn *txn, const char *key, size_t klen, located *l)
{
  l->found = l->live = false;
  l->cur = NULL;
  l->id = 0;
  MDB_val v;
  if (klen <= RN_KEY_INLINE_MAX) {
    l->key.mv_data = (void *)key;
    l->key.mv_size = klen;
    rn_store *s = &t->p->store;
    MDB_cursor *cur = txn && txn == s->wtxn && !s->wb ? rows_cursor(t) : NULL;
    int rc = cur ? mdb_cursor_get(cur, &l->key, &v, MDB_SET) : rn_wb_get(s, txn, t->rows_dbi, &l->key, &v);
    if (cur && (rc == 0 || rc == MDB_NOTFOUND)) l->cur = cur;
    if (rc == MDB_NOTFOUND) return 0;
    if (rc) return rn_store_fail(&t->p->err, rc, t->name);
    parse_value(&v, l);
    return 0;
  }
  l->key.mv_data = l->stored;
  l->key.mv_size = sizeof l->stored;
  int rc = rn_longkey_find(&t->p->store, txn, t->rows_dbi, key, klen, long_key_of, NULL, l->stored, &v);
  if (rc == 0) parse_value(&v, l);
  if (rc == RN_LONGKEY_FULL) return rn_err_set(&t->p->err, RN_ESTORE, "%s: too many long keys share one hash", t->name);
  return rc == 0 || rc == MDB_NOTFOUND ? 0 : rn_store_fail(&t->p->err, rc, t->name);
}

/* Starts the entry's value in valbuf: |id|flags|[klen|key]|, the row (when
 * live) to be packed after it. -1 (noted) when out of memory. */
static int value_head(rn_rel *t, uint64_t id, bool live, const char *key, size_t klen)
{
  msgpack_sbuffer *b = &t->p->valbuf;
  bool longkey = klen > RN_KEY_INLINE_MAX;
  size_t head = longkey ? 13 + klen : 9;
  msgpack_sbuffer_clear(b);
  if (rn_sbuf_reserve(b, head)) return -1;
  memcpy(b->data, &id, 8);
  b->data[8] = (char)((live ? RN_FLAG_LIVE : 0) | (longkey ? RN_FLAG_LONGKEY : 0));
  if (longkey) {
    uint32_t k32 = (uint32_t)klen;
    memcpy(b->data + 9, &k32, 4);
    memcpy(b->data + 13, key, klen);
  }
  b->size = head;
  return 0;
}

/* Writes valbuf (value_head, then the row of row_len bytes, if any, at its
 * end) for the located key (the one in keybuf). */
static int put_value(rn_rel *t, const located *l, size_t row_len)
{
  msgpack_sbuffer *b = &t->p->valbuf;
  MDB_val k = l->key, v = { b->size, b->data };
  /* Found by the table's cursor: overwrite in place, no second descent; not
   * found: put through the cursor, which LMDB searches from the leaf it was
   * left on (no descent from the root when the key lies within that leaf). */
  int rc = !l->cur ? rn_wb_put(&t->p->store, t->p->store.wtxn, t->rows_dbi, &k, &v, 0)
                   : mdb_cursor_put(l->cur, &k, &v, l->found ? MDB_CURRENT : 0);
  if (l->cur && !rc) rn_store_wrote(&t->p->store, t->rows_dbi);
  if (rc) return rn_store_fail(&t->p->err, rc, t->name);
  rn_store *s = &t->p->store;
  if (s->rowcache) { /* rowcache.h (2) */
    bool live = b->data[8] & RN_FLAG_LIVE;
    uint64_t id;
    memcpy(&id, b->data, 8); /* value_head's */
    rn_cached_row now = { true, live, id, live ? b->data + b->size - row_len : NULL, row_len };
    rn_rowcache_wrote(s->rowcache, t->rows_dbi, t->p->keybuf.data, t->p->keybuf.size, &now);
  }
  return 0;
}

static int encode_key(rn_rel *t, msgpack_object *vals)
{
  msgpack_sbuffer_clear(&t->p->keybuf);
  char col[300];
  if (rn_key_encode(t->schema, vals, &t->p->keybuf) != 0)
    return rn_err_set(&t->p->err, RN_EINVAL, "%s: %s: NaN cannot be part of a key", t->name,
                      rn_key_nan_column(t->schema, vals, col, sizeof col));
  return 0;
}

/* Packs vals into rowbuf and returns a scratch copy (stable while the change
 * runs, even if a callback reads another row into rowbuf). */
static const char *pack_row(rn_rel *t, const msgpack_object *vals, size_t *len)
{
  msgpack_sbuffer_clear(&t->p->rowbuf);
  rn_row_pack(t->schema, vals, &t->p->rowbuf);
  *len = t->p->rowbuf.size;
  return rn_scratch_copy(t->p, t->p->rowbuf.data, t->p->rowbuf.size);
}

static int key_error(rn_rel *t, int code, const char *what, const msgpack_object *vals)
{
  char kbuf[256];
  rn_key_format(t->schema, vals, kbuf, sizeof kbuf);
  if (code == RN_EEXIST)
    return rn_err_set(&t->p->err, code, "%s: %s: a row with key (%s) already exists", t->name, what, kbuf);
  return rn_err_set(&t->p->err, code, "%s: %s: no row with key (%s)", t->name, what, kbuf);
}

/* rc of a source change, counted in p:stats().changes when it went
 * through: one that failed downstream (a map, a sink) is none, so a count
 * taken at begin says how many changes a rollback took with it. */
static int counted(rn_pipeline *p, int rc)
{
  if (!rc) p->stats.changes++;
  return rc;
}

/* ---- keyed tables ---- */

/* Writes the row packed in valbuf after value_head (at row_at) at the
 * located key, and emits the change: the readers get the row from the
 * replay log's copy (rn_source_emit), as valbuf is anybody's next. */
static int keyed_write(rn_rel *t, located *l, size_t row_at)
{
  rn_pipeline *p = t->p;
  const char *row = p->valbuf.data + row_at;
  size_t len = p->valbuf.size - row_at;
  if (l->live && len == l->row_len && memcmp(l->row, row, len) == 0) return 0; /* (4) */
  const char *old = l->live ? rn_scratch_copy(p, l->row, l->row_len) : NULL; /* the put overwrites it */
  if (l->live && !old) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  uint64_t id = l->found ? l->id : t->next_id++;                             /* (1), (2) */
  int rc = put_value(t, l, len);
  if (rc) return rc;
  rn_change c = { old ? RN_UPDATE : RN_INSERT, id, row, len, old, l->row_len };
  if (!old) t->count++;
  return counted(p, rn_source_emit(t, &c));
}

static int keyed_locate(rn_rel *t, msgpack_object *vals, uint8_t *given, rn_rowmode mode,
                        located *l)
{
  rn_pipeline *p = t->p;
  int rc = rn_row_normalize(t->schema, t->name, mode, vals, given, &p->scratch, &p->err);
  if (rc) return rc;
  rc = encode_key(t, vals);
  if (rc) return rc;
  return locate(t, p->store.wtxn, p->keybuf.data, p->keybuf.size, l);
}

/* value_head for the located key's next write: its id, or the one a new
 * key gets (1), (2). */
static int keyed_head(rn_rel *t, const located *l, bool live)
{
  uint64_t id = l->found ? l->id : t->next_id;
  if (value_head(t, id, live, t->p->keybuf.data, t->p->keybuf.size) != 0)
    return rn_err_set(&t->p->err, RN_ENOMEM, "out of memory");
  return 0;
}

static int keyed_insert(rn_rel *t, msgpack_object *vals, uint8_t *given, bool upsert)
{
  located l;
  int rc = keyed_locate(t, vals, given, RN_ROW_FULL, &l);
  if (rc) return rc;
  if (l.live && !upsert) return key_error(t, RN_EEXIST, "insert", vals);
  rc = keyed_head(t, &l, true);
  if (rc) return rc;
  size_t row_at = t->p->valbuf.size;
  rn_row_pack(t->schema, vals, &t->p->valbuf);
  return keyed_write(t, &l, row_at);
}

/* The columns not given keep their bytes (rn_row_patch reads the old row
 * where locate found it: nothing writes before keyed_write copies it). */
static int keyed_update(rn_rel *t, msgpack_object *vals, uint8_t *given)
{
  rn_pipeline *p = t->p;
  located l;
  int rc = keyed_locate(t, vals, given, RN_ROW_PATCH, &l);
  if (rc) return rc;
  if (!l.live) return key_error(t, RN_ENOTFOUND, "update", vals);
  rc = keyed_head(t, &l, true);
  if (rc) return rc;
  size_t row_at = p->valbuf.size;
  if (rn_row_patch(t->schema, l.row, l.row_len, vals, given, &p->valbuf) != 0)
    return rn_err_set(&p->err, RN_ESTORE, "%s: a stored row could not be decoded", t->name);
  return keyed_write(t, &l, row_at);
}

static int keyed_delete(rn_rel *t, msgpack_object *vals, uint8_t *given)
{
  rn_pipeline *p = t->p;
  located l;
  int rc = keyed_locate(t, vals, given, RN_ROW_KEY, &l);
  if (rc) return rc;
  if (!l.live) return key_error(t, RN_ENOTFOUND, "delete", vals);
  size_t old_len = l.row_len;
  const char *old = rn_scratch_copy(p, l.row, l.row_len);
  if (!old) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  rc = keyed_head(t, &l, false); /* a tombstone (1) */
  if (!rc) rc = put_value(t, &l, 0);
  if (rc) return rc;
  t->count--;
  rn_change c = { RN_DELETE, l.id, NULL, 0, old, old_len };
  return counted(p, rn_source_emit(t, &c));
}

/* ---- keyless tables ---- */

/* Finds the stored row equal to row (rn_row_same) with the smallest id (3);
 * *id = 0 if none. stored (may be NULL): that row as stored, which may
 * differ from row in the sign of a zero, copied into the scratch zone. */
static int keyless_find(rn_rel *t, MDB_txn *txn, const char *row, size_t len, uint64_t *id, const char **stored)
{
  *id = 0;
  bool nomem = false;
  uint64_t h = rn_row_hash(row, len);
  MDB_val k = { 8, &h }, v;
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn, t->hash_dbi, &cur);
  if (rc) return rn_store_fail(&t->p->err, rc, t->name);
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_KEY); rc == 0;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT_DUP)) {
    MDB_val rk = { 8, v.mv_data }, rv;
    if (mdb_get(txn, t->rows_dbi, &rk, &rv) == 0 && rn_row_same(rv.mv_data, rv.mv_size, row, len)) {
      *id = rn_be64_get(v.mv_data);
      if (stored) *stored = memcmp(rv.mv_data, row, len) ? rn_scratch_copy(t->p, rv.mv_data, len) : row;
      nomem = stored && !*stored;
      break;
    }
  }
  mdb_cursor_close(cur);
  if (nomem) return rn_err_set(&t->p->err, RN_ENOMEM, "out of memory");
  return rc == 0 || rc == MDB_NOTFOUND ? 0 : rn_store_fail(&t->p->err, rc, t->name);
}

static int keyless_link(rn_rel *t, uint64_t id, const char *row, size_t len, bool add)
{
  MDB_txn *txn = t->p->store.wtxn;
  char idk[8];
  rn_be64_put(idk, id);
  uint64_t h = rn_row_hash(row, len);
  MDB_val rk = { 8, idk }, rv = { len, (void *)row }, hk = { 8, &h }, hv = { 8, idk };
  int rc;
  if (add) {
    rc = mdb_put(txn, t->rows_dbi, &rk, &rv, MDB_NOOVERWRITE); /* never over a stored row */
    if (rc == MDB_KEYEXIST) /* only a damaged "n:" record gives a stored row's id */
      return rn_err_set(&t->p->err, RN_ESTORE, "state damaged: %s: %s: row id %llu is taken (its counters are behind "
                        "its rows)", t->p->store.path, t->name, (unsigned long long)id);
    if (!rc) rc = mdb_put(txn, t->hash_dbi, &hk, &hv, 0);
  } else {
    rc = mdb_del(txn, t->hash_dbi, &hk, &hv);
    if (!rc) rc = mdb_del(txn, t->rows_dbi, &rk, NULL);
  }
  if (!rc) rn_store_wrote(&t->p->store, t->rows_dbi), rn_store_wrote(&t->p->store, t->hash_dbi);
  return rc ? rn_store_fail(&t->p->err, rc, t->name) : 0;
}

static int keyless_row(rn_rel *t, msgpack_object *vals, uint8_t *given, const char **row, size_t *len)
{
  int rc = rn_row_normalize(t->schema, t->name, RN_ROW_FULL, vals, given, &t->p->scratch, &t->p->err);
  if (rc) return rc;
  *row = pack_row(t, vals, len);
  return *row ? 0 : rn_err_set(&t->p->err, RN_ENOMEM, "out of memory");
}

static int no_equal_row(rn_rel *t, const char *what)
{
  return rn_err_set(&t->p->err, RN_ENOTFOUND, "%s: %s: no stored row equals the given row", t->name, what);
}

static int keyless_insert(rn_rel *t, msgpack_object *vals, uint8_t *given)
{
  const char *row;
  size_t len;
  int rc = keyless_row(t, vals, given, &row, &len);
  if (rc) return rc;
  uint64_t id = t->next_id++; /* (3) */
  rc = keyless_link(t, id, row, len, true);
  if (rc) return rc;
  t->count++;
  rn_change c = { RN_INSERT, id, row, len, NULL, 0 };
  return counted(t->p, rn_source_emit(t, &c));
}

static int keyless_delete(rn_rel *t, msgpack_object *vals, uint8_t *given)
{
  const char *row;
  size_t len;
  uint64_t id;
  int rc = keyless_row(t, vals, given, &row, &len);
  if (!rc) rc = keyless_find(t, t->p->store.wtxn, row, len, &id, &row); /* the row deleted is the stored one */
  if (rc) return rc;
  if (!id) return no_equal_row(t, "delete");
  rc = keyless_link(t, id, row, len, false);
  if (rc) return rc;
  t->count--;
  rn_change c = { RN_DELETE, id, NULL, 0, row, len };
  return counted(t->p, rn_source_emit(t, &c));
}

static int keyless_replace(rn_rel *t, msgpack_object *old, uint8_t *old_given,
                           msgpack_object *vals, uint8_t *given)
{
  const char *orow, *row;
  size_t olen, len;
  uint64_t id;
  int rc = keyless_row(t, old, old_given, &orow, &olen);
  if (!rc) rc = keyless_row(t, vals, given, &row, &len);
  if (!rc) rc = keyless_find(t, t->p->store.wtxn, orow, olen, &id, &orow);
  if (rc) return rc;
  if (!id) return no_equal_row(t, "update");
  if (olen == len && memcmp(orow, row, len) == 0) return 0; /* (4) */
  rc = keyless_link(t, id, orow, olen, false);
  if (!rc) rc = keyless_link(t, id, row, len, true);
  if (rc) return rc;
  rn_change c = { RN_UPDATE, id, row, len, orow, olen };
  return counted(t->p, rn_source_emit(t, &c));
}

/* ---- streams ---- */

static int stream_insert(rn_rel *s, msgpack_object *vals, uint8_t *given)
{
  const char *row;
  size_t len;
  int rc = keyless_row(s, vals, given, &row, &len);
  if (rc) return rc;
  rn_change c = { RN_INSERT, s->next_id++, row, len, NULL, 0 };
  s->count++; /* the ids given: next_id went back below it when damaged (store.h) */
  return counted(s->p, rn_source_emit(s, &c));
}

/* ---- the entry points: each one change, bracketed as a group needs ---- */

static int not_for(rn_rel *t, const char *what, const char *why)
{
  return rn_err_set(&t->p->err, RN_EINVAL, "%s: %s: %s", t->name, what, why);
}

static int insert_any(rn_rel *t, msgpack_object *vals, uint8_t *given, bool upsert)
{
  if (t->kind == RN_REL_STREAM)
    return upsert ? not_for(t, "upsert", "a stream only takes inserts") : stream_insert(t, vals, given);
  if (t->kind != RN_REL_TABLE) return not_for(t, "insert", "a derived relation takes no changes");
  if (t->schema->nkey) return keyed_insert(t, vals, given, upsert);
  return upsert ? not_for(t, "upsert", "a keyless table has no key to upsert by")
                : keyless_insert(t, vals, given);
}

/* Runs one change as a group needs it: entered, retried after the map grew
 * (GROUP-5), left (committed or rolled back). A try that went through but
 * for a callback's read that filled the map (the callback caught the
 * error) was counted in p:stats().changes: the retry counts it, once. */
#define RUN_CHANGE(p, call) do { \
    int rc_ = rn_change_enter(p); \
    if (rc_) return rc_; \
    uint64_t counted_ = (p)->stats.changes; \
    rc_ = rn_group_check_store(p, (call)); /* a callback's read may have filled the map */ \
    while (rc_ == RN_EFULL && rn_group_regrow_change(p) == 0) { \
      (p)->stats.changes = counted_; \
      rc_ = rn_group_check_store(p, (call)); \
    } \
    return rn_change_leave(p, rc_); \
  } while (0)

int rn_table_insert(rn_rel *t, msgpack_object *vals, uint8_t *given)
{
  RUN_CHANGE(t->p, insert_any(t, vals, given, false));
}

int rn_table_upsert(rn_rel *t, msgpack_object *vals, uint8_t *given)
{
  RUN_CHANGE(t->p, insert_any(t, vals, given, true));
}

static int update_any(rn_rel *t, msgpack_object *vals, uint8_t *given)
{
  if (t->kind != RN_REL_TABLE) return not_for(t, "update", "only tables take updates");
  if (!t->schema->nkey) return not_for(t, "update", "a keyless table is updated with (old_row, new_row)");
  return keyed_update(t, vals, given);
}

int rn_table_update(rn_rel *t, msgpack_object *vals, uint8_t *given)
{
  RUN_CHANGE(t->p, update_any(t, vals, given));
}

static int delete_any(rn_rel *t, msgpack_object *vals, uint8_t *given)
{
  if (t->kind != RN_REL_TABLE) return not_for(t, "delete", "only tables take deletes");
  return t->schema->nkey ? keyed_delete(t, vals, given) : keyless_delete(t, vals, given);
}

int rn_table_delete(rn_rel *t, msgpack_object *vals, uint8_t *given)
{
  RUN_CHANGE(t->p, delete_any(t, vals, given));
}

static int replace_any(rn_rel *t, msgpack_object *old, uint8_t *old_given,
                       msgpack_object *vals, uint8_t *given)
{
  if (t->kind != RN_REL_TABLE || t->schema->nkey)
    return not_for(t, "update", "(old_row, new_row) is for keyless tables");
  return keyless_replace(t, old, old_given, vals, given);
}

int rn_table_replace(rn_rel *t, msgpack_object *old, uint8_t *old_given,
                     msgpack_object *vals, uint8_t *given)
{
  RUN_CHANGE(t->p, replace_any(t, old, old_given, vals, given));
}

/* A logged change applied again to the same starting state gives the same
 * result: an INSERT or UPDATE re-applies its new row as an upsert (keyed)
 * or insert/replace (keyless); a DELETE deletes its old row's key or row. */
int rn_source_reapply(rn_rel *t, const rn_change *c)
{
  rn_pipeline *p = t->p;
  int n = t->schema->ncols;
  const char *bytes = c->verb == RN_DELETE || (c->verb == RN_UPDATE && !t->schema->nkey && t->kind == RN_REL_TABLE)
                          ? c->old : c->row;
  size_t len = bytes == c->old ? c->old_len : c->row_len;
  const msgpack_object *decoded = rn_row_unpack(bytes, len, n, &p->scratch);
  msgpack_object *vals = rn_zone_malloc(&p->scratch, sizeof *vals * (size_t)(n ? n : 1));
  uint8_t *given = rn_zone_malloc(&p->scratch, (size_t)(n ? n : 1));
  if (!decoded || !vals || !given) return rn_err_set(&p->err, RN_ENOMEM, "%s: replaying a change", t->name);
  memcpy(vals, decoded, sizeof *vals * (size_t)n);
  memset(given, 1, (size_t)n);
  if (c->verb == RN_DELETE) return delete_any(t, vals, given);
  if (c->verb == RN_INSERT || t->schema->nkey) return insert_any(t, vals, given, t->schema->nkey > 0);
  const msgpack_object *nd = rn_row_unpack(c->row, c->row_len, n, &p->scratch);
  msgpack_object *nv = rn_zone_malloc(&p->scratch, sizeof *nv * (size_t)(n ? n : 1));
  if (!nd || !nv) return rn_err_set(&p->err, RN_ENOMEM, "%s: replaying a change", t->name);
  memcpy(nv, nd, sizeof *nv * (size_t)n);
  return keyless_replace(t, vals, given, nv, given);
}

/* ---- reads ---- */

static int get_in(rn_rel *t, MDB_txn *txn, msgpack_object *vals, uint8_t *given, int *found,
                  uint64_t *id, const char **row, size_t *len)
{
  rn_pipeline *p = t->p;
  rn_rowmode mode = t->schema->nkey ? RN_ROW_KEY : RN_ROW_FULL;
  int rc = rn_row_normalize(t->schema, t->name, mode, vals, given, &p->scratch, &p->err);
  if (rc) return rc;
  msgpack_sbuffer_clear(&p->rowbuf);
  if (!t->schema->nkey) {
    rn_row_pack(t->schema, vals, &p->rowbuf);
    rc = keyless_find(t, txn, p->rowbuf.data, p->rowbuf.size, id, NULL);
    *found = !rc && *id;
    *row = p->rowbuf.data;
    *len = p->rowbuf.size;
    return rc;
  }
  rc = encode_key(t, vals);
  located l;
  if (!rc) rc = locate(t, txn, p->keybuf.data, p->keybuf.size, &l);
  if (rc) return rc;
  if (l.live && rn_buf_write(&p->rowbuf, l.row, l.row_len)) /* the caller reads row_len bytes of the copy */
    return rn_err_set(&p->err, RN_ENOMEM, "%s: out of memory", t->name);
  *found = l.live;
  if (l.live) {
    *id = l.id;
    *row = p->rowbuf.data;
    *len = l.row_len;
  }
  return 0;
}

int rn_table_get(rn_rel *t, msgpack_object *vals, uint8_t *given, int *found,
                 uint64_t *id, const char **row, size_t *len)
{
  rn_pipeline *p = t->p;
  *found = 0;
  if (t->kind != RN_REL_TABLE) return not_for(t, "get", "only tables hold rows to read");
  MDB_txn *txn;
  int rc = rn_store_reader(&p->store, &txn, &p->err);
  if (rc) return rc;
  rc = get_in(t, txn, vals, given, found, id, row, len);
  rn_store_reader_done(&p->store);
  if (p->state == RN_IDLE) msgpack_zone_clear(&p->scratch);
  return rc;
}

/* The row cache serves reads in the write transaction without the
 * write-back layer (which keeps what it reads itself). */
static rn_rowcache *row_cache(rn_rel *t, MDB_txn *txn)
{
  rn_store *s = &t->p->store;
  if (!txn || txn != s->wtxn || s->wb) return NULL;
  if (!s->rowcache) s->rowcache = rn_rowcache_new(); /* NULL: uncached, slower, not wrong */
  return s->rowcache;
}

int rn_table_row_by_key(rn_rel *t, MDB_txn *txn, const char *key, size_t klen,
                        uint64_t *id, const char **row, size_t *len)
{
  rn_rowcache *cache = row_cache(t, txn);
  rn_cached_row c;
  if (cache && rn_rowcache_get(cache, t->rows_dbi, key, klen, &c)) {
    *row = c.row;
    *len = c.row_len;
    *id = c.id;
    return 0;
  }
  located l;
  int rc = locate(t, txn, key, klen, &l);
  *row = !rc && l.live ? l.row : NULL;
  *len = l.row_len;
  *id = l.id;
  if (!rc && cache) {
    c = (rn_cached_row){ l.found, l.live, l.id, l.row, l.row_len };
    rn_rowcache_fill(cache, t->rows_dbi, key, klen, &c);
  }
  return rc;
}

int rn_table_scan_txn(rn_rel *t, MDB_txn *txn, rn_scan_fn fn, void *ctx)
{
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn, t->rows_dbi, &cur);
  if (rc) return rn_store_fail(&t->p->err, rc, t->name);
  MDB_val k, v;
  int mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
  for (; !rc && mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (!t->schema->nkey) {
      rc = fn(ctx, rn_be64_get(k.mv_data), v.mv_data, v.mv_size);
      continue;
    }
    located l;
    parse_value(&v, &l);
    if (l.live) rc = fn(ctx, l.id, l.row, l.row_len);
  }
  if (!rc && mrc != MDB_NOTFOUND) rc = rn_store_fail(&t->p->err, mrc, t->name);
  mdb_cursor_close(cur);
  return rc;
}

/* ---- cursors ---- */

struct rn_table_cursor {
  rn_rel *t;              /* NULL once the pipeline closed under it */
  rn_table_cursor *next, *prev; /* the pipeline's open cursors */
  rn_snapshot view;       /* own read transaction, or the group's */
  uint64_t group;         /* the group it runs in (0: none) */
  MDB_cursor *cur;
  bool started;
  bool grown;             /* opened between groups, its read transaction ended by a growth of the map */
  /* A group's cursor: the write transaction cur belongs to (the store's
   * txn_serial) and the key it returned last. A regrow goes on with the
   * group in a new transaction (group.c (5)): cur is opened again there,
   * after that key. */
  uint64_t txn;
  uint16_t last_len;
  char last[512];
};

/* A cursor of a group's transaction dies with the group (LMDB frees it). */
static bool group_cursor_dead(const rn_table_cursor *c)
{
  const rn_pipeline *p = c->t->p;
  return !c->view.own && (!p->store.wtxn || c->group != p->group_serial);
}

/* A group's cursor whose transaction a regrow replaced (its cursor went
 * with it): opened in the new one, on the last key it returned — or,
 * that row gone since, before the first one past it (so the next step
 * reads it), or not started when there is none before. */
static int cursor_reopen(rn_table_cursor *c)
{
  rn_pipeline *p = c->t->p;
  c->view.txn = p->store.wtxn;
  c->txn = p->store.txn_serial;
  int rc = rn_wb_cursor_open(&p->store, c->view.txn, c->t->rows_dbi, false, &c->cur);
  if (rc || !c->started) return rc;
  MDB_val k = { c->last_len, c->last }, v;
  rc = mdb_cursor_get(c->cur, &k, &v, MDB_SET_RANGE);
  if (rc == MDB_NOTFOUND) rc = mdb_cursor_get(c->cur, &k, &v, MDB_LAST); /* every key is before it */
  else if (!rc && (k.mv_size != c->last_len || memcmp(k.mv_data, c->last, c->last_len) != 0))
    rc = mdb_cursor_get(c->cur, &k, &v, MDB_PREV);
  if (rc == MDB_NOTFOUND) c->started = false, rc = 0; /* nothing before it: start at the first */
  return rc;
}

/* A group's cursor before a step: in the group's transaction (opened again
 * there after a regrow), and the group's writes of t since the last step
 * in LMDB, where it reads. Writing them may fill the map: in a group the
 * host runs (not from a callback) the map then grows and the group goes
 * on in a new transaction (group.c (5)), as after a change that fills it;
 * if that fails, the group is rolled back. From a callback the error
 * returns, the store noting it: the group grows the map when it commits. */
static int group_cursor_ready(rn_table_cursor *c)
{
  rn_rel *t = c->t;
  rn_pipeline *p = t->p;
  for (;;) {
    int mrc = c->txn != p->store.txn_serial ? cursor_reopen(c) : 0; /* it writes the entries too: the map may fill there */
    if (mrc) c->cur = NULL;
    else mrc = rn_wb_sync(&p->store, c->view.txn, t->rows_dbi);
    if (!mrc) return 0;
    int rc = rn_store_fail(&p->err, mrc, t->name);
    if (p->state != RN_OPEN) return rc;
    if (rc != RN_EFULL || rn_group_regrow(p) != 0) return rn_group_fail(p, p->err.code, p->err.msg);
  }
}

int rn_table_cursor_open(rn_rel *t, rn_table_cursor **out)
{
  rn_pipeline *p = t->p;
  if (t->kind != RN_REL_TABLE) return not_for(t, "rows", "only tables hold rows to read");
  rn_snapshot view;
  int rc = rn_snapshot_open(p, t->name, &view); /* outside a group: a snapshot of its own */
  if (rc) return rc;
  rn_table_cursor *c = calloc(1, sizeof *c);
  if (!c) {
    rn_snapshot_close(&view);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  c->t = t;
  c->view = view;
  if (!view.own) c->group = p->group_serial;
  if (view.own) {
    c->txn = p->store.txn_serial;
    rc = rn_wb_cursor_open(&p->store, view.txn, t->rows_dbi, false, &c->cur); /* a read transaction: plain LMDB */
    if (rc) rc = rn_store_fail(&p->err, rc, t->name);
  } else {
    c->txn = 0; /* opened as after a regrow: writing the group's entries of t may fill the map */
    rc = group_cursor_ready(c);
  }
  if (rc) {
    rn_snapshot_close(&c->view);
    free(c);
    return rc;
  }
  c->next = p->cursors;
  if (p->cursors) p->cursors->prev = c;
  p->cursors = c;
  *out = c;
  return 0;
}

int rn_table_cursor_next(rn_table_cursor *c, uint64_t *id, const char **row, size_t *len, int *done)
{
  rn_rel *t = c->t;
  *done = 0;
  if (!t) { *done = 1; return 0; }
  if (c->grown)
    return rn_err_set(&t->p->err, RN_EMISUSE, "%s: rows(): the iteration began before the state grew (its map was "
                      "enlarged, ending the iteration's read): begin it again", t->name);
  if (!c->cur || group_cursor_dead(c)) {
    c->cur = NULL;
    return rn_err_set(&t->p->err, RN_EMISUSE, "%s: rows(): the group this iteration ran in has ended", t->name);
  }
  MDB_val k, v;
  int wrc = c->view.own ? 0 : group_cursor_ready(c);
  if (wrc) return wrc;
  for (;;) {
    int rc = mdb_cursor_get(c->cur, &k, &v, c->started ? MDB_NEXT : MDB_FIRST);
    c->started = true;
    if (rc == MDB_NOTFOUND) { *done = 1; return 0; }
    if (rc) return rn_store_fail(&t->p->err, rc, t->name);
    if (!c->view.own && k.mv_size <= sizeof c->last) { /* where a regrow's new cursor goes on from */
      memcpy(c->last, k.mv_data, k.mv_size);
      c->last_len = (uint16_t)k.mv_size;
    }
    if (!t->schema->nkey) {
      *id = rn_be64_get(k.mv_data);
      *row = v.mv_data;
      *len = v.mv_size;
      return 0;
    }
    located l;
    parse_value(&v, &l);
    if (!l.live) continue;
    *id = l.id;
    *row = l.row;
    *len = l.row_len;
    return 0;
  }
}

/* Ends the cursor's LMDB work but keeps the handle for its owner. */
static void cursor_end(rn_table_cursor *c)
{
  rn_pipeline *p = c->t->p;
  bool gone = !c->view.own && c->txn != p->store.txn_serial; /* its transaction a regrow replaced freed it */
  if (c->cur && !gone && !group_cursor_dead(c)) mdb_cursor_close(c->cur);
  if (c->view.own && p->store.pid != getpid()) { /* a forked child's: the parent's reader slot */
    rn_store_keep_parents_txn(c->view.own);
    c->view.own = NULL;
  }
  rn_snapshot_close(&c->view);
  if (c->prev) c->prev->next = c->next; else p->cursors = c->next;
  if (c->next) c->next->prev = c->prev;
  c->cur = NULL;
  c->t = NULL;
}

void rn_table_cursor_close(rn_table_cursor *c)
{
  if (!c) return;
  if (c->t) cursor_end(c);
  free(c);
}

void rn_cursors_end_all(rn_pipeline *p)
{
  while (p->cursors) cursor_end(p->cursors);
}

/* The cursor stays in p->cursors (cursor_end unlinks it), with no LMDB
 * cursor or transaction left to end. */
void rn_cursors_remapped(void *ctx)
{
  rn_pipeline *p = ctx;
  for (rn_table_cursor *c = p->cursors; c; c = c->next) {
    if (!c->view.own || c->grown) continue;
    if (c->cur) mdb_cursor_close(c->cur); /* a read transaction's cursor: freed, its pages not touched */
    c->cur = NULL;
    rn_snapshot_close(&c->view);
    c->grown = true;
  }
}

bool rn_table_cursor_grown(const rn_table_cursor *c) { return c && c->grown; }

/* ---- the operators (ops.h) ---- */

/* A table's rows, read by cursor: a callback that ends the group the scan
 * reads stops it with the cursor's error (rows()). */
static int table_scan(rn_rel *t, rn_scan_fn fn, void *ctx)
{
  rn_table_cursor *c;
  int rc = rn_table_cursor_open(t, &c);
  if (rc) return rc;
  uint64_t id;
  const char *row;
  size_t len;
  int done = 0;
  while (!rc && !(rc = rn_table_cursor_next(c, &id, &row, &len, &done)) && !done) rc = fn(ctx, id, row, len);
  rn_table_cursor_close(c);
  return rc;
}

const rn_rel_ops rn_table_ops = { .name = "table", .apply = NULL, .scan = table_scan, .reapply = rn_source_reapply };
const rn_rel_ops rn_stream_ops = { .name = "stream", .apply = NULL, .scan = NULL, .reapply = rn_source_reapply };
