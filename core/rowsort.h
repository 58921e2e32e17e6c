/* rowsort.h — rows collected, then handed on in key order: LMDB's order of
 * their encoded keys (a keyed table's own order: numbers by value, strings
 * bytewise, composite keys column by column), then id; or in id order for
 * rows without a key. The order of rows() for a relation whose rows are
 * computed rather than stored in that order: read from outside (reader.c)
 * and in the pipeline itself (scan.c, rn_rel_scan_ordered), the same. */
#ifndef RN_ROWSORT_H
#define RN_ROWSORT_H

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "schema.h"

typedef struct rn_rowsort_item rn_rowsort_item;

typedef struct rn_rowsort {
  const rn_schema *schema; /* the rows' schema: its key orders them (none: ids do) */
  const char *name;        /* the relation, for errors */
  rn_err *e;
  msgpack_zone zone;       /* decoding a row's key */
  msgpack_sbuffer bytes;   /* every key and row collected */
  rn_rowsort_item *items;
  size_t n, cap;
} rn_rowsort;

/* schema and name must outlive s. RN_ENOMEM (e set) when it cannot start;
 * rn_rowsort_free may be called either way. */
int rn_rowsort_init(rn_rowsort *s, const rn_schema *schema, const char *name, rn_err *e);
/* Collects a row (copied): an rn_scan_fn whose ctx is an rn_rowsort. */
int rn_rowsort_add(void *ctx, uint64_t id, const char *row, size_t len);
/* Sorts what was collected and hands each row to fn in order; stops at the
 * first non-zero fn returns, and returns it. */
int rn_rowsort_each(rn_rowsort *s, int (*fn)(void *ctx, uint64_t id, const char *row, size_t len), void *ctx);
void rn_rowsort_free(rn_rowsort *s);

#endif
