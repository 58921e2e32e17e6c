/* scan.h — the current rows of any table-like relation: a source's stored
 * rows, or a derived relation's rows computed from its inputs' (filter and
 * map rerun their functions; a join recomputes from its index). Used to
 * build new join state over existing data, and for rows()/count() of
 * derived relations. Inside a group it sees the group's changes. */
#ifndef RN_SCAN_H
#define RN_SCAN_H

#include "ops.h"

int rn_rel_scan(rn_rel *rel, rn_scan_fn fn, void *ctx);
/* rn_rel_scan in the order rows() gives, the same as a read from outside
 * (runnel.attach, runnel query, rn_cursor_open: reader.h): what is stored
 * in its order as it is (a table, an aggregate, a distinct: key or id
 * order; an index: its order; a top: group, then rank); a join, filter,
 * map or select in key order (rowsort.h), id order without a key. */
int rn_rel_scan_ordered(rn_rel *rel, rn_scan_fn fn, void *ctx);
/* The key get() of a derived relation reads by: its own, or a top's or an
 * index's input's (as runnel.attach reads them); NULL without a key. */
rn_rel *rn_rel_key_source(rn_rel *rel);
/* A derived relation's row whose key (columns of rn_rel_key_source(rel),
 * vals and given as rn_table_get takes them) is vals, found among its rows
 * (rn_rel_scan: O(rows)); copied into row (cleared first). *found = 0 when
 * absent. Errors name rel. */
int rn_rel_get(rn_rel *rel, msgpack_object *vals, uint8_t *given, msgpack_sbuffer *row, uint64_t *id,
               int *found);

#endif
