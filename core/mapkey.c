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
 *     |encoded key (key.h)|                  -> |u64 id BE|
 *     |its first 480 bytes|u64 hash(key) BE| -> |u64 id BE|full key|
 *
 * the second form for keys longer than 480 bytes (LMDB's keys stop at 511);
 * two long keys of one prefix and hash are refused, never confused. */
#include "mapkey.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "derive.h"
#include "key.h"
#include "row.h"
#include "scan.h"

#define MAPKEY_INLINE_MAX 480

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
  if (rn_key_encode(d->schema, *vals, out) != 0)
    return rn_err_set(&p->err, RN_EINVAL, "%s: NaN cannot be part of a key", d->name);
  return rn_oom() ? rn_err_set(&p->err, RN_ENOMEM, "out of memory") : 0;
}

/* The stored form of an encoded key (into buf for a long one). */
static MDB_val stored_key(const msgpack_sbuffer *key, char buf[MAPKEY_INLINE_MAX + 8])
{
  if (key->size <= MAPKEY_INLINE_MAX) return (MDB_val){ key->size, key->data };
  memcpy(buf, key->data, MAPKEY_INLINE_MAX);
  rn_be64_put(buf + MAPKEY_INLINE_MAX, rn_hash64(key->data, key->size));
  return (MDB_val){ MAPKEY_INLINE_MAX + 8, buf };
}

/* The id holding key (0: none); RN_ESTORE when a long key of the same
 * stored form does. */
static int holder(rn_rel *d, rn_mapkey *k, const msgpack_sbuffer *key, uint64_t *id)
{
  char buf[MAPKEY_INLINE_MAX + 8];
  MDB_val sk = stored_key(key, buf), v;
  *id = 0;
  int rc = mdb_get(d->p->store.wtxn, k->dbi, &sk, &v);
  if (rc == MDB_NOTFOUND) return 0;
  if (rc) return rn_store_fail(&d->p->err, rc, d->name);
  if (v.mv_size < 8) return rn_err_set(&d->p->err, RN_ESTORE, "state damaged: %s: a key entry is malformed", d->name);
  if (key->size > MAPKEY_INLINE_MAX && (v.mv_size != 8 + key->size || memcmp((char *)v.mv_data + 8, key->data, key->size)))
    return rn_err_set(&d->p->err, RN_ESTORE, "%s: two keys longer than %d bytes share their start and hash",
                      d->name, MAPKEY_INLINE_MAX);
  *id = rn_be64_get(v.mv_data);
  return 0;
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

/* Puts key -> id. */
static int put_holder(rn_rel *d, rn_mapkey *k, const char *key, size_t klen, uint64_t id)
{
  msgpack_sbuffer kb = { .size = klen, .data = (char *)key, .alloc = klen };
  char buf[MAPKEY_INLINE_MAX + 8];
  MDB_val sk = stored_key(&kb, buf), v = { 8 + (klen > MAPKEY_INLINE_MAX ? klen : 0), NULL };
  int rc = mdb_put(d->p->store.wtxn, k->dbi, &sk, &v, MDB_RESERVE);
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
  char buf[MAPKEY_INLINE_MAX + 8];
  MDB_val sk = stored_key(key, buf);
  rc = mdb_del(d->p->store.wtxn, k->dbi, &sk, NULL);
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
