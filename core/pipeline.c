/* pipeline.c — opening and closing a pipeline. */
#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void read_seq(rn_pipeline *p)
{
  MDB_txn *txn;
  if (mdb_txn_begin(p->store.env, NULL, MDB_RDONLY, &txn)) return;
  MDB_val k = { 3, (void *)"seq" }, v;
  if (mdb_get(txn, p->store.meta, &k, &v) == 0 && v.mv_size == 8) memcpy(&p->seq, v.mv_data, 8);
  mdb_txn_abort(txn);
}

RN_API int rn_pipeline_open(const rn_open_opts *opts, rn_pipeline **out, char *errbuf, size_t errlen)
{
  *out = NULL;
  if (opts && (opts->carry_groups < 0 || !(opts->carry_seconds >= 0))) {
    if (errbuf) snprintf(errbuf, errlen, "open: carry_groups and carry_seconds must be 0 (the default) or more");
    return RN_EINVAL;
  }
  rn_pipeline *p = calloc(1, sizeof *p);
  if (!p) {
    if (errbuf) snprintf(errbuf, errlen, "out of memory");
    return RN_ENOMEM;
  }
  bool zones = msgpack_zone_init(&p->scratch, 256 * 1024); /* a fan-out fits in one chunk: no malloc per change */
  zones = msgpack_zone_init(&p->group_zone, 65536) && zones;
  zones = msgpack_zone_init(&p->carry_zone, 256 * 1024) && zones;
  msgpack_sbuffer_init(&p->keybuf);
  msgpack_sbuffer_init(&p->rowbuf);
  msgpack_sbuffer_init(&p->valbuf);
  int rc = !zones ? rn_err_set(&p->err, RN_ENOMEM, "out of memory")
                  : rn_store_open(&p->store, opts ? opts->path : NULL, opts && opts->nosync,
                                  opts && opts->writemap, opts ? opts->map_size : 0, &p->err);
  if (rc) {
    if (errbuf) snprintf(errbuf, errlen, "%s", p->err.msg);
    rn_pipeline_close(p);
    return rc;
  }
  read_seq(p);
  p->carry = opts && opts->nosync;
  p->carry_groups = opts && opts->carry_groups > 0 ? (uint32_t)opts->carry_groups : RN_CARRY_GROUPS;
  p->carry_changes = opts && opts->carry_changes > 0 ? opts->carry_changes : RN_CARRY_CHANGES;
  p->carry_seconds = opts && opts->carry_seconds > 0 ? opts->carry_seconds : RN_CARRY_SECONDS;
  *out = p;
  return 0;
}

/* A zone whose msgpack_zone_init failed has no chunk list to destroy. */
static void destroy_zone(msgpack_zone *z)
{
  if (z->chunk_list.head) msgpack_zone_destroy(z);
}

RN_API void rn_pipeline_close(rn_pipeline *p)
{
  if (!p) return;
  if (p->state == RN_OPEN) rn_rollback(p);
  rn_flush(p); /* carried groups are committed, as a close promises */
  rn_cursors_end_all(p);
  for (int i = 0; i < p->nsinks; i++) {
    if (p->sinks[i]->free_ctx) p->sinks[i]->free_ctx(p->sinks[i]->ctx);
    free(p->sinks[i]);
  }
  free(p->sinks);
  for (int i = p->nrels - 1; i >= 0; i--) rn_rel_free(p->rels[i]);
  free(p->rels);
  free(p->replay.items);
  if (p->store.env) rn_store_close(&p->store);
  destroy_zone(&p->scratch);
  destroy_zone(&p->group_zone);
  destroy_zone(&p->carry_zone);
  msgpack_sbuffer_destroy(&p->keybuf);
  msgpack_sbuffer_destroy(&p->rowbuf);
  msgpack_sbuffer_destroy(&p->valbuf);
  rn_free_fn on_close = p->on_close;
  void *ctx = p->binding;
  free(p);
  if (on_close) on_close(ctx);
}

RN_API const char *rn_errmsg(const rn_pipeline *p)
{
  return p->err.code ? p->err.msg : "";
}

RN_API uint64_t rn_seq(const rn_pipeline *p)
{
  return p->seq;
}
