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
#include "evolve_code.h"

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
/* Select d was declared over other input slots before (stored: the n
 * slots its record held, in its input's stored layout): keeps them, so
 * its sinks are told what the change gave (derive.c). 0 or RN_ENOMEM. */
int rn_select_told(rn_rel *d, const int *stored, int n);
/* Builds a select's schema: output column i is in's column slots[i] named
 * names[i]; key: output positions (NULL: in's key if all kept). NULL with
 * p->err set on failure. */
rn_schema *rn_select_schema(rn_pipeline *p, const char *name, const rn_schema *in, const int *slots,
                            const char *const *names, int n, const int *key, int nkey);
/* Whether a map's ctx keeps its keys' state (mapkey.c): such a map's
 * state opens with rn_open_derived_state, not at rn_declare_derived. */
bool rn_derive_keeps_keys(const void *ctx);
/* Do rows a and b of r (normalized) hold different keys? A row that
 * cannot be walked counts as moved; a keyless r's never move. */
bool rn_key_moved(const rn_rel *r, const char *a, size_t alen, const char *b, size_t blen);
/* Filter or map d, just declared, had its function changed (evolve_code.h:
 * told says what its sinks' rows came from). KEPT: ofilter or omap (the
 * one of d's kind) over octx, the old function, is run over d's input's
 * rows, as is the new one, and what differs is kept for d's sinks, told
 * at the start of the next group (evolve_log.h), in one transaction that
 * also forgets the old function ("fo:"). UNKEPT, ABSENT, the old function
 * failing on a row: a note says its sinks were not told. Over a stream
 * (events) nothing is told. A map whose columns changed too has its old
 * function's rows made in the columns it had (d->told_schema) and given in
 * the new ones by name (rn_rebuild_capture_told), any told rows kept in
 * the old layout made again so; one whose function stayed is told the same
 * way at its declaration (derive.c, tell_columns). The new function
 * failing fails the declaration, naming d; the old one stays kept, to be
 * worked out at the next. */
int rn_derive_tell_old(rn_rel *d, rn_code_kind told, rn_filter_fn ofilter, rn_map_fn omap, void *octx);
/* KEPT, but the binding could not make the old function again (why):
 * a note says d's sinks were not told, and the old function is forgotten. */
int rn_derive_untold(rn_rel *d, const char *why);
/* d, just declared, over a relation whose sinks were not told what its
 * declaration changed (rn_told_unknown_under): a note says d's were not
 * either, and d counts as such for what is declared over it. */
int rn_derive_told_unknown(rn_rel *d);
/* The table under in (in itself, or through filters) whose declaration
 * moved, renamed, dropped or added columns in this run (its now_slots),
 * or NULL. */
const rn_rel *rn_columns_moved(const rn_rel *in);
/* Map d's function, while d's sinks are told at its declaration, read
 * name (len bytes), no column of its input, whose table t (rn_columns_moved)
 * had a column of that name before this run. When d makes the rows its
 * sinks were told (told_rows, as_told): the slot in t of the column a
 * rename made of it, to give its value; a dropped one's values are gone:
 * -1, and d's sinks are not told, a note saying why. Otherwise -1, and a
 * note after d's declaration names the column. -1 for any other name. */
int rn_derive_read_gone(rn_rel *d, const rn_rel *t, const char *name, size_t len);
/* A filter's or map's apply (ops.h): d's input (from) made change c. */
int rn_derive_apply(rn_rel *d, rn_rel *from, const rn_change *c);

#endif
