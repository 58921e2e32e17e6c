/* longorder.h — order keys longer than an LMDB key, in a top's ("tt:",
 * "tx:") and an index's ("ix:") entries (top.c, index.c).
 *
 * An entry's key is |o|u64 id BE|, o the row's group and order values'
 * encoding (top.h), when it fits in RN_STORE_KEY_MAX bytes: as it always
 * was. A longer o (a long string, say) is stored as
 *
 *     key    |o's first RN_LONGORDER_INLINE bytes|u64 label BE|   (511 bytes)
 *     value  |the entry's value as above|u64 id BE|
 *
 * Rules (LONGORDER-n in specs):
 * (1) LMDB's order of the keys is the order of the rows, (o, id): o
 *     encodings are prefix-free, so a short o differs from a long one
 *     within its own (at most 503) bytes, and the long ones sharing their
 *     first 503 bytes (a bucket, contiguous in LMDB) carry labels in the
 *     order of their whole o, then id. A new row takes a label between its
 *     neighbours'; when none is free the bucket is labelled afresh.
 * (2) A row's entry is found by walking its bucket for its id and its
 *     whole o (each entry's recomputed from its row): O(bucket).
 * (3) A long entry is told by its key's length (511) and its value, one
 *     row then 8 bytes: a short entry's value is its row alone.
 * (4) A bucket of a few entries is walked; in a bigger one (the rows of a
 *     top's long group, say) an entry and its neighbours are found by
 *     halving the labels still possible: O(64) seeks, whatever its size. */
#ifndef RN_LONGORDER_H
#define RN_LONGORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "top.h"

#define RN_LONGORDER_INLINE (RN_STORE_KEY_MAX - 8)
enum { RN_LONGORDER_DAMAGED = -30999 }; /* an entry of a bucket does not decode */

/* Where a relation's entries are and how its o is made of a row. */
typedef struct rn_longorder {
  MDB_dbi dbi[2];
  size_t skip[2];         /* bytes of a value before its row (a top's rank: 8) */
  int ndbi;
  int nby;                /* group columns first (a top's), then order */
  const int *by;
  const rn_order *order;
  int ncols;              /* the input's columns */
} rn_longorder;

/* Whether k -> v is a long entry (3); *id and *row_len (the row's bytes
 * after skip) when it is. */
bool rn_longorder_entry(const MDB_val *k, const MDB_val *v, size_t skip, uint64_t *id, size_t *row_len);

/* Appends row's o to out (rows decoded in z); -1 if row does not decode
 * or holds NaN. */
int rn_longorder_full(const rn_longorder *lo, const char *row, size_t len, msgpack_zone *z, msgpack_sbuffer *out);

/* The key (out: RN_STORE_KEY_MAX bytes) of the row of id whose o is f
 * (flen > RN_LONGORDER_INLINE) in txn. place false: its entry's, or
 * MDB_NOTFOUND (out then names no entry). place true: its entry's, or a new
 * label's (1); *moved when other entries' keys changed for it. Returns 0,
 * MDB_NOTFOUND, RN_LONGORDER_DAMAGED, ENOMEM or an LMDB error. */
int rn_longorder_key(MDB_txn *txn, const rn_longorder *lo, const char *f, size_t flen, uint64_t id, bool place,
                     char *out, bool *moved);

/* Where rn_longorder_search stands: the entry found (found: its label and
 * dbi index), else its neighbours' labels and dbi indexes. */
typedef struct rn_longorder_near {
  bool found, has_below, has_above;
  uint64_t label, below, above;
  int d, d_below, d_above;
} rn_longorder_near;

/* Compares entry k -> v of dbi index d with what is sought: *c < 0 when it
 * sorts before, 0 when it is the one, > 0 after; returns 0 or an error. */
typedef int (*rn_longorder_cmp_fn)(void *ctx, int d, const MDB_val *k, const MDB_val *v, int *c);

/* Searches the bucket of prefix (RN_LONGORDER_INLINE bytes) in the dbis of
 * lo in mask (bit d: lo->dbi[d]) by label (4), cmp telling each entry
 * seen against what is sought (the bucket in label order must be in cmp's
 * order): the entry found, or the last entry before it and the first
 * after it. Returns 0, cmp's error or an LMDB error. */
int rn_longorder_search(MDB_txn *txn, const rn_longorder *lo, const char *prefix, unsigned mask,
                        rn_longorder_cmp_fn cmp, void *ctx, rn_longorder_near *out);

#endif
