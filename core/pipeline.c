/* pipeline.c — opening and closing a pipeline. */
#include "evolve.h"
#include "pipeline.h"
#include "store_sink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outbox.h"
#include "upgrade.h"
#include "wb.h"

/* The "chs" record (store.h) damaged (len bytes; span: as read when 16):
 * what the "ch:" records know is not known, so every group before this
 * open counts as changing every relation (outbox.c's note of the groups
 * a durable sink declared again missed says too much, never too little). */
static void note_span_damaged(rn_pipeline *p, size_t len, const uint64_t *span)
{
  char what[128];
  p->changes_from = p->seq;
  if (span) snprintf(what, sizeof what, "says groups %llu to %llu, the last group being %llu",
                     (unsigned long long)span[0] + 1, (unsigned long long)span[1], (unsigned long long)p->seq);
  else snprintf(what, sizeof what, "is %zu bytes, not 16", len);
  rn_evolve_note(p, "state damaged: %s: the span of groups its change records know %s: every group up to %llu "
                 "counts as changing every relation (a durable sink declared again is told it may have missed them)",
                 p->store.path, what, (unsigned long long)p->seq); /* out of memory: said in p->err */
}

/* The last committed group's number (absent in a new state), and whether
 * a change is still marked (store.h's "ev", evolve.c). */
static int read_seq(rn_pipeline *p)
{
  MDB_txn *txn;
  int rc = rn_store_txn(p->store.env, MDB_RDONLY, &txn);
  if (rc) return rn_store_fail(&p->err, rc, p->store.path);
  MDB_val k = { RN_PREFIX_LEN(RN_META_SEQ), (void *)RN_META_SEQ }, v;
  rc = mdb_get(txn, p->store.meta, &k, &v);
  if (rc == 0 && v.mv_size == 8) memcpy(&p->seq, v.mv_data, 8);
  else if (rc == 0) rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: the sequence number is %zu bytes, not 8",
                               p->store.path, v.mv_size);
  else if (rc != MDB_NOTFOUND) rn_store_fail(&p->err, rc, p->store.path);
  uint64_t span[2];
  MDB_val sk = { RN_PREFIX_LEN(RN_META_CHANGED_SPAN), (void *)RN_META_CHANGED_SPAN }, sv;
  bool found = (rc == 0 || rc == MDB_NOTFOUND) && mdb_get(txn, p->store.meta, &sk, &sv) == 0;
  bool known = found && sv.mv_size == sizeof span;
  if (known) memcpy(span, sv.mv_data, sizeof span);
  if (found && (!known || span[0] > span[1] || span[1] > p->seq)) /* damaged: */
    note_span_damaged(p, sv.mv_size, known ? span : NULL);
  else p->changes_from = known && span[1] == p->seq ? span[0] : p->seq; /* an older build's groups are not known */
  MDB_val ek = { RN_PREFIX_LEN(RN_META_EVOLVED), (void *)RN_META_EVOLVED }, ev;
  if ((rc == 0 || rc == MDB_NOTFOUND) && mdb_get(txn, p->store.meta, &ek, &ev) == 0)
    rn_evolve_load(p, &ev); /* changes whose dependants may not have been rebuilt yet */
  mdb_txn_abort(txn);
  return p->err.code; /* RN_OK unless set above */
}

/* rn_open_opts.write_back, else RUNNEL_WRITE_BACK=1 or 0 (compare the
 * paths without changing a program). Off by default: on fkjoin's full
 * workload (200,000 players) the layer's working set outgrows its cache
 * and the plain path is about 1.5 times faster by the clock; on smaller
 * working sets the layer saves about a quarter of the instructions. */
static bool write_back_on(const rn_open_opts *opts)
{
  if (opts && opts->write_back) return opts->write_back > 0;
  const char *env = getenv("RUNNEL_WRITE_BACK");
  return env && strcmp(env, "1") == 0;
}

RN_API int rn_pipeline_open(const rn_open_opts *opts, rn_pipeline **out, char *errbuf, size_t errlen)
{
  if (!out) {
    if (errbuf && errlen) snprintf(errbuf, errlen, "open: out must not be NULL");
    return RN_EINVAL;
  }
  *out = NULL;
  if (opts && opts->path && !*opts->path) { /* no directory: mkdir says "No such file", LMDB would read "/data.mdb" */
    if (errbuf && errlen) snprintf(errbuf, errlen, "open: the path is empty (a NULL path opens a temporary state)");
    return RN_EINVAL;
  }
  if (opts && opts->max_readers > RN_MAX_READERS) {
    if (errbuf && errlen)
      snprintf(errbuf, errlen, "open: max_readers %u is too many: at most %u (0: LMDB's 126)", opts->max_readers,
               RN_MAX_READERS);
    return RN_EINVAL;
  }
  if (opts && (opts->carry_groups < 0 || !(opts->carry_seconds >= 0))) {
    if (errbuf) snprintf(errbuf, errlen, "open: carry_groups and carry_seconds must be 0 (the default) or more");
    return RN_EINVAL;
  }
  if (opts && (opts->write_back < -1 || opts->write_back > 1)) {
    if (errbuf)
      snprintf(errbuf, errlen, "open: write_back is 1 (on), -1 (off) or 0 (as RUNNEL_WRITE_BACK says), not %d",
               opts->write_back);
    return RN_EINVAL;
  }
  if (opts && opts->carry_page_share < -1) {
    if (errbuf)
      snprintf(errbuf, errlen, "open: carry_page_share is N > 0, -1 (off) or 0 (as RUNNEL_CARRY_PAGE_SHARE says), "
               "not %d", opts->carry_page_share);
    return RN_EINVAL;
  }
  rn_pipeline *p = calloc(1, sizeof *p);
  if (!p) {
    if (errbuf) snprintf(errbuf, errlen, "out of memory");
    return RN_ENOMEM;
  }
  bool zones = rn_zone_init(&p->scratch, 256 * 1024); /* a fan-out fits in one chunk: no malloc per change */
  zones = rn_zone_init(&p->group_zone, 65536) && zones;
  zones = rn_zone_init(&p->carry_zone, 256 * 1024) && zones;
  msgpack_sbuffer_init(&p->keybuf);
  msgpack_sbuffer_init(&p->rowbuf);
  msgpack_sbuffer_init(&p->valbuf);
  msgpack_sbuffer_init(&p->getbuf);
  int rc = !zones ? rn_err_set(&p->err, RN_ENOMEM, "out of memory")
                  : rn_store_open(&p->store, opts ? opts->path : NULL, opts && opts->nosync,
                                  opts && opts->writemap, opts ? opts->map_size : 0, opts ? opts->max_readers : 0,
                                  &p->err);
  if (!rc) p->store.before_remap = rn_cursors_remapped, p->store.remap_ctx = p;
  if (!rc && write_back_on(opts) && !(p->store.wb = rn_wb_new())) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (!rc) rc = rn_upgrade_state(&p->store, &p->err); /* a state of an older build (upgrade.c) */
  if (!rc) rc = read_seq(p);
  if (rc) {
    if (errbuf) snprintf(errbuf, errlen, "%s", p->err.msg);
    rn_pipeline_close(p);
    return rc;
  }
  p->durable_seq = p->seq;
  p->unsynced = true; /* with nosync, a crashed writer's commits may be in the page cache only */
  if (opts) p->note_fn = opts->notes, p->note_ctx = opts->notes_ctx;
  p->carry = opts && opts->nosync;
  p->carry_groups = opts && opts->carry_groups > 0 ? (uint32_t)opts->carry_groups : RN_CARRY_GROUPS;
  p->carry_changes = opts && opts->carry_changes > 0 ? opts->carry_changes : RN_CARRY_CHANGES;
  p->carry_seconds = opts && opts->carry_seconds > 0 ? opts->carry_seconds : RN_CARRY_SECONDS;
  const char *share = getenv("RUNNEL_CARRY_PAGE_SHARE");
  int opt_share = opts ? opts->carry_page_share : 0;
  p->carry_page_share = opt_share > 0 ? (unsigned)opt_share : opt_share < 0 ? 0
                      : share ? (unsigned)strtoul(share, NULL, 10) : RN_CARRY_PAGE_SHARE;
  *out = p;
  return 0;
}

static void free_pipeline(rn_pipeline *p);
static int forget_pipeline(rn_pipeline *p);

/* Whether p was opened by the process this forked from (rn_store_forked),
 * or its LMDB lost its map (store.h's unmapped): either way its close may
 * not touch LMDB, and forgets it. */
static bool forked_child(const rn_pipeline *p)
{
  return p->store.env && (p->store.pid != getpid() || p->store.unmapped);
}

/* rn_pipeline_close_report; *closed says whether p is gone. */
static int close_pipeline(rn_pipeline *p, char *errbuf, size_t errlen, bool *closed)
{
  *closed = false;
  if (!p) return 0;
  /* Inside a callback the core's frames below it still use the pipeline:
   * freeing it now would have them return into freed memory. */
  if (p->state == RN_APPLYING || p->state == RN_COMMITTING || p->held) {
    rn_err_set(&p->err, RN_EMISUSE, "close: not from inside a callback");
    if (errbuf && errlen) snprintf(errbuf, errlen, "%s", p->err.msg);
    return RN_EMISUSE;
  }
  *closed = true;
  if (forked_child(p)) return forget_pipeline(p);
  if (p->state == RN_OPEN) rn_rollback(p);
  uint64_t seq = p->seq, durable = p->seq - p->carried; /* LMDB's last group */
  int rc = rn_flush(p); /* carried groups are committed, as a close promises */
  if (rc && errbuf && errlen)
    snprintf(errbuf, errlen, "close: groups %llu to %llu, carried in LMDB's open transaction (sync = false), could not "
             "be committed and are lost; the state holds group %llu: %s", (unsigned long long)durable + 1,
             (unsigned long long)seq, (unsigned long long)durable, p->err.msg);
  if (!rc && (rc = rn_outbox_lost(p, &p->err)) && errbuf && errlen) snprintf(errbuf, errlen, "%s", p->err.msg);
  rn_err unsynced = { .code = RN_OK };
  int src = rn_outbox_close(p, &unsynced); /* the delivered marks, then the durable sinks go */
  if (!rc && src) {
    rc = src;
    if (errbuf && errlen) snprintf(errbuf, errlen, "%s", unsynced.msg);
  }
  free_pipeline(p);
  return rc;
}

/* A pipeline a forked child inherited (rn_store_forked): its close, or its
 * collection by Lua, commits nothing (the carried groups and the open group
 * are the parent's), rolls nothing back, writes no delivered marks and
 * delivers nothing (the durable sinks' files and databases are the
 * parent's: their memory is left to the child's exit), and leaves a
 * temporary state's directory to the parent (rn_store_close). */
static int forget_pipeline(rn_pipeline *p)
{
  p->outbox = NULL;
  free_pipeline(p);
  return 0;
}

/* What a close frees once the groups are settled. */
static void free_pipeline(rn_pipeline *p)
{
  rn_cursors_end_all(p);
  rn_read_cursors_orphan(p);
  for (int i = 0; i < p->nsinks; i++) {
    if (p->sinks[i]->free_ctx) p->sinks[i]->free_ctx(p->sinks[i]->ctx);
    free(p->sinks[i]->told);
    free(p->sinks[i]);
  }
  free(p->sinks);
  rn_durable_free(p);
  rn_evolve_free(p);
  for (int i = p->nrels - 1; i >= 0; i--) rn_rel_free(p->rels[i]);
  free(p->rels);
  free(p->replay.items);
  rn_attach_orphan_all(p);
  if (p->store.env) rn_store_close(&p->store);
  rn_zone_destroy(&p->scratch);
  rn_zone_destroy(&p->group_zone);
  rn_zone_destroy(&p->carry_zone);
  msgpack_sbuffer_destroy(&p->keybuf);
  msgpack_sbuffer_destroy(&p->rowbuf);
  msgpack_sbuffer_destroy(&p->valbuf);
  msgpack_sbuffer_destroy(&p->getbuf);
  rn_free_fn on_close = p->on_close;
  void *ctx = p->binding;
  free(p);
  if (on_close) on_close(ctx);
}

RN_API int rn_pipeline_close_report(rn_pipeline *p, char *errbuf, size_t errlen)
{
  bool closed;
  return close_pipeline(p, errbuf, errlen, &closed);
}

RN_API int rn_pipeline_close(rn_pipeline *p)
{
  bool closed;
  int rc = close_pipeline(p, NULL, 0, &closed);
  return closed ? 0 : rc; /* closed: its callers must not close it again */
}

RN_API const char *rn_errmsg(const rn_pipeline *p)
{
  if (!p) return "no pipeline (NULL): rn_pipeline_open failed or was not called";
  return p->err.code ? p->err.msg : "";
}

RN_API uint64_t rn_seq(const rn_pipeline *p)
{
  return p ? p->seq : 0;
}
