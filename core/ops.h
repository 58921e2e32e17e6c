/* ops.h — what an operator is: the functions the graph calls on a relation
 * of one kind, as SQLite's sqlite3_module or Redis's command table.
 *
 * Every relation kind (rn_relkind, pipeline.h) provides one rn_rel_ops in
 * its own file, and ops.c lists them by kind (the one line of registration
 * a new operator adds, with its kind's pinned value in pipeline.h; see
 * distinct.c for a whole small one). rn_rel_new sets rel->ops; the graph calls through
 * it and names no operator. The operator keeps its own state in rel->ctx
 * (its file's struct), which its free releases:
 *
 *     kind       ops                 file          apply  scan                  seal    reapply
 *     table      rn_table_ops        table.c        -      rows by cursor         -       yes
 *     stream     rn_stream_ops       table.c        -      -                      -       yes
 *     filter     rn_filter_ops       derive.c       yes    input's rows, filtered -       -
 *     map        rn_map_ops          derive.c       yes    input's rows, mapped   claims  -
 *     cdc        rn_cdc_ops          cdc.c          -      -                      images  -
 *     join       rn_join_ops         join.c         yes    from its index         -       -
 *     aggregate  rn_aggregate_ops    aggregate.c    yes    its groups             -       -
 *     lookup     rn_lookup_ops       lookup.c       -      -   (read by a join)   -       -
 *     distinct   rn_distinct_ops     distinct.c     yes    its rows               -       -
 *     top        rn_top_ops          top.c          yes    its tops, ranked       -       -
 *     index      rn_index_ops        index.c        yes    its rows, in order     -       -
 *
 * A NULL entry means the kind has no such operation: a source takes no
 * change from an input, a stream holds no rows to scan, only sources are
 * replayed. A window's finalization is no seal: it happens inside apply,
 * when an event's time closes the window (aggregate.c).
 *
 * Not dispatched here: get, since only a table answers a point read by key
 * (rn_table_get, table.c; a join reads its right side through lookup.h). */
#ifndef RN_OPS_H
#define RN_OPS_H

#include "pipeline.h"

/* Called for every current row of a scan (unordered); non-zero stops it. */
typedef int (*rn_scan_fn)(void *ctx, uint64_t id, const char *row, size_t len);

struct rn_rel_ops {
  const char *name;       /* the kind's name ("table", "join" …: rn_relkind_name) */
  /* A change c of the input from arrived: apply it to rel's state and emit
   * rel's own changes (rn_emit). In the group's write transaction. */
  int (*apply)(rn_rel *rel, rn_rel *from, const rn_change *c);
  /* Calls fn for every current row of a table-like rel (scan.h). */
  int (*scan)(rn_rel *rel, rn_scan_fn fn, void *ctx);
  /* Group seq ends: last writes of the group from what it logged (a cdc
   * relation's images), last checks (a keyed map's unsettled key claims
   * fail it, mapkey.h). Called for every relation in declaration order,
   * before the counters are saved and the sinks are told (group.c). */
  int (*seal)(rn_rel *rel, uint64_t seq);
  /* A source's logged change c applied again, to the same starting state,
   * after the map grew or a carried group rolled back (group.c GROUP-5/6). */
  int (*reapply)(rn_rel *rel, const rn_change *c);
  /* Releases ctx, the operator's own state (rel->ctx), at close or when its
   * declaration fails; never called with NULL. */
  void (*free)(void *ctx);
};

/* The operator of kind (never NULL for an rn_relkind). */
const rn_rel_ops *rn_rel_ops_of(rn_relkind kind);

extern const rn_rel_ops rn_table_ops, rn_stream_ops, rn_filter_ops, rn_map_ops, rn_cdc_ops,
                        rn_join_ops, rn_aggregate_ops, rn_lookup_ops, rn_distinct_ops;
extern const rn_rel_ops rn_top_ops, rn_index_ops; /* ordered access (top.c, index.c) */

#endif
