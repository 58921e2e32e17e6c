/* rowcache.h — keyed table rows the store's write transactions have read
 * by key (rn_table_row_by_key: a join's right rows), kept so that the next
 * read of the same key is a hash probe instead of a B-tree search (a join
 * reads its right row once per left change, and the same few right rows
 * again and again). Off with the write-back layer, which keeps its own.
 *
 * Invariants:
 * (1) A slot is valid in the write transaction it was filled in and in
 *     the ones that follow it in an unbroken line of commits by this store
 *     (each next transaction's LMDB id one past the last committed one):
 *     an abort (rollback, regrow), a failed commit, or any write
 *     transaction the store did not tell of (a drop, a declaration's own)
 *     ends every slot (store.c tells the cache of each begin, commit and
 *     abort of its write transaction).
 * (2) Every write of a keyed row in the store's write transaction is told
 *     (rn_rowcache_wrote from table.c's put_keyed, the one writer of keyed
 *     rows), so a slot always says what the transaction holds.
 * (3) Memory is bounded: RN_ROWCACHE_SLOTS slots, direct-mapped (a key
 *     takes its hash's slot from whatever was there), each holding a key of
 *     up to RN_ROWCACHE_KEY_MAX bytes and a row of up to RN_ROWCACHE_ROW_MAX
 *     (about 3.4 MB, allocated at the first read); larger ones are not cached.
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
  const char *row;        /* into the slot: valid until the next fill or put (another key may take the slot) */
  size_t row_len;
} rn_cached_row;

/* An empty cache, or NULL without memory. Destructor: rn_rowcache_free. */
rn_rowcache *rn_rowcache_new(void);
void rn_rowcache_free(rn_rowcache *c);

/* (1): the store's write transaction with LMDB id txnid began, committed,
 * or was aborted (or its commit failed). */
void rn_rowcache_began(rn_rowcache *c, size_t txnid);
void rn_rowcache_committed(rn_rowcache *c, size_t txnid);
void rn_rowcache_aborted(rn_rowcache *c);
/* A write transaction of the store's own that wrote no table row (the
 * empty one after a carried commit) committed with LMDB id txnid. */
void rn_rowcache_passed(rn_rowcache *c, size_t txnid);

/* The entry of (dbi, key) as the open write transaction holds it, if cached. */
bool rn_rowcache_get(rn_rowcache *c, MDB_dbi dbi, const char *key, size_t klen, rn_cached_row *out);
/* Keeps what a read in the open write transaction found under (dbi, key)
 * (in the key's slot, in place of whatever it held). */
void rn_rowcache_fill(rn_rowcache *c, MDB_dbi dbi, const char *key, size_t klen, const rn_cached_row *now);
/* (2): (dbi, key) was written in the open write transaction and now holds
 * now: a slot holding the key follows (or forgets it when too large to
 * keep); a key not cached stays out, so writes do not push read rows out. */
void rn_rowcache_wrote(rn_rowcache *c, MDB_dbi dbi, const char *key, size_t klen, const rn_cached_row *now);

#endif
