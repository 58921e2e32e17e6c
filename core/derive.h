/* derive.h — filter and map: relations computed row by row from another.
 *
 * Both pass the input row id through. On a table-like input a change is
 * judged on its old and its new row:
 *
 *     old row out   new row out   emitted
 *     yes           yes           UPDATE (nothing when the outputs are equal)
 *     yes           no            DELETE of the old output
 *     no            yes           INSERT of the new output
 *
 * so a row that stops passing a filter is a DELETE downstream and one that
 * starts passing an INSERT, both under the row's id. */
#ifndef RN_DERIVE_H
#define RN_DERIVE_H

#include "pipeline.h"

/* Computes filter or map d's row for one input row. *out is NULL when there
 * is none; else it points into the scratch zone (or is row itself). */
int rn_derive_row(rn_rel *d, const char *row, size_t len, const char **out, size_t *out_len);
/* Declares a filter of in (rows for which filter sets *pass) or a map of in
 * to schema (rows map builds); each takes ownership of ctx (freed with
 * free_ctx, which may be NULL), also on failure, and map of schema. */
int rn_declare_filter(rn_pipeline *p, const char *name, rn_rel *in, rn_filter_fn filter, void *ctx,
                      rn_free_fn free_ctx, rn_rel **out);
int rn_declare_map(rn_pipeline *p, const char *name, rn_rel *in, rn_schema *schema, rn_map_fn map,
                   void *ctx, rn_free_fn free_ctx, rn_rel **out);
/* Declares a projection of in: output column i is input slot slots[i]
 * named names[i]; key: output positions (NULL: in's key if all kept). */
int rn_declare_select(rn_pipeline *p, const char *name, rn_rel *in, const int *slots,
                      const char *const *names, int n, const int *key, int nkey, rn_rel **out);
/* The input slots a select's columns come from (n of them), or NULL when d
 * is not a select. Owned by d. */
const int *rn_select_slots(const rn_rel *d, int *n);
/* Builds a select's schema: output column i is in's column slots[i] named
 * names[i]; key: output positions (NULL: in's key if all kept). NULL with
 * p->err set on failure. */
rn_schema *rn_select_schema(rn_pipeline *p, const char *name, const rn_schema *in, const int *slots,
                            const char *const *names, int n, const int *key, int nkey);
/* Whether a map's ctx keeps its keys' state (mapkey.c): such a map's
 * state opens with rn_open_derived_state, not at rn_declare_derived. */
bool rn_derive_keeps_keys(const void *ctx);
/* A filter's or map's apply (ops.h): d's input (from) made change c. */
int rn_derive_apply(rn_rel *d, rn_rel *from, const rn_change *c);

#endif
