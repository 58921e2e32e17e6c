/* rowcache.h — keyed table rows a write transaction has read by key,
 * kept so that the next read of the same key in the same transaction is a
 * hash probe instead of a B-tree search (a join reads its right row once
 * per left change, and the same few right rows again and again).
 *
 * Invariants:
 * (1) A slot is valid only in the write transaction it was filled in (the
 *     store's txn_serial): an abort (rollback, regrow) or commit ends it,
 *     and the next transaction starts a new serial.
 * (2) Every write of a cached key in that transaction goes through
 *     rn_rowcache_put or rn_rowcache_forget with it (table.c's put_keyed is
 *     the one writer of keyed rows), so a slot always says what LMDB holds.
 * (3) Memory is bounded: RN_ROWCACHE_SLOTS slots, direct-mapped (a key
 *     takes its hash's slot from whatever was there), each holding a key of
 *     up to RN_ROWCACHE_KEY_MAX bytes and a row of up to RN_ROWCACHE_ROW_MAX;
 *     larger ones are not cached.
 * Only the writer uses it: readers (other transactions) never see it. */
#ifndef RN_ROWCACHE_H
#define RN_ROWCACHE_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RN_ROWCACHE_BITS 14
#define RN_ROWCACHE_SLOTS (1u << RN_ROWCACHE_BITS)
#define RN_ROWCACHE_KEY_MAX 48
#define RN_ROWCACHE_ROW_MAX 128
#define RN_ROWCACHE_MAX_DBI 4160 /* dbis at or past it are not cached (store.h's bound is below) */

typedef struct rn_rowcache rn_rowcache;

/* What a keyed table holds under a key (table.c's entry, parsed). */
typedef struct rn_cached_row {
  bool found;             /* an entry (live or tombstone) */
  bool live;              /* it holds a row */
  uint64_t id;
  const char *row;        /* into the slot: valid until the next put of any key */
  size_t row_len;
} rn_cached_row;

/* An empty cache, or NULL without memory. Destructor: rn_rowcache_free. */
rn_rowcache *rn_rowcache_new(void);
void rn_rowcache_free(rn_rowcache *c);

/* The entry of (dbi, key) as transaction serial holds it, if cached. */
bool rn_rowcache_get(rn_rowcache *c, uint64_t serial, MDB_dbi dbi, const char *key, size_t klen,
                     rn_cached_row *out);
/* Keeps what a read found under (dbi, key) in transaction serial (in the
 * key's slot, in place of whatever it held). */
void rn_rowcache_fill(rn_rowcache *c, uint64_t serial, MDB_dbi dbi, const char *key, size_t klen,
                      const rn_cached_row *now);
/* (2): (dbi, key) was written in transaction serial and now holds now: a
 * slot holding the key follows (or forgets it when too large to keep);
 * a key not cached stays out, so writes do not push read rows out. */
void rn_rowcache_wrote(rn_rowcache *c, uint64_t serial, MDB_dbi dbi, const char *key, size_t klen,
                       const rn_cached_row *now);

#endif
