/* index.h — rel:index{ cols… }: an input's rows kept in an order, read
 * by range, count and rank (the rules and the state: index.c). */
#ifndef RN_INDEX_H
#define RN_INDEX_H

#include "pipeline.h"

/* Declares name over in (table-like), ordered by the n columns named in
 * cols (desc[i]: descending); its rows and ids are in's. */
int rn_declare_index(rn_pipeline *p, const char *name, rn_rel *in, int n, const char *const *cols,
                     const bool *desc, rn_rel **out);

/* A bound of a range: values of the first n order columns (n = 0: none),
 * normalized in place against their columns. Inclusive: a row is within
 * from when its order values are at or after from's, within to when at or
 * before (rows whose first n values equal to's are within). */
typedef struct rn_index_bound {
  msgpack_object *vals;
  int n;
} rn_index_bound;

/* The order of an index relation (NULL for another kind). */
const struct rn_order *rn_index_order(const rn_rel *ix);

typedef int (*rn_index_fn)(void *ctx, uint64_t id, const char *row, size_t len);

/* Calls fn for the rows from `from` to `to` in index order, skipping the
 * first offset, at most limit of them (0: no limit; fn NULL: they are only
 * counted, the bounds still checked). Reads the open group's writes inside
 * one. O(log rows + offset + rows returned). */
int rn_index_range(rn_rel *ix, rn_index_bound *from, rn_index_bound *to, uint64_t offset, uint64_t limit,
                   rn_index_fn fn, void *ctx);
/* *count: the rows from `from` to `to`. O(log rows + count). */
int rn_index_count(rn_rel *ix, rn_index_bound *from, rn_index_bound *to, uint64_t *count);
/* *rank: 1 + the rows strictly before at (its values: the first row holding
 * them has this rank, as ZRANK; a rank a row there would take otherwise).
 * O(log rows + rank). */
int rn_index_rank(rn_rel *ix, rn_index_bound *at, uint64_t *rank);

/* ---- the pieces attach's readers share (store_sink.c) ---- */

/* A walk of an "ix:" database in index order. */
typedef struct rn_index_walk {
  const char *from, *to;  /* encoded bounds (rn_index_encode_bound), NULL: none */
  size_t from_len, to_len;
  uint64_t offset, limit; /* rows skipped, then at most limit (0: no limit) */
  bool before;            /* rank: count the rows strictly before from, then stop */
  rn_index_fn fn;         /* each row; NULL: count only */
  void *ctx;
  msgpack_zone *zone;     /* rows are copied here for fn (NULL: fn gets LMDB's bytes) */
  bool clear_zone;        /* … and the zone cleared after each */
  uint64_t count;         /* out: the rows walked (after offset) */
  const struct rn_order *order; /* the index's order, and its input's columns: a long */
  int ncols;              /* entry's order key is its row's (longorder.h) */
} rn_index_walk;

/* Walks dbi in txn. Returns fn's nonzero return, or an LMDB code (also in
 * *lmdb_rc, which is 0 when LMDB did not fail; ENOMEM for the zone). */
int rn_index_walk_db(MDB_txn *txn, MDB_dbi dbi, rn_index_walk *w, int *lmdb_rc);
/* Appends the key of bound b (normalized in place against s's columns, in
 * z) under order o to out; what names the index in errors. */
int rn_index_encode_bound(const struct rn_order *o, const rn_schema *s, rn_index_bound *b, msgpack_zone *z,
                          msgpack_sbuffer *out, const char *what, rn_err *e);
/* Reads a stored declaration ("tp:" "decl" of an index) into o; -1 if it
 * is not one for ncols columns. */
int rn_index_decl_decode(const char *data, size_t len, int ncols, struct rn_order *o);

#endif
