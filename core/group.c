/* group.c — groups: all-or-nothing application of changes.
 *
 * Invariants (GROUP-n in asserts and specs):
 * (1) Every change of a group runs inside one LMDB write transaction;
 *     nothing of a group is visible to other readers before it is in a
 *     committed LMDB transaction, and LMDB transactions hold whole groups.
 * (2) A failure anywhere in a group — bad input, a callback that raises, LMDB
 *     — rolls the whole group back before the error reaches the caller: no
 *     group is left open and counters return to their committed values.
 *     Groups committed before it are untouched.
 * (3) Sequence numbers count committed groups, 1, 2, 3 … per pipeline; each
 *     group writes its number in the transaction that holds it.
 * (4) Sinks see a group only if every change of it applied. In-group sinks
 *     run before the group commits, so one that fails rolls the group back
 *     too, and every in-group sink that saw any part of it is told (sink.c,
 *     SINKS-1); durable sinks (NDJSON, SQLite, named ones) get it from the
 *     outbox once the LMDB transaction holding it committed (outbox.c).
 * (5) A group never fails because LMDB's map is full: the map doubles and the
 *     transaction's source changes are replayed into a new one
 *     (rn_group_regrow); callbacks may run again for them, sinks do not,
 *     since they only run at commit — unless the map fills at commit (a
 *     store sink's writes, or a subscriber's read that writes the
 *     write-back layer's entries: rn_group_check_store): then the map
 *     grows and the group runs again; a sink reached sees no change of it
 *     twice (sink.c, SINKS-3: those told of rollbacks hear of one and get
 *     it again whole, the others resume it: seal_group). A regrow goes on
 *     with the same group: its cursors read on in the new transaction
 *     (table.c).
 * (6) With sync = false several groups may share one LMDB transaction
 *     ("carried" groups, committed to the caller, not yet to LMDB): it
 *     commits when carry_groups groups or carry_changes changes or
 *     carry_seconds have gathered (rn_open_opts; RN_CARRY_* by default),
 *     at rn_flush, at a declaration, when a snapshot read begins, and at
 *     close. A group that fails among carried
 *     ones rolls back alone: the transaction is aborted and the carried
 *     groups replayed into a new one, silently (their in-group sinks
 *     already ran; sinks writing into LMDB redo their writes:
 *     rn_sinks_replay; their outbox entries are written again).
 *     A crash loses at most the carried groups, never part of one.
 *
 * Transitions: rn_begin (IDLE→OPEN), rn_change_enter (OPEN→APPLYING, or
 * IDLE→APPLYING with an autocommit group), rn_change_leave (APPLYING→OPEN,
 * then commit or rollback), rn_commit (OPEN→COMMITTING→IDLE), rn_rollback
 * and every failure (→IDLE). */
#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "envs.h"
#include "evolve_log.h"
#include "evolve_reads.h"
#include "lookup.h"
#include "ops.h"
#include "outbox.h"
#include "pipeline.h"
#include "wb.h"


static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void rollback_group(rn_pipeline *p, uint64_t told);
static void sinks_told(rn_pipeline *p, void (*tell)(rn_pipeline *, uint64_t), uint64_t seq);
static void sinks_rolled_back(rn_pipeline *p, uint64_t seq);

/* A rebuild's changes (evolve_log.h) open the group's logs. */
static int open_group(rn_pipeline *p)
{
  if (!p->store.wtxn) {
    int rc = rn_store_begin(&p->store, &p->err);
    if (rc) return rc;
    rn_lookups_committed(p); /* a new transaction: what was answered before (a declaration's rebuild) is past */
  }
  p->group_serial++;
  p->replay_mark = p->replay.n;
  p->state = RN_OPEN;
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    memcpy(r->begun.emitted, r->emitted, sizeof r->emitted);
    r->begun.saved = r->emitted_saved, r->begun.changed_seq = r->changed_seq;
  }
  rn_lookups_group_began(p);
  int rc = rn_rebuild_tell(p);
  if (rc) rollback_group(p, 0);
  return rc;
}

/* A misuse leaves the open group as it was: the caller may still commit it
 * (runnel.h says so). */
RN_API int rn_begin(rn_pipeline *p)
{
  if (!p) return RN_EINVAL;
  rn_err_clear(&p->err);
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's use of its parent's LMDB */
  if (p->state != RN_IDLE)
    return rn_err_set(&p->err, RN_EMISUSE, p->state == RN_OPEN ? "begin: a group is already open; it stays open"
                                                               : "begin: not from inside a callback");
  p->autocommit = false;
  return open_group(p);
}

/* The LMDB transaction committed: its groups are now everyone's. */
static void forget_carried(rn_pipeline *p)
{
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    r->lmdb_next_id = r->next_id;
    r->lmdb_count = r->count;
  }
  p->replay.n = 0;
  p->replay_mark = 0;
  p->carried = 0;
  msgpack_zone_clear(&p->carry_zone);
  rn_sinks_forget(p);
  rn_rebuild_flushed(p);
  rn_lookups_committed(p);
}

static int save_counters(rn_pipeline *p, uint64_t seq, bool all);

/* Re-applies logged source changes [from, to) of old: silently for carried
 * groups, into the logs for the open group. */
static int reapply(rn_pipeline *p, const rn_replay *old, size_t from, size_t to, bool carried, bool grow)
{
  int rc = 0;
  uint64_t changes = p->stats.changes; /* counted when they first went through */
  p->replaying = carried;
  p->reapplying = true;
  for (size_t i = from; !rc && i < to; i++) {
    rc = old->items[i].rel->ops->reapply(old->items[i].rel, &old->items[i].c);
    if (!grow) msgpack_zone_clear(&p->scratch);
  }
  p->reapplying = false;
  p->replaying = false;
  p->stats.changes = changes;
  return rc;
}

/* The replay re-applies source changes only: what the carried groups'
 * commits wrote besides (every relation's counters, a cdc relation's ids,
 * the seq, a store's rows, a SQLite sink's marks) is written again here, as
 * it stood after the last of them (saved_*, p->seq). */
static int keep_carried(rn_pipeline *p)
{
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    r->next_id = r->saved_next_id;
    r->count = r->saved_count;
  }
  int rc = save_counters(p, p->seq, true);
  return rc ? rc : rn_sinks_replay(p);
}

/* A regrow applies the open group's changes again, counted as they go
 * (rel:changes()), and writes the carried groups' "ch:" records again
 * (keep_carried): every relation's emitted counts, emitted_saved and
 * changed_seq go back to where the open group began, as they stood after
 * the last carried group. Kept as they were, the replay counted the open
 * group twice, and keep_carried, finding emitted counts beyond
 * emitted_saved, recorded the open group's changes under the last carried
 * group's seq and left the open group's own commit nothing to record. */
static void count_from_begun(rn_pipeline *p)
{
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    memcpy(r->emitted, r->begun.emitted, sizeof r->emitted);
    r->emitted_saved = r->begun.saved;
    r->changed_seq = r->begun.changed_seq;
  }
}

/* Aborts the LMDB transaction and starts a new one holding the first
 * `upto` logged source changes again: those before replay_mark silently
 * (carried groups, then keep_carried), the rest into the logs (the open
 * group). A regrow keeps the scratch zone: the change being retried holds
 * its input there. */
static int restart(rn_pipeline *p, size_t upto, bool grow)
{
  rn_replay old = p->replay;
  size_t mark = p->replay_mark;
  rn_lookups_reapply_starts(p);
  p->replay = (rn_replay){ NULL, 0, 0 };
  rn_store_abort(&p->store);
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    r->next_id = r->lmdb_next_id;
    r->count = r->lmdb_count;
    r->log.n = r->log_told = 0;
  }
  int rc = grow ? rn_store_grow(&p->store, &p->err) : 0;
  if (rc) { /* the map did not grow (the address space): nothing was applied again, and the log stays */
    p->replay = old;  /* for the restart without growth that takes the group back (rollback_group), */
    return rc;        /* else the carried groups were lost with no word, their seq kept */
  }
  if (grow && p->state != RN_IDLE) count_from_begun(p); /* between groups they are the last commit's */
  rc = rn_store_begin(&p->store, &p->err);
  if (!rc && (!grow || p->state == RN_IDLE)) p->group_serial++; /* a regrow goes on with the open group: its cursors too */
  rn_gstate state = p->state;
  p->state = RN_APPLYING; /* callbacks run again; they may not change tables */
  size_t n = upto < old.n ? upto : old.n, carried_end = mark < n ? mark : n;
  if (!rc) rc = reapply(p, &old, 0, carried_end, true, grow);
  if (!rc && p->carried) rc = keep_carried(p);
  if (!rc) rc = rn_outbox_replay(p); /* the carried groups' outbox entries, again */
  if (!rc && grow && state != RN_IDLE) rc = rn_rebuild_tell(p); /* the open group's logs start with them again */
  if (!rc) rc = reapply(p, &old, carried_end, n, false, grow);
  p->state = state;
  if (rc && grow) { /* the replay failed part way (it filled the grown map too): the next attempt, or the rollback,
                       replays the whole log again, not the part this one logged (the rest was lost, with no word) */
    free(p->replay.items);
    p->replay = old;
    p->replay_mark = mark;
    return rc;
  }
  p->replay_mark = mark < p->replay.n ? mark : p->replay.n;
  free(old.items);
  return rc;
}

/* Throws the open group away (2); carried groups are replayed (6). Sinks
 * that saw part of group `told` (0: none did) hear that it rolled back,
 * after it; if the carried groups cannot be replayed they are lost, and
 * sinks hear of those next (SINKS-2). */
static void take_back(rn_pipeline *p, uint64_t told);
static void rollback_group(rn_pipeline *p, uint64_t told)
{
  take_back(p, told);
  p->stats.rollbacks++;
}

/* rollback_group but for the count of rollbacks: also what a failed
 * growth between groups does (flush_write_back_idle), with no group. */
static void take_back(rn_pipeline *p, uint64_t told)
{
  uint64_t lost = 0; /* the last carried group, when they are lost */
  /* What the group emitted is no change of the state: a stream that gave its first event in it, else
     recorded as changed (its "ch:" record) in the next group, would read as having given events with
     no counters kept, refused at the next open as damaged. rel:changes() still counts them. */
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    uint64_t begun = r->begun.emitted[0] + r->begun.emitted[1] + r->begun.emitted[2];
    r->emitted_saved = r->begun.saved + (rn_rel_emitted(r) - begun);
    r->changed_seq = r->begun.changed_seq;
  }
  rn_lookups_rolled_back(p); /* the carried groups applied again get the answers they got */
  if (p->carried) { /* even with no source changes: their seq and counters */
    rn_err keep = p->err;
    if (restart(p, p->replay_mark, false) != 0) {
      /* The carried groups could not be applied again: they are lost, as
       * in a crash. Say so rather than pretend. */
      rn_store_abort(&p->store);
      rn_outbox_forget(p);
      char first[sizeof keep.msg]; /* rn_err_set must not read the buffer it writes */
      memcpy(first, keep.msg, sizeof first);
      rn_err_set(&keep, RN_ESTORE, "%s (and %u groups not yet flushed to LMDB were lost: %s)",
                 first, p->carried, p->err.msg);
      for (int i = 0; i < p->nrels; i++) {
        p->rels[i]->saved_next_id = p->rels[i]->lmdb_next_id;
        p->rels[i]->saved_count = p->rels[i]->lmdb_count;
      }
      lost = p->seq;
      p->seq -= p->carried; /* LMDB's last group, as a reopen would find it */
    }
    p->err = keep;
  } else {
    rn_store_abort(&p->store);
    rn_outbox_forget(p);
    p->replay.n = 0;
    p->replay_mark = 0;
    msgpack_zone_clear(&p->carry_zone);
  }
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    r->next_id = r->saved_next_id;
    r->count = r->saved_count;
  }
  rn_logs_clear(p);
  msgpack_zone_clear(&p->scratch);
  p->state = RN_IDLE;
  p->autocommit = false;
  if (told) sinks_told(p, sinks_rolled_back, told); /* after it: they see the state without the group */
  if (lost) {
    sinks_told(p, rn_sinks_lost, lost); /* carried groups up to lost were lost (SINKS-2) */
    forget_carried(p);
  }
}

RN_API int rn_rollback(rn_pipeline *p)
{
  if (!p) return RN_EINVAL;
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's use of its parent's LMDB */
  if (p->state == RN_APPLYING || p->state == RN_COMMITTING)
    return rn_err_set(&p->err, RN_EMISUSE, "rollback: not from inside a callback");
  rn_err_clear(&p->err);
  if (p->state == RN_OPEN) rollback_group(p, 0);
  return 0;
}

/* Writes |next_id|count|seq| of every persistent relation whose counters
 * moved (stateful ones every time: they saw the group; all of them when
 * all), the "ch:" record of every relation the group changed, and the
 * seq with the span the "ch:" records know (store.h). */
static int save_counters(rn_pipeline *p, uint64_t seq, bool all)
{
  MDB_txn *txn = p->store.wtxn;
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    int crc = rn_state_save_changed(p, r, txn, seq, all);
    if (crc) return crc;
    if (!r->persistent) continue;
    if (!all && !r->stateful && r->next_id == r->saved_next_id && r->count == r->saved_count) continue;
    int rc = rn_state_save_counters(p, r, txn, seq);
    if (rc) return rc;
  }
  MDB_val k = { RN_PREFIX_LEN(RN_META_SEQ), (void *)RN_META_SEQ }, v = { 8, &seq };
  int rc = mdb_put(txn, p->store.meta, &k, &v, 0);
  uint64_t span[2] = { p->changes_from, seq };
  MDB_val sk = { RN_PREFIX_LEN(RN_META_CHANGED_SPAN), (void *)RN_META_CHANGED_SPAN }, sv = { sizeof span, span };
  if (!rc) rc = mdb_put(txn, p->store.meta, &sk, &sv, 0);
  if (!rc && (rc = rn_rebuild_told(p, txn))) return rc; /* a rebuild's changes went to the sinks with the group */
  if (!rc && (rc = rn_reads_save(p, txn))) return rc; /* what functions were seen to read (evolve_reads.h) */
  if (!rc && p->evolved_kept) { /* every derived relation now is rebuilt or stale (store.h's "ev") */
    MDB_val ek = { RN_PREFIX_LEN(RN_META_EVOLVED), (void *)RN_META_EVOLVED };
    rc = mdb_del(txn, p->store.meta, &ek, NULL);
    if (rc == MDB_NOTFOUND) rc = 0;
    if (!rc) p->evolved_kept = false;
  }
  return rc ? rn_store_fail(&p->err, rc, RN_META_SEQ) : 0;
}

/* The write-back layer's entries into the LMDB transaction (wb.h), before
 * it commits; RN_EFULL (cause MDB_MAP_FULL) when the map fills. */
static int flush_write_back(rn_pipeline *p)
{
  int rc = rn_wb_flush(&p->store);
  return rc ? rn_store_fail(&p->err, rc, "writing the state") : 0;
}

/* A carried transaction whose write-back entries passed their bound
 * (wb.h (4)): they go into the LMDB transaction, which carries on, and the
 * layer starts empty. Between groups no one holds a pointer into it. */
static int flush_write_back_bounded(rn_pipeline *p)
{
  int rc = flush_write_back(p);
  if (!rc) rn_wb_forget(p->store.wb);
  return rc;
}

/* The same outside a group (rn_flush): a full map grows and every carried
 * group is applied again, as (5) does inside one — also when the map
 * filled before, in a read between groups that left the transaction
 * unusable (a durable subscriber's rn_get: rn_group_check_store). */
static int flush_write_back_idle(rn_pipeline *p)
{
  int rc = rn_group_check_store(p, flush_write_back(p));
  for (int attempt = 0; rc == RN_EFULL && p->state == RN_IDLE && attempt < 16; attempt++) {
    p->replay_mark = p->replay.n; /* no open group: every logged change is carried */
    if (rn_group_regrow(p) != 0) {
      take_back(p, 0); /* the carried groups applied again in the map as it is, else said lost */
      return p->err.code;
    }
    rc = rn_group_check_store(p, flush_write_back(p));
  }
  return rc;
}

int rn_group_write_back_idle(rn_pipeline *p)
{
  return p->state == RN_IDLE && p->store.wtxn && p->store.wb ? flush_write_back_idle(p) : 0;
}

static int commit_lmdb(rn_pipeline *p)
{
  int rc = flush_write_back_idle(p);
  if (!rc) rc = rn_store_commit_keep(&p->store, &p->err);
  if (rc) return rc;
  if (p->carry) rn_store_release_pages(&p->store); /* LMDB reuses freed pages from the transaction after next */
  forget_carried(p);
  rn_reads_saved(p);
  p->unsynced = true; /* with nosync: until rn_durable_sync */
  rn_outbox_committed(p);
  p->stats.lmdb_commits++;
  return 0;
}

static bool carry_on(rn_pipeline *p)
{
  if (!p->carry) return false;
  if (p->carried == 0) p->carried_since = now();
  return p->carried + 1 < p->carry_groups && p->replay.n < p->carry_changes &&
         now() - p->carried_since < p->carry_seconds && !rn_wb_dirtied_over(&p->store, p->carry_page_share, p->carried + 1);
}

/* Sinks hear of what became of groups (tell: rn_sinks_rolled_back,
 * rn_sinks_redo, rn_sinks_lost) while the pipeline is COMMITTING: a notice
 * may read, not change tables, begin, commit or close; what they do then
 * (a notice that calls runnel and is refused) is not the group's error. */
static void sinks_told(rn_pipeline *p, void (*tell)(rn_pipeline *, uint64_t), uint64_t seq)
{
  rn_err keep = p->err;
  rn_gstate state = p->state;
  p->state = RN_COMMITTING;
  tell(p, seq);
  p->state = state;
  p->err = keep;
}

/* Sinks that saw part of group seq hear that it rolled back. */
static void sinks_rolled_back(rn_pipeline *p, uint64_t seq) { rn_sinks_done(p, seq, false); }

/* Every relation's seal (ops.h: a cdc relation builds its images), in
 * declaration order. */
static int seal_relations(rn_pipeline *p, uint64_t seq)
{
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    int rc = r->ops->seal ? r->ops->seal(r, seq) : 0;
    if (rc) return rc;
  }
  return 0;
}

/* The group's seals (CDC images), counters and sinks. When LMDB's map fills — in
 * any of them, a store sink's writes included — the map grows and the
 * group runs again (5): the sinks reached that hear of rollbacks are told
 * of one and get it again whole, the others resume it (SINKS-3). */
static int seal_group(rn_pipeline *p, uint64_t seq, bool to_lmdb)
{
  for (;;) {
    int rc = seal_relations(p, seq);
    if (!rc) rc = save_counters(p, seq, false);
    if (!rc && to_lmdb) rc = flush_write_back(p); /* before any sink: a full map here reaches none */
    if (!rc && !to_lmdb && rn_wb_bytes(&p->store) > RN_WB_MAX_BYTES) rc = flush_write_back_bounded(p);
    if (!rc) rc = rn_outbox_record(p, seq); /* durable sinks get it after LMDB commits (outbox.c) */
    if (!rc) rc = rn_sinks_deliver(p, seq); /* (4) */
    rc = rn_group_check_store(p, rc); /* a subscriber's read may have filled the map */
    if (rc != RN_EFULL) return rc;
    sinks_told(p, rn_sinks_redo, seq); /* it runs again after the map grew (5, SINKS-3) */
    if (rn_group_regrow(p) != 0) return p->err.code; /* the replay cleared the cdc logs */
  }
}

RN_API int rn_commit(rn_pipeline *p)
{
  if (!p) return RN_EINVAL;
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's use of its parent's LMDB */
  if (p->state != RN_OPEN) {
    return rn_err_set(&p->err, RN_EMISUSE, p->state == RN_IDLE ? "commit: no group is open"
                                                               : "commit: not from inside a callback");
  }
  rn_err_clear(&p->err);
  p->state = RN_COMMITTING;
  rn_oom_clear();
  uint64_t seq = p->seq + 1; /* (3) */
  bool carry = carry_on(p);
  int rc = rn_group_oom(p, seal_group(p, seq, !carry));
  bool carried = !rc && carry;
  if (!rc && !carried) rc = commit_lmdb(p);
  if (rc) {
    rollback_group(p, seq);
    return rc;
  }
  if (carried) rn_sinks_carried(p, seq); /* (SINKS-2) */
  rn_sinks_done(p, seq, true);
  rn_rebuild_committed(p);
  if (carried) p->carried++;
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
  rn_outbox_after_commit(p); /* delivers what is durable now, retries what failed */
  if (!carried) rn_durable_reached(p, seq);
  rn_err_clear(&p->err); /* what callbacks were refused is not the commit's message */
  return 0;
}

/* This process's writer of dir between groups with a carried transaction
 * open, or NULL. */
static rn_pipeline *carrying_writer(const char *dir)
{
  void *writer = NULL;
  rn_err said;
  if (!dir || rn_envs_writer(dir, &writer, &said)) return NULL; /* the read then says it, as before */
  rn_pipeline *p = writer ? (rn_pipeline *)((char *)writer - offsetof(rn_pipeline, store)) : NULL;
  return p && p->state == RN_IDLE && p->store.wtxn && p->store.pid == getpid() ? p : NULL;
}

int rn_flush_before_read(const char *dir, rn_err *e)
{
  rn_pipeline *p = carrying_writer(dir);
  if (!p || !rn_flush(p)) return 0;
  return rn_err_keep(e, p->err.code, p->err.msg);
}

uint64_t rn_carried_before_read(const char *dir)
{
  rn_pipeline *p = carrying_writer(dir);
  return p ? p->stats.groups | 1ULL << 63 : 0; /* never repeats: carried groups lost free their seqs */
}

RN_API int rn_flush(rn_pipeline *p)
{
  if (!p) return RN_EINVAL;
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's use of its parent's LMDB */
  if (p->state == RN_APPLYING || p->state == RN_COMMITTING)
    return rn_err_set(&p->err, RN_EMISUSE, "flush: not from inside a callback");
  rn_err_clear(&p->err);
  if (p->state == RN_OPEN) return 0;
  if (!p->store.wtxn) { /* retries a failed delivery (OUTBOX-4), and a failed sync of the hooks' */
    rn_outbox_after_commit(p);
    rn_durable_reached(p, p->seq);
    rn_err_clear(&p->err); /* what callbacks were refused is not the flush's message */
    return 0;
  }
  int rc = commit_lmdb(p);
  if (!rc) rn_outbox_after_commit(p);
  if (rc) { /* the carried groups are lost, as in a crash: say so, with the cause */
    rn_outbox_forget(p);
    rn_err cause = p->err;
    rn_err_set(&p->err, rc, "%s (%u groups not yet flushed to LMDB were lost)", cause.msg, p->carried);
    p->err.cause = cause.cause;
    for (int i = 0; i < p->nrels; i++) {
      rn_rel *r = p->rels[i];
      r->next_id = r->saved_next_id = r->lmdb_next_id;
      r->count = r->saved_count = r->lmdb_count;
    }
    uint64_t last = p->seq;
    p->seq -= p->carried; /* LMDB's last group, as a reopen would find it */
    sinks_told(p, rn_sinks_lost, last);
    forget_carried(p);
  } else {
    rn_durable_reached(p, p->seq);
    rn_err_clear(&p->err); /* what hooks and durable subscribers were refused is not the flush's message */
  }
  return rc;
}

int rn_change_enter(rn_pipeline *p)
{
  rn_err_clear(&p->err);
  rn_oom_clear();
  if (p->state == RN_APPLYING || p->state == RN_COMMITTING)
    return rn_err_set(&p->err, RN_EMISUSE,
                      "tables cannot be changed from inside a callback (filter, map or sink)");
  if (p->state == RN_IDLE) {
    int rc = open_group(p);
    if (rc) return rc;
    p->autocommit = true;
  }
  p->state = RN_APPLYING;
  p->replay_at_enter = p->replay.n;
  rn_lookups_change_began(p);
  return 0;
}

/* A refusal that came before any write: the input was bad, the row was a
 * duplicate or absent. Only p:run's skip mode keeps the group then. */
static bool harmless(rn_pipeline *p, int rc)
{
  return p->tolerate_bad_input && !p->autocommit && p->replay.n == p->replay_at_enter &&
         (rc == RN_EINVAL || rc == RN_EEXIST || rc == RN_ENOTFOUND);
}

int rn_change_leave(rn_pipeline *p, int rc)
{
  assert(p->state == RN_APPLYING);
  rc = rn_group_oom(p, rc);
  msgpack_zone_clear(&p->scratch);
  p->state = RN_OPEN;
  if (rc && harmless(p, rc)) return rc;
  if (rc) {
    rollback_group(p, 0); /* (2) */
    return rc;
  }
  if (p->autocommit) return rn_commit(p);
  return 0;
}

/* rn_source_reapply reads a logged change's new row, and its old one only
 * for a delete or a keyless table's update (a keyed insert or update is
 * applied again as an upsert of its new row): the log keeps no more. */
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
  rn_logged *kept = &r->items[r->n];
  kept->rel = src;
  rn_change logged = *c;
  if (c->verb != RN_DELETE && (c->verb != RN_UPDATE || src->schema->nkey)) logged.old = NULL, logged.old_len = 0;
  int rc = rn_change_keep(p, &p->carry_zone, &logged, &kept->c);
  if (rc) return rc;
  r->n++;
  rn_change now = *c;
  now.row = kept->c.row; /* kept until the LMDB commit: c->row may be a buffer reused meanwhile */
  return rn_emit(src, &now);
}

/* (5): aborts the transaction, doubles the map and applies every logged
 * source change again (carried groups silently, the open group's into its
 * logs). The old log's bytes stay in the carry zone until the LMDB commit. */
int rn_group_regrow(rn_pipeline *p)
{
  if (p->err.code != RN_EFULL || p->err.cause != MDB_MAP_FULL) return p->err.code;
  for (int attempt = 0; attempt < 16; attempt++) {
    int rc = restart(p, p->replay.n, true);
    if (!rc) { rn_err_clear(&p->err); return 0; }
    if (p->err.code != RN_EFULL || p->err.cause != MDB_MAP_FULL || !p->store.wtxn) return rc;
  }
  return p->err.code;
}

int rn_group_regrow_change(rn_pipeline *p)
{
  if (p->replay.n > p->replay_at_enter) p->replay.n = p->replay_at_enter; /* the retry logs it again */
  rn_lookups_change_retried(p); /* and its lookups' answers */
  return rn_group_regrow(p);
}

int rn_group_fail(rn_pipeline *p, int code, const char *msg)
{
  p->replay_at_enter = p->replay.n;
  if (p->state == RN_OPEN && !harmless(p, code)) rollback_group(p, 0);
  if (msg != p->err.msg) rn_err_keep(&p->err, code, msg); /* a message, or a script's own */
  p->err.code = code;
  return code;
}

int rn_group_check_store(rn_pipeline *p, int rc)
{
  int failed = p->store.wb_failed;
  if (!failed || (rc == RN_EFULL && p->err.cause == failed)) return rc;
  return rn_store_fail(&p->err, failed, "writing the state");
}

int rn_group_oom(rn_pipeline *p, int rc)
{
  if (!rn_oom() || rc == RN_ENOMEM) return rc;
  return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
}
