/* lookup.h — lookups: rows fetched on demand through a cache (lookup.c). */
#ifndef RN_LOOKUP_H
#define RN_LOOKUP_H

#include "pipeline.h"
#include "store_sink.h"

/* Fetches the row of one key (values normalized to the key's types):
 * appends a normalized row of lk to row and sets *found, or leaves *found 0. */
typedef int (*rn_lookup_fetch)(void *ctx, rn_rel *lk, const msgpack_object *key, int nkey,
                               msgpack_sbuffer *row, int *found, rn_err *e);

typedef struct rn_lookup_opts {
  bool cached;            /* false: every lookup asks the source */
  double ttl;             /* seconds an answer stays fresh, from its fetch */
  size_t size;            /* entries at most */
  bool cache_missing;     /* cache "no row" answers too */
} rn_lookup_opts;

typedef struct rn_lookup_stats {
  uint64_t hits, misses, evictions, source_calls;
} rn_lookup_stats;

/* Takes ownership of schema and ctx. */
int rn_declare_lookup(rn_pipeline *p, const char *name, rn_schema *schema, rn_lookup_fetch fetch, void *ctx,
                      rn_free_fn free_ctx, const rn_lookup_opts *o, rn_rel **out);
/* The row of an encoded key (into scratch), or *row NULL. */
int rn_lookup_get(rn_rel *lk, const char *key, size_t klen, const char **row, size_t *len);
const rn_lookup_stats *rn_lookup_stats_of(const rn_rel *lk);
/* group.c's hooks of the lookups' answer logs (lookup.c): a group began
 * (its answers start here), it rolled back (they are dropped), logged
 * changes are about to be applied again (answers read from the start),
 * the LMDB transaction committed (nothing is left to apply again). */
void rn_lookups_group_began(rn_pipeline *p);
void rn_lookups_rolled_back(rn_pipeline *p);
void rn_lookups_reapply_starts(rn_pipeline *p);
void rn_lookups_committed(rn_pipeline *p);
/* A change entering, and that change applied again after the map grew
 * (rn_group_regrow_change): it reads the answers its first try logged,
 * then asks (and logs) past them, so it gets and counts what the run with
 * no regrow did, and the replays after read each change's own. */
void rn_lookups_change_began(rn_pipeline *p);
void rn_lookups_change_retried(rn_pipeline *p);
/* Rewrites e, the error of a row a source returned for key (nkey values)
 * that does not fit lk, as "<lk>: source returned a bad row for key (…):
 * <what was wrong>" (a leading "<lk>: " of e's message dropped). */
void rn_lookup_bad_row(const rn_rel *lk, const msgpack_object *key, rn_err *e);
/* The lookup declared in p whose source (an attached reader) reads `name`
 * of p's own state, or NULL. */
const rn_rel *rn_lookup_reading(const rn_pipeline *p, const char *name);
/* A fetch reading a store through an attached reader (takes a). */
int rn_lookup_attach_source(rn_attached *a, rn_lookup_fetch *fetch, void **ctx, rn_free_fn *free_ctx);

#endif
