/* snapshot.h — a consistent view of the state for reads that run
 * callbacks: scans of tables, joins and aggregates.
 *
 * Inside a group a read sees the group's transaction, with its changes.
 * Outside one, carried groups (several groups sharing one LMDB transaction,
 * runnel.h) are committed first, so the read sees every group committed
 * so far, through a read transaction of its own. */
#ifndef RN_SNAPSHOT_H
#define RN_SNAPSHOT_H

#include "pipeline.h"

typedef struct rn_snapshot {
  MDB_txn *txn;           /* the transaction to read: the group's or own */
  MDB_txn *own;           /* the read transaction begun for it, or NULL */
} rn_snapshot;

/* Opens the view: commits carried groups when no group is open, then takes
 * the group's write transaction or begins a read transaction. what names
 * the relation in errors. Ended by rn_snapshot_close; nothing to close on
 * failure. */
int rn_snapshot_open(rn_pipeline *p, const char *what, rn_snapshot *s);
/* Ends a view rn_snapshot_open opened (aborts its own read transaction). */
void rn_snapshot_close(rn_snapshot *s);

/* The reading of rn_snapshot_read: txn is the view; own_scratch says no
 * change is using p->scratch, so the body may clear it after each row. */
typedef int (*rn_snapshot_fn)(void *ctx, MDB_txn *txn, bool own_scratch);

/* Runs body over a view (rn_snapshot_open) with the pipeline APPLYING: the
 * callbacks body runs may read, but not change tables nor end the group
 * whose transaction it reads. *reading (when not NULL) holds the view's own
 * read transaction while body runs, for the operator's helpers, and NULL
 * after. The state, *reading and the view are restored on every path. */
int rn_snapshot_read(rn_pipeline *p, const char *what, MDB_txn **reading, rn_snapshot_fn body, void *ctx);

#endif
