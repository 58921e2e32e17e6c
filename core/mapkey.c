/* mapkey.c — the keys of a keyed map (or select) over a table-like input.
 *
 * A map passes its input's row ids through (DESIGN §4), so nothing else
 * makes the key it declares unique: two input rows its function gives one
 * key would be two rows of one key downstream, and a consumer keyed by it
 * (NDJSON, SQLite, a store, a join on it) would keep one and lose it again
 * when the other goes. Rules (MAPKEY-n in specs):
 * (1) Each key the map holds names the one input row id that gives it. At
 *     the end of a group no key is given by two rows: a change that gives
 *     a held key to another row claims it, the claim is settled when the
 *     holder lets the key go in the same group (rows that swap keys), and
 *     a claim left at the group's end fails the group with an error naming
 *     the map, the key and both rows. (As a table's, a sink that takes the
 *     group change by change may see a key held twice on the way; a
 *     consolidating one, SQLite's, never does.)
 * (2) The keys are rebuilt from the input whenever the map's state is
 *     stale: a group it did not see, a changed function or declaration
 *     (the map is stateful derived state, evolve.h).
 * A select keyed by its input's key columns keeps none: they are unique.
 *
 * State, named database "mk:" name (store.h):
 *
 *     |encoded key (key.h)|                          -> |u64 id BE|
 *     |its first 480 bytes|u64 hash(key) BE|u8 probe| -> |u64 id BE|whole key|
 *
 * the second form (longkey.h's, as tables', aggregates' and stores') for
 * keys longer than RN_LONGKEY_INLINE bytes (LMDB's keys stop at 511). Keys
 * are removed, so long ones are found with rn_longkey_seek. States of
 * format 0 (store.h's "fmt") had the second form without its probe byte:
 * rn_mapkey_upgrade moves them. */
#include "mapkey.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "derive.h"
#include "key.h"
#include "longkey.h"
#include "row.h"
#include "scan.h"

#define MAPKEY_INLINE_MAX RN_LONGKEY_INLINE /* longer keys are stored hashed (longkey.h) */

void rn_mapkey_init(rn_mapkey *k)
{
  msgpack_sbuffer_init(&k->old_key);
  msgpack_sbuffer_init(&k->new_key);
}

static void drop_claim(rn_mapkey *k, size_t i)
{
  free(k->claims[i].key);
  k->claims[i] = k->claims[--k->nclaims];
}

/* Forgets the claims of an earlier group (it committed, failed or rolled
 * back: none is settled by this one). */
static void claims_of(rn_mapkey *k, uint64_t serial)
{
  if (k->serial == serial) return;
  while (k->nclaims) drop_claim(k, k->nclaims - 1);
  k->serial = serial;
}

void rn_mapkey_destroy(rn_mapkey *k)
{
  while (k->nclaims) drop_claim(k, k->nclaims - 1);
  free(k->claims);
  msgpack_sbuffer_destroy(&k->old_key);
  msgpack_sbuffer_destroy(&k->new_key);
}

/* The encoded key of row (a row of d) into out; its values into *vals. */
static int encode(rn_rel *d, const char *row, size_t len, msgpack_sbuffer *out, const msgpack_object **vals)
{
  rn_pipeline *p = d->p;
  msgpack_sbuffer_clear(out);
  *vals = rn_row_unpack(row, len, d->schema->ncols, &p->scratch);
  if (!*vals) return rn_err_set(&p->err, RN_ESTORE, "%s: a row could not be decoded", d->name);
  char col[300];
  if (rn_key_encode(d->schema, *vals, out) != 0)
    return rn_err_set(&p->err, RN_EINVAL, "%s: %s: NaN cannot be part of a key", d->name,
                      rn_key_nan_column(d->schema, *vals, col, sizeof col));
  return rn_oom() ? rn_err_set(&p->err, RN_ENOMEM, "out of memory") : 0;
}

/* The whole key of an entry under a hashed form (rn_longkey_whole_fn). */
static bool whole_key(void *ctx, const MDB_val *v, const char **key, size_t *klen)
{
  (void)ctx;
  if (v->mv_size <= 8) return false;
  *key = (const char *)v->mv_data + 8;
  *klen = v->mv_size - 8;
  return true;
}

/* Where key is, or would go: *at its stored form (in buf for a long key),
 * *v its entry when found. 0 found, MDB_NOTFOUND, or an error set. */
static int locate(rn_rel *d, rn_mapkey *k, const char *key, size_t klen, char buf[RN_LONGKEY_STORED], MDB_val *at,
                  MDB_val *v)
{
  MDB_txn *txn = d->p->store.wtxn;
  int rc;
  if (klen <= MAPKEY_INLINE_MAX) {
    *at = (MDB_val){ klen, (void *)key };
    rc = mdb_get(txn, k->dbi, at, v);
  } else {
    *at = (MDB_val){ RN_LONGKEY_STORED, buf };
    rc = rn_longkey_seek(txn, k->dbi, key, klen, whole_key, NULL, buf, v);
    if (rc == RN_LONGKEY_FULL)
      return rn_err_set(&d->p->err, RN_ESTORE, "%s: too many keys longer than %d bytes share one hash", d->name,
                        MAPKEY_INLINE_MAX);
  }
  if (rc == 0 && v->mv_size < 8)
    return rn_err_set(&d->p->err, RN_ESTORE, "state damaged: %s: a key entry is malformed", d->name);
  return rc == 0 || rc == MDB_NOTFOUND ? rc : rn_store_fail(&d->p->err, rc, d->name);
}

/* The id holding key (0: none). */
static int holder(rn_rel *d, rn_mapkey *k, const msgpack_sbuffer *key, uint64_t *id)
{
  char buf[RN_LONGKEY_STORED];
  MDB_val at, v;
  *id = 0;
  int rc = locate(d, k, key->data, key->size, buf, &at, &v);
  if (rc == 0) *id = rn_be64_get(v.mv_data);
  return rc == MDB_NOTFOUND ? 0 : rc;
}

/* What a claim says: the key, the row id holding it and id (with in, its
 * input row, named by its key when the input has one). */
static void claim_text(rn_rel *d, const msgpack_object *vals, uint64_t held, uint64_t id, const char *in,
                       size_t in_len, char *out, size_t size)
{
  char kbuf[256], inbuf[300] = "";
  rn_key_format(d->schema, vals, kbuf, sizeof kbuf);
  const rn_schema *is = d->input->schema;
  const msgpack_object *ivals = in && is->nkey ? rn_row_unpack(in, in_len, is->ncols, &d->p->scratch) : NULL;
  if (ivals) {
    char ikey[256];
    rn_key_format(is, ivals, ikey, sizeof ikey);
    if (snprintf(inbuf, sizeof inbuf, " (%s)", ikey) < 0) inbuf[0] = '\0';
  }
  int n = snprintf(out, size, "key (%s) is given by row id %llu of %s already; row id %llu%s gives it too", kbuf,
                   (unsigned long long)held, d->input->name, (unsigned long long)id, inbuf);
  if (n < 0 && size) out[0] = '\0'; /* a long key is cut short in the message, as rn_err_set cuts */
}

static int taken(rn_rel *d, const char *text)
{
  return rn_err_set(&d->p->err, RN_EEXIST, "%s: %s: a keyed map gives each key from one input row", d->name, text);
}

/* id claims key, which another row holds (1); at once an error when strict. */
static int claim(rn_rel *d, rn_mapkey *k, const msgpack_sbuffer *key, const msgpack_object *vals, uint64_t held,
                 uint64_t id, const char *in, size_t in_len)
{
  char text[sizeof k->claims->text];
  claim_text(d, vals, held, id, in, in_len, text, sizeof text);
  if (k->strict) return taken(d, text);
  for (size_t i = 0; i < k->nclaims; i++)
    if (k->claims[i].id == id && k->claims[i].klen == key->size && !memcmp(k->claims[i].key, key->data, key->size))
      return 0;
  if (k->nclaims == k->cap) {
    size_t cap = k->cap ? 2 * k->cap : 4;
    rn_mapkey_claim *grown = realloc(k->claims, cap * sizeof *grown);
    if (!grown) return rn_err_set(&d->p->err, RN_ENOMEM, "out of memory");
    k->claims = grown;
    k->cap = cap;
  }
  rn_mapkey_claim *c = &k->claims[k->nclaims];
  if (!(c->key = malloc(key->size ? key->size : 1))) return rn_err_set(&d->p->err, RN_ENOMEM, "out of memory");
  memcpy(c->key, key->data, key->size);
  c->klen = key->size;
  c->id = id;
  memcpy(c->text, text, sizeof text);
  k->nclaims++;
  return 0;
}

/* Puts key -> id, over key's entry or at its free place. */
static int put_holder(rn_rel *d, rn_mapkey *k, const char *key, size_t klen, uint64_t id)
{
  char buf[RN_LONGKEY_STORED];
  MDB_val at, v;
  int rc = locate(d, k, key, klen, buf, &at, &v);
  if (rc && rc != MDB_NOTFOUND) return rc;
  v = (MDB_val){ 8 + (klen > MAPKEY_INLINE_MAX ? klen : 0), NULL };
  rc = mdb_put(d->p->store.wtxn, k->dbi, &at, &v, MDB_RESERVE);
  if (rc) return rn_store_fail(&d->p->err, rc, d->name);
  rn_be64_put(v.mv_data, id);
  if (v.mv_size > 8) memcpy((char *)v.mv_data + 8, key, klen);
  return 0;
}

/* Gives key (of row values vals) to id, or claims it from its holder. */
static int take(rn_rel *d, rn_mapkey *k, const msgpack_sbuffer *key, const msgpack_object *vals, uint64_t id,
                const char *in, size_t in_len)
{
  uint64_t held;
  int rc = holder(d, k, key, &held);
  if (rc || held == id) return rc;
  if (held) return claim(d, k, key, vals, held, id, in, in_len);
  return put_holder(d, k, key->data, key->size, id);
}

/* Frees key if id holds it, for the row claiming it if one does; else
 * drops id's claim on it. */
static int release(rn_rel *d, rn_mapkey *k, const msgpack_sbuffer *key, uint64_t id)
{
  uint64_t held;
  int rc = holder(d, k, key, &held);
  if (rc) return rc;
  for (size_t i = 0; i < k->nclaims; i++) {
    rn_mapkey_claim *c = &k->claims[i];
    if (c->klen != key->size || memcmp(c->key, key->data, key->size)) continue;
    if (held == id) { /* the claim is settled: it holds the key now */
      rc = put_holder(d, k, c->key, c->klen, c->id);
      drop_claim(k, i);
      return rc;
    }
    if (c->id == id) { drop_claim(k, i); return 0; }
  }
  if (held != id) return 0;
  char buf[RN_LONGKEY_STORED];
  MDB_val at, v;
  if ((rc = locate(d, k, key->data, key->size, buf, &at, &v))) return rc == MDB_NOTFOUND ? 0 : rc;
  rc = mdb_del(d->p->store.wtxn, k->dbi, &at, NULL);
  return rc ? rn_store_fail(&d->p->err, rc, d->name) : 0;
}

int rn_mapkey_seal(rn_mapkey *k, rn_rel *d)
{
  claims_of(k, d->p->group_serial);
  if (!k->nclaims) return 0;
  int rc = taken(d, k->claims[0].text);
  claims_of(k, 0); /* the group fails: its claims go with it */
  return rc;
}

int rn_mapkey_change(rn_mapkey *k, rn_rel *d, uint64_t id, const char *old, size_t old_len, const char *row,
                     size_t row_len, const char *in, size_t in_len)
{
  const msgpack_object *old_vals = NULL, *vals = NULL;
  int rc = old ? encode(d, old, old_len, &k->old_key, &old_vals) : 0;
  if (!rc && row) rc = encode(d, row, row_len, &k->new_key, &vals);
  if (rc) return rc;
  claims_of(k, d->p->group_serial);
  if (old && row && k->old_key.size == k->new_key.size && memcmp(k->old_key.data, k->new_key.data, k->old_key.size) == 0)
    return 0;
  if (old && (rc = release(d, k, &k->old_key, id))) return rc;
  return row ? take(d, k, &k->new_key, vals, id, in, in_len) : 0;
}

typedef struct rebuild_ctx {
  rn_mapkey *k;
  rn_rel *d;
} rebuild_ctx;

static int rebuild_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  rebuild_ctx *b = ctx;
  const char *out;
  size_t out_len;
  int rc = rn_derive_row(b->d, row, len, &out, &out_len);
  if (!rc && out) rc = rn_mapkey_change(b->k, b->d, id, NULL, 0, out, out_len, row, len);
  msgpack_zone_clear(&b->d->p->scratch); /* as distinct's rebuild: a row at a time */
  return rc;
}

int rn_mapkey_open(rn_mapkey *k, rn_rel *d, MDB_txn *txn, bool rebuild)
{
  int rc = rn_state_dbi(d->p, txn, RN_DB_MAP_KEYS, d->name, 0, &k->dbi);
  if (rc || !rebuild) return rc;
  if ((rc = mdb_drop(txn, k->dbi, 0))) return rn_store_fail(&d->p->err, rc, d->name);
  rebuild_ctx b = { k, d };
  k->strict = true; /* the rows as they are: no group to settle a claim */
  rc = rn_rel_scan(d->input, rebuild_row, &b);
  k->strict = false;
  return rc;
}

/* Format 0's hashed form, |first 480 bytes|u64 hash(key) BE|, without the probe byte. */
#define MAPKEY_FORMAT0_HASHED (RN_LONGKEY_INLINE + 8)

int rn_mapkey_upgrade(MDB_txn *txn, MDB_dbi dbi)
{
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn, dbi, &cur);
  if (rc) return rc;
  char **moved = NULL; /* |u64 id BE|whole key| of each format-0 entry, removed as it is read */
  size_t *lens = NULL, n = 0, cap = 0;
  MDB_val k, v;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size != MAPKEY_FORMAT0_HASHED || v.mv_size <= 8) continue;
    if (n == cap) {
      size_t c = cap ? 2 * cap : 16;
      char **m = realloc(moved, c * sizeof *m);
      size_t *l = m ? realloc(lens, c * sizeof *l) : NULL;
      if (m) moved = m;
      if (!l) { rc = ENOMEM; break; }
      lens = l;
      cap = c;
    }
    if (!(moved[n] = malloc(v.mv_size))) { rc = ENOMEM; break; }
    memcpy(moved[n], v.mv_data, v.mv_size);
    lens[n++] = v.mv_size;
    if ((rc = mdb_cursor_del(cur, 0))) break;
  }
  mdb_cursor_close(cur);
  if (rc == MDB_NOTFOUND) rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    char at[RN_LONGKEY_STORED];
    MDB_val found, sk = { RN_LONGKEY_STORED, at }, d = { lens[i], moved[i] };
    rc = rn_longkey_seek(txn, dbi, moved[i] + 8, lens[i] - 8, whole_key, NULL, at, &found);
    if (rc == MDB_NOTFOUND) rc = mdb_put(txn, dbi, &sk, &d, 0);
    else if (rc == 0 || rc == RN_LONGKEY_FULL) rc = MDB_CORRUPTED; /* format 0 held each key once */
  }
  for (size_t i = 0; i < n; i++) free(moved[i]);
  free(moved);
  free(lens);
  return rc;
}
