/* evolve_log.c — what a rebuild changed, told to the sinks (evolve_log.h).
 *
 * A stateful relation rebuilt at declaration (evolve.h: its function or
 * declaration changed, or an input's did) may come out with other rows than
 * its sinks were told of. The rebuild compares its rows before and after,
 * by row id (ids of rows whose key stays are kept), and keeps the
 * difference in the state, in the rebuilding transaction:
 *
 *     "rb:" name    |u64 id BE| -> |u8 has|u32 told_len|told row|now row|
 *                   has: 1 the sinks were told of a row (told), 2 the
 *                   relation holds one now (now); an entry whose two rows
 *                   are equal is not kept
 *
 * The first group after it hands each entry to the relation's log before
 * the group's own changes, as the change a sink would have seen (told only:
 * DELETE; now only: INSERT; both: UPDATE from told to now), so every sink
 * and cdc of it gets them through the normal path — durable sinks through
 * the outbox — in that group, under its seq. The group empties the
 * database (save_counters); a group rolled back leaves it for the next.
 * A filter or map whose own function changed (derive.c, rn_derive_tell_old)
 * keeps its changes the same way: its rows before are its old function
 * over its input's rows as their sinks were told, after its new one over
 * them now. While they are told, the changes of its input do not pass
 * through it (relation.c, rn_emit): its own say what both did.
 * Invariants:
 * (1) A second rebuild before any group keeps the told rows of the first:
 *     the sinks still hold them.
 * (2) A state whose catalogue entry changed (created) cannot read the old
 *     rows in the new layout: nothing is told, and a database left from
 *     before is dropped. */
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "evolve_log.h"
#include "buf.h"
#include "derive.h"
#include "key.h"
#include "ops.h"
#include "scan.h"

enum { TOLD = 1, NOW = 2 };

static int fail(rn_rel *r, int rc)
{
  return rn_store_fail(&r->p->err, rc, r->name);
}

/* Puts |has|told_len|told|now| under id. */
static int put_entry(rn_rel *r, uint64_t id, int has, const char *told, size_t told_len, const char *now,
                     size_t now_len)
{
  size_t len = 5 + told_len + now_len;
  char kb[8], *v = malloc(len);
  if (!v) return rn_err_set(&r->p->err, RN_ENOMEM, "out of memory");
  uint32_t tl = (uint32_t)told_len;
  v[0] = (char)has;
  memcpy(v + 1, &tl, 4);
  if (told_len) memcpy(v + 5, told, told_len);
  if (now_len) memcpy(v + 5 + told_len, now, now_len);
  rn_be64_put(kb, id);
  MDB_val k = { 8, kb }, val = { len, v };
  int rc = mdb_put(r->p->store.wtxn, r->rebuilt_dbi, &k, &val, 0);
  free(v);
  return rc ? fail(r, rc) : 0;
}

static bool entry_parse(const MDB_val *v, int *has, const char **told, size_t *told_len, const char **now,
                        size_t *now_len)
{
  if (v->mv_size < 5) return false;
  uint32_t tl;
  memcpy(&tl, (const char *)v->mv_data + 1, 4);
  if (tl > v->mv_size - 5) return false;
  *has = ((const unsigned char *)v->mv_data)[0];
  *told = (const char *)v->mv_data + 5;
  *told_len = tl;
  *now = *told + tl;
  *now_len = v->mv_size - 5 - tl;
  return true;
}

static int get_entry(rn_rel *r, uint64_t id, MDB_val *v)
{
  char kb[8];
  rn_be64_put(kb, id);
  MDB_val k = { 8, kb };
  return mdb_get(r->p->store.wtxn, r->rebuilt_dbi, &k, v);
}

/* Before the rebuild: every row sinks were told of, unless an entry left
 * from an earlier rebuild says what they were told (1). */
static int told_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  rn_rel *r = ctx;
  MDB_val v;
  int rc = get_entry(r, id, &v);
  if (rc == 0) return 0;
  if (rc != MDB_NOTFOUND) return fail(r, rc);
  return put_entry(r, id, TOLD, row, len, NULL, 0);
}

/* One entry of r's "rb:" database, parsed, with the cursor standing on it. */
typedef struct entry_at {
  MDB_cursor *cur;
  MDB_val k, v;
  int has;
  const char *told, *now;
  size_t told_len, now_len;
} entry_at;

/* fn(r, e, ctx) for every entry, in key order; fn may rewrite or delete
 * the entry under the cursor, and returns 0 or an LMDB or errno code. */
static int each_entry(rn_rel *r, int (*fn)(rn_rel *r, entry_at *e, void *ctx), void *ctx)
{
  entry_at e;
  int rc = mdb_cursor_open(r->p->store.wtxn, r->rebuilt_dbi, &e.cur);
  if (rc) return fail(r, rc);
  for (rc = mdb_cursor_get(e.cur, &e.k, &e.v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(e.cur, &e.k, &e.v, MDB_NEXT)) {
    if (!entry_parse(&e.v, &e.has, &e.told, &e.told_len, &e.now, &e.now_len)) { rc = MDB_CORRUPTED; break; }
    if ((rc = fn(r, &e, ctx))) break;
  }
  mdb_cursor_close(e.cur);
  return rc == MDB_NOTFOUND ? 0 : fail(r, rc);
}

/* An entry left from an earlier rebuild forgets what it held now. */
static int forget_now_of(rn_rel *r, entry_at *e, void *ctx)
{
  (void)r, (void)ctx;
  if (!(e->has & NOW)) return 0;
  if (e->k.mv_size != 8) return MDB_CORRUPTED;
  char *copy = malloc(5 + e->told_len); /* LMDB's bytes are read-only: a copy is written back */
  if (!copy) return ENOMEM;
  memcpy(copy, e->v.mv_data, 5 + e->told_len);
  copy[0] = (char)(e->has & TOLD);
  MDB_val nv = { 5 + e->told_len, copy };
  char kb[8]; /* the key's bytes move within the page as the entry shrinks */
  memcpy(kb, e->k.mv_data, 8);
  MDB_val key = { 8, kb };
  int rc = mdb_cursor_put(e->cur, &key, &nv, MDB_CURRENT);
  free(copy);
  return rc;
}

/* ---- a filter's or map's rows as its sinks were told (rn_derive_tell_old) ----
 * Its old function over its input's rows as the input's sinks were told:
 * an input whose own changes are still to tell (a rebuild, or a filter or
 * map whose function changed) was told its rows before them; those
 * changes are not passed through r when told (relation.c, rn_emit): r's
 * own tell the difference whole. */

static bool is_derived(const rn_rel *r)
{
  return r->input && (r->kind == RN_REL_FILTER || r->kind == RN_REL_MAP);
}

typedef struct told_scan {
  rn_rel *r;          /* the relation scanned */
  rn_scan_fn fn;
  void *ctx;
} told_scan;

static int scan_as_told(rn_rel *r, rn_scan_fn fn, void *ctx);

/* Through r's function (derive_told's step). */
static int derive_one_told(void *ctx, uint64_t id, const char *row, size_t len)
{
  told_scan *s = ctx;
  const char *out;
  size_t out_len;
  int rc = rn_derive_row(s->r, row, len, &out, &out_len);
  return rc || !out ? rc : s->fn(s->ctx, id, out, out_len);
}

static int derive_told(rn_rel *r, rn_scan_fn fn, void *ctx)
{
  told_scan s = { r, fn, ctx };
  return scan_as_told(r->input, derive_one_told, &s);
}

/* A row of r now, or the one its sinks were told when an entry says. */
static int overlay_one(void *ctx, uint64_t id, const char *row, size_t len)
{
  told_scan *s = ctx;
  MDB_val v;
  int rc = get_entry(s->r, id, &v);
  if (rc == MDB_NOTFOUND) return s->fn(s->ctx, id, row, len);
  if (rc) return fail(s->r, rc);
  return 0; /* given from its entry (overlay_entry) */
}

static int overlay_entry(rn_rel *r, entry_at *e, void *ctx)
{
  (void)r;
  told_scan *s = ctx;
  if (!(e->has & TOLD)) return 0;
  if (e->k.mv_size != 8) return MDB_CORRUPTED;
  int rc = s->fn(s->ctx, rn_be64_get(e->k.mv_data), e->told, e->told_len);
  return rc ? rc : 0;
}

static int scan_as_told(rn_rel *r, rn_scan_fn fn, void *ctx)
{
  if (r->rebuilt_pending && r->rebuilt_open) {
    told_scan s = { r, fn, ctx };
    int rc = rn_rel_scan(r, overlay_one, &s);
    return rc ? rc : each_entry(r, overlay_entry, &s);
  }
  if (is_derived(r)) return derive_told(r, fn, ctx);
  return rn_rel_scan(r, fn, ctx);
}

int rn_rebuild_before(rn_rel *r)
{
  if (!r->rebuild_tells || !r->tablelike) return 0;
  int rc = rn_state_dbi(r->p, r->p->store.wtxn, RN_DB_REBUILT, r->name, 0, &r->rebuilt_dbi);
  if (rc) return rc;
  r->rebuilt_open = true;
  if ((rc = each_entry(r, forget_now_of, NULL))) return rc;
  if (is_derived(r)) return derive_told(r, told_row, r); /* its function is the old one now */
  return rn_rel_scan(r, told_row, r);
}

int rn_rebuild_untold(rn_rel *r)
{
  rn_err_clear(&r->p->err);
  r->rebuild_tells = false;
  int rc = r->rebuilt_open ? mdb_drop(r->p->store.wtxn, r->rebuilt_dbi, 0) : 0;
  r->rebuilt_pending = false;
  return rc ? fail(r, rc) : 0;
}

static int now_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  rn_rel *r = ctx;
  MDB_val v;
  int rc = get_entry(r, id, &v);
  if (rc == MDB_NOTFOUND) return put_entry(r, id, NOW, NULL, 0, row, len);
  if (rc) return fail(r, rc);
  int has;
  const char *told, *now;
  size_t told_len, now_len;
  if (!entry_parse(&v, &has, &told, &told_len, &now, &now_len)) return fail(r, MDB_CORRUPTED);
  char *copy = malloc(told_len ? told_len : 1); /* LMDB's bytes move with the put */
  if (!copy) return rn_err_set(&r->p->err, RN_ENOMEM, "out of memory");
  memcpy(copy, told, told_len);
  rc = put_entry(r, id, (has & TOLD) | NOW, copy, told_len, row, len);
  free(copy);
  return rc;
}

/* Removes an entry whose told and now rows are the same; *left (ctx):
 * some stay. */
static int drop_equal_of(rn_rel *r, entry_at *e, void *left)
{
  (void)r;
  bool same = e->has == 0 ||
              (e->has == (TOLD | NOW) && e->told_len == e->now_len && memcmp(e->told, e->now, e->now_len) == 0);
  if (!same) { *(bool *)left = true; return 0; }
  return mdb_cursor_del(e->cur, 0);
}

int rn_rebuild_after(rn_rel *r)
{
  if (!r->rebuild_tells || !r->tablelike) return 0;
  int rc = rn_rel_scan(r, now_row, r);
  bool left = false;
  if (!rc) rc = each_entry(r, drop_equal_of, &left);
  if (!rc) r->rebuilt_pending = left;
  if (left) r->p->rebuilt_any = true;
  return rc;
}

int rn_rebuild_opened(rn_rel *r, MDB_txn *txn, bool created)
{
  if (!r->tablelike || r->rebuilt_open) return 0;
  char name[RN_NAME_MAX + 8];
  snprintf(name, sizeof name, "%s%s", RN_DB_REBUILT, r->name);
  int rc = mdb_dbi_open(txn, name, 0, &r->rebuilt_dbi);
  if (rc == MDB_NOTFOUND) return 0; /* no rebuild left anything to tell */
  if (!rc) rc = mdb_set_compare(txn, r->rebuilt_dbi, rn_store_key_cmp);
  if (!rc && created) return (rc = mdb_drop(txn, r->rebuilt_dbi, 1)) ? fail(r, rc) : 0; /* (2) */
  MDB_stat st;
  if (!rc) rc = mdb_stat(txn, r->rebuilt_dbi, &st);
  if (rc) return fail(r, rc);
  r->rebuilt_open = true;
  r->rebuilt_pending = st.ms_entries > 0; /* a rebuild no group told of yet */
  if (r->rebuilt_pending) r->p->rebuilt_any = true;
  return 0;
}

/* Appends r's entries to its log, in id order. */
static int tell_one(rn_pipeline *p, rn_rel *r)
{
  MDB_cursor *cur;
  int rc = mdb_cursor_open(p->store.wtxn, r->rebuilt_dbi, &cur);
  if (rc) return fail(r, rc);
  MDB_val k, v;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    int has;
    const char *told, *now;
    size_t told_len, now_len;
    if (k.mv_size != 8 || !entry_parse(&v, &has, &told, &told_len, &now, &now_len)) { rc = MDB_CORRUPTED; break; }
    rn_change c = { has == TOLD ? RN_DELETE : has == NOW ? RN_INSERT : RN_UPDATE, rn_be64_get(k.mv_data),
                    (has & NOW) ? now : NULL, (has & NOW) ? now_len : 0,
                    (has & TOLD) ? told : NULL, (has & TOLD) ? told_len : 0 };
    p->telling = true;
    rn_gstate state = p->state;
    p->state = RN_APPLYING; /* a filter or map over r runs its function */
    int lrc = 0;
    if (c.verb == RN_UPDATE && rn_key_moved(r, told, told_len, now, now_len)) { /* a keyed map's new function */
      rn_change gone = { RN_DELETE, c.id, NULL, 0, told, told_len };
      lrc = rn_emit(r, &gone);
      c.verb = RN_INSERT, c.old = NULL, c.old_len = 0;
    }
    if (!lrc) lrc = rn_emit(r, &c);
    p->state = state;
    p->telling = false;
    msgpack_zone_clear(&p->scratch);
    if (lrc) { mdb_cursor_close(cur); return lrc; }
  }
  mdb_cursor_close(cur);
  return rc == MDB_NOTFOUND ? 0 : fail(r, rc);
}

/* The telling runs in a scratch zone of its own (tell_one clears it after
 * each change): the group may be opened by a change whose row is already
 * in p->scratch (rn_change_enter of a change outside begin/commit, or one
 * retried after a regrow), and clearing that zone under it read the row
 * from reused memory. */
int rn_rebuild_tell(rn_pipeline *p)
{
  if (!p->rebuilt_any) return 0;
  bool any = false;
  for (int i = 0; i < p->nrels && !any; i++) any = p->rels[i]->rebuilt_pending;
  if (!any) return 0;
  msgpack_zone held = p->scratch;
  if (!rn_zone_init(&p->scratch, 64 * 1024)) {
    p->scratch = held;
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  int rc = 0;
  for (int i = 0; !rc && i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    if (r->rebuilt_pending) rc = tell_one(p, r);
  }
  rn_zone_destroy(&p->scratch);
  p->scratch = held;
  return rc;
}

int rn_rebuild_told(rn_pipeline *p, MDB_txn *txn)
{
  if (!p->rebuilt_any) return 0;
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    if (!r->rebuilt_pending && !r->rebuilt_unflushed) continue;
    int rc = mdb_drop(txn, r->rebuilt_dbi, 0);
    if (rc) return fail(r, rc);
  }
  return 0;
}

void rn_rebuild_committed(rn_pipeline *p)
{
  if (!p->rebuilt_any) return;
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    if (r->rebuilt_pending) r->rebuilt_unflushed = true; /* a carried group replayed empties it again */
    r->rebuilt_pending = false;
  }
}

void rn_rebuild_flushed(rn_pipeline *p)
{
  if (!p->rebuilt_any) return;
  bool any = false;
  for (int i = 0; i < p->nrels; i++) {
    p->rels[i]->rebuilt_unflushed = false;
    any |= p->rels[i]->rebuilt_pending;
  }
  p->rebuilt_any = any; /* the groups after it skip the three loops */
}
