/* group.c — groups: all-or-nothing application of changes.
 *
 * Invariants (GROUP-n in asserts and specs):
 * (1) Every change runs inside exactly one LMDB write transaction, the
 *     group's; nothing of a group is visible to readers before its commit.
 * (2) A failure anywhere in a group — bad input, a callback that raises, LMDB
 *     — rolls the whole group back before the error reaches the caller: no
 *     group is left open and counters return to their committed values.
 * (3) Sequence numbers count committed groups, 1, 2, 3 … per pipeline; the
 *     number is stored in the group's own transaction.
 * (4) Sinks see a group only if every change of it applied; they run before
 *     the LMDB commit, so a sink that fails rolls the group back too.
 *
 * (5) A group never fails because LMDB's map is full: the map doubles and the
 *     group's source changes so far are replayed into a new transaction
 *     (rn_group_regrow); callbacks may run again for them, sinks do not,
 *     since they only run at commit.
 *
 * Transitions: rn_begin (IDLE→OPEN), rn_change_enter (OPEN→APPLYING, or
 * IDLE→APPLYING with an autocommit group), rn_change_leave (APPLYING→OPEN,
 * then commit or rollback), rn_commit (OPEN→COMMITTING→IDLE), rn_rollback
 * and every failure (→IDLE). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "cdc.h"
#include "pipeline.h"

static int open_group(rn_pipeline *p)
{
  int rc = rn_store_begin(&p->store, &p->err);
  if (rc) return rc;
  p->group_serial++;
  p->state = RN_OPEN;
  return 0;
}

RN_API int rn_begin(rn_pipeline *p)
{
  rn_err_clear(&p->err);
  if (p->state != RN_IDLE)
    return rn_err_set(&p->err, RN_EMISUSE, p->state == RN_OPEN ? "begin: a group is already open"
                                                               : "begin: not from inside a callback");
  p->autocommit = false;
  return open_group(p);
}

/* Throws the open group away (2). */
static void rollback_group(rn_pipeline *p)
{
  rn_store_abort(&p->store);
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    r->next_id = r->saved_next_id;
    r->count = r->saved_count;
  }
  rn_logs_clear(p);
  msgpack_zone_clear(&p->scratch);
  p->state = RN_IDLE;
  p->autocommit = false;
  p->stats.rollbacks++;
}

RN_API int rn_rollback(rn_pipeline *p)
{
  if (p->state == RN_APPLYING || p->state == RN_COMMITTING)
    return rn_err_set(&p->err, RN_EMISUSE, "rollback: not from inside a callback");
  rn_err_clear(&p->err);
  if (p->state == RN_OPEN) rollback_group(p);
  return 0;
}

/* Writes |next_id|count| of every source whose counters moved, and the seq. */
static int save_counters(rn_pipeline *p, uint64_t seq)
{
  MDB_txn *txn = p->store.wtxn;
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    if (!r->persistent) continue;
    if (!r->stateful && r->next_id == r->saved_next_id && r->count == r->saved_count) continue;
    size_t nlen = strlen(r->name);
    char key[nlen + 2];
    memcpy(key, "n:", 2);
    memcpy(key + 2, r->name, nlen);
    uint64_t val[3] = { r->next_id, r->count, seq }; /* stateful: saw every group up to seq */
    MDB_val k = { nlen + 2, key }, v = { sizeof val, val };
    int rc = mdb_put(txn, p->store.meta, &k, &v, 0);
    if (rc) return rn_store_fail(&p->err, rc, r->name);
  }
  MDB_val k = { 3, (void *)"seq" }, v = { 8, &seq };
  int rc = mdb_put(txn, p->store.meta, &k, &v, 0);
  return rc ? rn_store_fail(&p->err, rc, "seq") : 0;
}

RN_API int rn_commit(rn_pipeline *p)
{
  if (p->state != RN_OPEN) {
    return rn_err_set(&p->err, RN_EMISUSE, p->state == RN_IDLE ? "commit: no group is open"
                                                               : "commit: not from inside a callback");
  }
  p->state = RN_COMMITTING;
  uint64_t seq = p->seq + 1; /* (3) */
  int rc = rn_cdc_build_all(p, seq);
  if (!rc) rc = save_counters(p, seq);
  while (rc == RN_EFULL && rn_group_regrow(p) == 0) { /* (5): the replay cleared the cdc logs */
    rc = rn_cdc_build_all(p, seq);
    if (!rc) rc = save_counters(p, seq);
  }
  if (!rc) rc = rn_sinks_deliver(p, seq); /* (4) */
  if (!rc) rc = rn_store_commit(&p->store, &p->err);
  if (rc) {
    rollback_group(p);
    return rc;
  }
  p->seq = seq;
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    r->saved_next_id = r->next_id;
    r->saved_count = r->count;
  }
  rn_logs_clear(p);
  msgpack_zone_clear(&p->scratch);
  p->state = RN_IDLE;
  p->autocommit = false;
  p->stats.groups++;
  return 0;
}

int rn_change_enter(rn_pipeline *p)
{
  rn_err_clear(&p->err);
  if (p->state == RN_APPLYING || p->state == RN_COMMITTING)
    return rn_err_set(&p->err, RN_EMISUSE,
                      "tables cannot be changed from inside a callback (filter, map or sink)");
  if (p->state == RN_IDLE) {
    int rc = open_group(p);
    if (rc) return rc;
    p->autocommit = true;
  }
  p->state = RN_APPLYING;
  return 0;
}

int rn_change_leave(rn_pipeline *p, int rc)
{
  assert(p->state == RN_APPLYING);
  msgpack_zone_clear(&p->scratch);
  p->state = RN_OPEN;
  if (rc) {
    rollback_group(p); /* (2) */
    return rc;
  }
  if (p->autocommit) return rn_commit(p);
  return 0;
}

int rn_source_emit(rn_rel *src, const rn_change *c)
{
  rn_pipeline *p = src->p;
  rn_replay *r = &p->replay;
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 256;
    rn_logged *items = realloc(r->items, cap * sizeof *items);
    if (!items) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
    r->items = items;
    r->cap = cap;
  }
  r->items[r->n].rel = src;
  int rc = rn_change_keep(p, c, &r->items[r->n].c);
  if (rc) return rc;
  r->n++;
  return rn_emit(src, c);
}

/* Aborts the group's transaction, doubles the map and applies the logged
 * source changes again in a new one (5). The old log's bytes stay in the
 * group zone until the group ends; the replay logs the changes anew. */
int rn_group_regrow(rn_pipeline *p)
{
  if (p->err.code != RN_EFULL || p->err.cause != MDB_MAP_FULL) return p->err.code;
  for (int attempt = 0; attempt < 16; attempt++) {
    rn_replay old = p->replay;
    p->replay = (rn_replay){ NULL, 0, 0 };
    rn_store_abort(&p->store);
    for (int i = 0; i < p->nrels; i++) {
      rn_rel *r = p->rels[i];
      r->next_id = r->saved_next_id;
      r->count = r->saved_count;
      r->log.n = 0;
    }
    int rc = rn_store_grow(&p->store, &p->err);
    if (!rc) rc = rn_store_begin(&p->store, &p->err);
    if (!rc) p->group_serial++;
    for (size_t i = 0; !rc && i < old.n; i++) rc = rn_source_reapply(old.items[i].rel, &old.items[i].c);
    free(old.items);
    if (!rc) { rn_err_clear(&p->err); return 0; }
    if (p->err.code != RN_EFULL || p->err.cause != MDB_MAP_FULL || !p->store.wtxn) return rc;
  }
  return p->err.code;
}

int rn_group_fail(rn_pipeline *p, int code, const char *msg)
{
  if (p->state == RN_OPEN) rollback_group(p);
  if (msg != p->err.msg) rn_err_set(&p->err, code, "%s", msg);
  p->err.code = code;
  return code;
}
