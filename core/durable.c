/* durable.c — telling the host when groups are durable.
 *
 * A group is committed to the caller when rn_commit returns; it is in LMDB
 * when the LMDB transaction holding it has committed: at once with sync
 * (every group commits its own transaction, synced), later with
 * sync = false (carried groups: at rn_flush, a declaration, a snapshot
 * read, close, or when the carry bounds are reached). It is durable once
 * the disk holds that transaction: with sync, when LMDB's commit returns;
 * with sync = false, LMDB's commits are not synced (they survive a crash
 * of the process, not of the machine), so the file is synced once before
 * the hooks hear of them (rn_durable_sync: one sync serves the outbox's
 * deliveries too, and a state without hooks or durable sinks never pays
 * it). Each hook gets the seq of the last durable group, once per LMDB
 * commit that brought new groups, in increasing order; a sync that fails
 * tells none, and the next commit or rn_flush syncs again. While the
 * hooks run, tables cannot be changed (the pipeline is in the COMMITTING
 * state). */
#include <stdlib.h>

#include "pipeline.h"

typedef struct rn_durable_hook {
  rn_durable_fn fn;
  void *ctx;
  rn_free_fn free_ctx;    /* or NULL */
} rn_durable_hook;

int rn_durable_add(rn_pipeline *p, rn_durable_fn fn, void *ctx, rn_free_fn free_ctx)
{
  rn_durable_hook *a = realloc(p->durables, (size_t)(p->ndurables + 1) * sizeof *a);
  if (!a) {
    if (free_ctx) free_ctx(ctx);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  p->durables = a;
  a[p->ndurables++] = (rn_durable_hook){ fn, ctx, free_ctx };
  return 0;
}

RN_API int rn_on_durable(rn_pipeline *p, rn_durable_fn fn, void *ctx)
{
  if (!p) return RN_EINVAL;
  rn_err_clear(&p->err);
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's hook would never be called */
  if (!fn) return rn_err_set(&p->err, RN_EINVAL, "rn_on_durable needs a callback");
  return rn_durable_add(p, fn, ctx, NULL);
}

int rn_durable_sync(rn_pipeline *p)
{
  if (!p->carry || !p->unsynced) return 0;
  int rc = mdb_env_sync(p->store.env, 1);
  if (!rc) p->unsynced = false;
  return rc;
}

void rn_durable_reached(rn_pipeline *p, uint64_t seq)
{
  if (seq <= p->durable_seq) return; /* no new group in this transaction */
  if (p->ndurables && rn_durable_sync(p) != 0) return; /* not on disk: the next commit or rn_flush tries again */
  p->durable_seq = seq;
  rn_gstate state = p->state;
  p->state = RN_COMMITTING; /* a hook may read, not change tables */
  int n = p->ndurables; /* a hook added by one of them hears from the next commit on: one that re-arms would loop */
  for (int i = 0; i < n; i++) p->durables[i].fn(p->durables[i].ctx, seq); /* p->durables moves as hooks are added */
  p->state = state;
}

void rn_durable_free(rn_pipeline *p)
{
  for (int i = 0; i < p->ndurables; i++)
    if (p->durables[i].free_ctx) p->durables[i].free_ctx(p->durables[i].ctx);
  free(p->durables);
  p->durables = NULL;
  p->ndurables = 0;
}
