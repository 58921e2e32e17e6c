/* evolve_log.h — a rebuild's changes told to the sinks of the rebuilt
 * relation in the next group (drawn in evolve_log.c). */
#ifndef RN_EVOLVE_LOG_H
#define RN_EVOLVE_LOG_H

#include "pipeline.h"

/* In the rebuilding transaction, around a stateful relation's rebuild
 * (join.c, aggregate.c …, a keyed map's keys in derive.c): its rows
 * before (what sinks were told) and
 * after; no-ops unless r->rebuild_tells (state kept, not created). A
 * filter or map whose function changed (derive.c, rn_derive_tell_old)
 * has its old function when before is called: its rows before are that
 * function over its input's rows as their sinks were told. */
int rn_rebuild_before(rn_rel *r);
int rn_rebuild_after(rn_rel *r);
/* rn_rebuild_before could not read r's rows as they were: the error is
 * cleared and nothing is told (the sinks are not told wrong changes). */
int rn_rebuild_untold(rn_rel *r);
/* After r's state opened (rn_open_derived_state): finds what an earlier
 * rebuild left untold; created: dropped, the rows' layout changed. */
int rn_rebuild_opened(rn_rel *r, MDB_txn *txn, bool created);

/* A group opened (or its changes are applied again, group.c): every
 * pending rebuild's changes into its relation's log, first. */
int rn_rebuild_tell(rn_pipeline *p);
/* The group is being sealed in txn: the told changes are removed. */
int rn_rebuild_told(rn_pipeline *p, MDB_txn *txn);
/* The group committed (to the caller): nothing is pending any more. */
void rn_rebuild_committed(rn_pipeline *p);
/* The LMDB transaction committed: no carried group can be replayed. */
void rn_rebuild_flushed(rn_pipeline *p);

#endif
