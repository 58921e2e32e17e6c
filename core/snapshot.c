/* snapshot.c — consistent views of the state for scans (snapshot.h). */
#include "snapshot.h"

int rn_snapshot_open(rn_pipeline *p, const char *what, rn_snapshot *s)
{
  s->txn = s->own = NULL;
  int rc = p->state == RN_IDLE ? rn_flush(p) : 0; /* outside a group: every group committed */
  if (rc) return rc;
  if (p->store.wtxn) {
    s->txn = p->store.wtxn;
    return 0;
  }
  rc = mdb_txn_begin(p->store.env, NULL, MDB_RDONLY, &s->own);
  if (rc) return rn_store_fail(&p->err, rc, what);
  s->txn = s->own;
  return 0;
}

void rn_snapshot_close(rn_snapshot *s)
{
  if (s->own) mdb_txn_abort(s->own);
  s->txn = s->own = NULL;
}

int rn_snapshot_read(rn_pipeline *p, const char *what, MDB_txn **reading, rn_snapshot_fn body, void *ctx)
{
  rn_snapshot s;
  int rc = rn_snapshot_open(p, what, &s);
  if (rc) return rc;
  rn_gstate was = p->state;
  bool own_scratch = was == RN_IDLE || was == RN_OPEN; /* no change is using it */
  if (own_scratch) p->state = RN_APPLYING;
  MDB_txn *outer = reading ? *reading : NULL; /* a read inside a scan's callback goes back to the scan's txn */
  if (reading) *reading = s.own;
  rc = body(ctx, s.txn, own_scratch);
  if (reading) *reading = outer;
  p->state = was;
  rn_snapshot_close(&s);
  return rc;
}
