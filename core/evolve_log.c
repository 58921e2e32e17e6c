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
 * them now; a map whose columns changed, its function or not, makes them
 * in the columns it had and gives them in the new ones (rn_rebuild_capture_told,
 * (2)). While they are told, the changes of its input do not pass
 * through it (relation.c, rn_emit): its own say what both did.
 * Invariants:
 * (1) A second rebuild before any group keeps the told rows of the first:
 *     the sinks still hold them.
 * (2) A state whose catalogue entry changed (created) cannot read the old
 *     rows in the new layout: they are read before the entry is replaced,
 *     in the old one, and given in the new columns (rn_rebuild_capture,
 *     which gives an earlier rebuild's told rows so too); when they cannot
 *     be, nothing is told, a database left from before is dropped, and a
 *     note names the relation.
 * (3) A join's old rows are made from its right table's rows, which that
 *     table rewrote in its new columns when it was declared, before the
 *     join: its reader reads them back in the columns the join was declared
 *     with (read_right_as_declared). A column dropped there is gone: an old
 *     column that held its values and that a new one continues cannot be
 *     told (right_value_kept); nor can a column whose type changed. */
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "evolve_log.h"
#include "buf.h"
#include "derive.h"
#include "evolve.h"
#include "join.h"
#include "key.h"
#include "ops.h"
#include "reader.h"
#include "row.h"
#include "scan.h"

enum { TOLD = 1, NOW = 2 };

static int fail(rn_rel *r, int rc)
{
  return rn_store_fail(&r->p->err, rc, r->name);
}

/* Puts |has|told_len|told|now| under id, in txn. */
static int put_entry_in(rn_rel *r, MDB_txn *txn, uint64_t id, int has, const char *told, size_t told_len,
                        const char *now, size_t now_len)
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
  int rc = mdb_put(txn, r->rebuilt_dbi, &k, &val, 0);
  free(v);
  return rc ? fail(r, rc) : 0;
}

/* put_entry_in the writer's transaction. */
static int put_entry(rn_rel *r, uint64_t id, int has, const char *told, size_t told_len, const char *now,
                     size_t now_len)
{
  return put_entry_in(r, r->p->store.wtxn, id, has, told, told_len, now, now_len);
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

/* Whether rc is an LMDB or errno code (to name as r's store failing), not
 * one a callback returned with r's error set (an RN_E… code) or MISFIT. */
static bool store_code(int rc)
{
  return rc > 0 || (rc >= MDB_KEYEXIST && rc <= MDB_LAST_ERRCODE);
}

/* fn(r, e, ctx) for every entry, in key order; fn may rewrite or delete
 * the entry under the cursor, and returns 0, an LMDB or errno code, or
 * the code of a scan callback (overlay_entry: a filter's function that
 * failed, a row that does not fit), returned as it is. */
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
  if (rc == MDB_NOTFOUND) return 0;
  return store_code(rc) ? fail(r, rc) : rc; /* wrapped again, its message said "Unknown error -30006" */
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

static int scan_as_told(rn_rel *r, rn_scan_fn fn, void *ctx, bool for_map);

/* Through r's function (derive_told's step). */
static int derive_one_told(void *ctx, uint64_t id, const char *row, size_t len)
{
  told_scan *s = ctx;
  const char *out;
  size_t out_len;
  int rc = rn_derive_row(s->r, row, len, &out, &out_len);
  return rc || !out ? rc : s->fn(s->ctx, id, out, out_len);
}

/* for_map: a map is over r, through filters and maps (scan_as_told). */
static int derive_told(rn_rel *r, rn_scan_fn fn, void *ctx, bool for_map)
{
  told_scan s = { r, fn, ctx };
  return scan_as_told(r->input, derive_one_told, &s, for_map || r->kind == RN_REL_MAP);
}

/* A table's rows without the columns its declaration added in this run
 * (r->added_slots): as a map over it saw them when it made the rows its
 * sinks were told. Its rows as they are hold them (a note gives their
 * values: no change of its rows), but no note gives what a map's function
 * makes of them: they are told as the change they make (0.22). */
/* What a scan that packs each row again needs: a row's values, its zone
 * and the packed row. */
typedef struct repack {
  msgpack_zone z;
  msgpack_sbuffer out;
  msgpack_object *vals;
} repack;

/* 0, or RN_ENOMEM (r's error set), nothing kept. */
static int repack_init(repack *k, rn_rel *r)
{
  k->vals = calloc((size_t)(r->schema->ncols ? r->schema->ncols : 1), sizeof *k->vals);
  if (!k->vals || !rn_zone_init(&k->z, 4096)) {
    free(k->vals);
    return rn_err_set(&r->p->err, RN_ENOMEM, "out of memory");
  }
  msgpack_sbuffer_init(&k->out);
  return 0;
}

static void repack_free(repack *k)
{
  msgpack_sbuffer_destroy(&k->out);
  rn_zone_destroy(&k->z);
  free(k->vals);
}

typedef struct without_added {
  rn_rel *t;
  rn_scan_fn fn;
  void *ctx;
  repack k;
} without_added;

static int without_added_one(void *ctx, uint64_t id, const char *row, size_t len)
{
  without_added *w = ctx;
  int n = w->t->schema->ncols;
  const msgpack_object *v = rn_row_unpack(row, len, n, &w->k.z);
  if (!v) { msgpack_zone_clear(&w->k.z); return fail(w->t, MDB_CORRUPTED); }
  memcpy(w->k.vals, v, sizeof *v * (size_t)n);
  for (int i = 0; i < w->t->nadded; i++) w->k.vals[w->t->added_slots[i]].type = MSGPACK_OBJECT_NIL;
  w->k.out.size = 0;
  rn_row_pack(w->t->schema, w->k.vals, &w->k.out);
  msgpack_zone_clear(&w->k.z);
  return w->fn(w->ctx, id, w->k.out.data, w->k.out.size);
}

static int scan_without_added(rn_rel *t, rn_scan_fn fn, void *ctx)
{
  without_added w = { .t = t, .fn = fn, .ctx = ctx };
  int rc = repack_init(&w.k, t);
  if (rc) return rc;
  rc = rn_rel_scan(t, without_added_one, &w);
  repack_free(&w.k);
  return rc;
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

static const rn_rel *table_under(const rn_rel *r);

/* r's rows now where no entry says otherwise, the entries' told rows
 * where one does (a filter's or map's changes waiting to be told). A map
 * over filter r (for_map) was told them without the columns the table
 * under r gained in this run: they are left out (as nothing), as
 * scan_without_added leaves them out of the table's. */
static int scan_overlay(rn_rel *r, rn_scan_fn fn, void *ctx, bool for_map)
{
  rn_rel *t = for_map && r->kind == RN_REL_FILTER ? (rn_rel *)table_under(r) : NULL;
  if (!t || !t->nadded || t->schema->ncols != r->schema->ncols) {
    told_scan s = { r, fn, ctx };
    int rc = rn_rel_scan(r, overlay_one, &s);
    return rc ? rc : each_entry(r, overlay_entry, &s);
  }
  without_added w = { .t = t, .fn = fn, .ctx = ctx };
  int rc = repack_init(&w.k, t);
  if (rc) return rc;
  told_scan s = { r, without_added_one, &w };
  rc = rn_rel_scan(r, overlay_one, &s);
  if (!rc) rc = each_entry(r, overlay_entry, &s);
  repack_free(&w.k);
  return rc;
}

static int scan_dropped(rn_rel *t, rn_scan_fn fn, void *ctx);

static int scan_as_told(rn_rel *r, rn_scan_fn fn, void *ctx, bool for_map)
{
  if (r->kind == RN_REL_TABLE && r->dropped_open) return scan_dropped(r, fn, ctx); /* what its sinks hold */
  if (r->rebuilt_pending && r->rebuilt_open) return scan_overlay(r, fn, ctx, for_map);
  if (is_derived(r)) return derive_told(r, fn, ctx, for_map);
  if (for_map && r->nadded) return scan_without_added(r, fn, ctx);
  return rn_rel_scan(r, fn, ctx);
}

int rn_rebuild_before(rn_rel *r)
{
  if (!r->rebuild_tells || !r->tablelike) return 0;
  if (r->rebuild_captured) return 0; /* read in the layout the state held them in (rn_rebuild_capture) */
  int rc = rn_state_dbi(r->p, r->p->store.wtxn, RN_DB_REBUILT, r->name, 0, &r->rebuilt_dbi);
  if (rc) return rc;
  r->rebuilt_open = true;
  if ((rc = each_entry(r, forget_now_of, NULL))) return rc;
  if (is_derived(r)) { /* its function may be the old one now; a column its rows lack takes its default, else
                        * null (RN_ROW_AS_TOLD) */
    r->told_rows = true;
    rc = derive_told(r, told_row, r, false);
    r->told_rows = false;
    return rc;
  }
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

/* A captured told row that lacks columns (r->rebuild_fill) takes them from
 * the row r holds now under its id: they were not there to change. */
typedef struct filling {
  rn_rel *r;
  repack k;
} filling;

static int now_row_filling(void *ctx, uint64_t id, const char *row, size_t len)
{
  filling *f = ctx;
  rn_rel *r = f->r;
  MDB_val v;
  int rc = get_entry(r, id, &v), has;
  if (rc == MDB_NOTFOUND) return put_entry(r, id, NOW, NULL, 0, row, len);
  if (rc) return fail(r, rc);
  const char *told, *now;
  size_t told_len, now_len;
  if (!entry_parse(&v, &has, &told, &told_len, &now, &now_len)) return fail(r, MDB_CORRUPTED);
  if (!(has & TOLD)) return now_row(r, id, row, len);
  int n = r->schema->ncols;
  const msgpack_object *tv = rn_row_unpack(told, told_len, n, &f->k.z), *nv = rn_row_unpack(row, len, n, &f->k.z);
  if (!tv || !nv) { msgpack_zone_clear(&f->k.z); return fail(r, MDB_CORRUPTED); }
  memcpy(f->k.vals, tv, sizeof *f->k.vals * (size_t)n);
  for (int i = 0; i < r->nfill; i++) f->k.vals[r->rebuild_fill[i]] = nv[r->rebuild_fill[i]];
  f->k.out.size = 0;
  rn_row_pack(r->schema, f->k.vals, &f->k.out); /* a copy: LMDB's bytes move with the put */
  rc = put_entry(r, id, TOLD | NOW, f->k.out.data, f->k.out.size, row, len);
  msgpack_zone_clear(&f->k.z);
  return rc;
}

static int scan_now(rn_rel *r)
{
  if (!r->nfill) return rn_rel_scan(r, now_row, r);
  filling f = { .r = r };
  int rc = repack_init(&f.k, r);
  if (rc) return rc;
  rc = rn_rel_scan(r, now_row_filling, &f);
  repack_free(&f.k);
  return rc;
}

int rn_rebuild_after(rn_rel *r)
{
  if (!r->rebuild_tells || !r->tablelike) return 0;
  int rc = scan_now(r);
  r->rebuild_captured = false; /* compared */
  free(r->rebuild_fill);
  r->rebuild_fill = NULL;
  r->nfill = 0;
  bool left = false;
  if (!rc) rc = each_entry(r, drop_equal_of, &left);
  if (!rc) r->rebuilt_pending = left;
  if (left) r->p->rebuilt_any = true;
  return rc;
}

/* now_row for an id an entry holds. */
static int now_row_kept(void *ctx, uint64_t id, const char *row, size_t len)
{
  rn_rel *r = ctx;
  MDB_val v;
  int rc = get_entry(r, id, &v);
  if (rc == MDB_NOTFOUND) return 0;
  return rc ? fail(r, rc) : now_row(r, id, row, len);
}

/* The rows of r an entry does not name are its function over its input's
 * rows as their sinks were told (an input's own waiting changes, a top
 * rebuilt under it, do not pass through r while it tells its own:
 * relation.c, rn_emit), those it names are the entries' told rows (1):
 * rn_rebuild_before, with r's function as it is, then its rows now. Its
 * function changed in this run: what the sinks hold is the old one's,
 * which rn_derive_tell_old makes next against the entries as they are
 * (one without a told row, or whose rows are equal under the new
 * function, still says what the sinks hold: none is dropped); the rows
 * now of the ids they name are made for when it cannot. */
int rn_rebuild_now(rn_rel *r, bool fn_changed, bool *before_failed)
{
  *before_failed = false;
  if (r->kind != RN_REL_FILTER || !r->tablelike || !r->rebuilt_open || !r->rebuilt_pending) return 0;
  if (fn_changed) {
    int rc = each_entry(r, forget_now_of, NULL);
    return rc ? rc : rn_rel_scan(r, now_row_kept, r);
  }
  r->rebuild_tells = true;
  int rc = rn_rebuild_before(r);
  *before_failed = rc != 0;
  if (!rc) rc = rn_rebuild_after(r);
  r->rebuild_tells = false;
  return rc;
}

static int give_waiting(rn_rel *r, MDB_txn *txn);

int rn_rebuild_opened(rn_rel *r, MDB_txn *txn, bool created)
{
  if (!r->tablelike || r->rebuilt_open) return 0;
  char name[RN_NAME_MAX + 8];
  snprintf(name, sizeof name, "%s%s", RN_DB_REBUILT, r->name);
  int rc = rn_store_dbi_open(&r->p->store, txn, name, 0, &r->rebuilt_dbi);
  if (rc == MDB_NOTFOUND) return 0; /* no rebuild left anything to tell */
  if (!rc) rc = mdb_set_compare(txn, r->rebuilt_dbi, rn_store_key_cmp);
  if (!rc && created && !r->told_schema) return (rc = mdb_drop(txn, r->rebuilt_dbi, 1)) ? fail(r, rc) : 0; /* (2) */
  MDB_stat st;
  if (!rc) rc = mdb_stat(txn, r->rebuilt_dbi, &st);
  if (rc) return fail(r, rc);
  r->rebuilt_open = true;
  r->rebuilt_pending = st.ms_entries > 0; /* a rebuild no group told of yet */
  if (r->rebuilt_pending) r->p->rebuilt_any = true;
  rc = r->rebuilt_pending && r->kind == RN_REL_FILTER && r->decl_changed ? give_waiting(r, txn) : 0;
  rn_schema_free(r->waiting_schema);
  r->waiting_schema = NULL;
  return rc;
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
    if (!(has & (TOLD | NOW))) continue; /* a capture's: the sinks hold no row of it, nor does r */
    if (has == (TOLD | NOW) && told_len == now_len && memcmp(told, now, now_len) == 0) continue; /* kept by
                                                                         * rn_rebuild_now: no change */
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
  /* what each log holds now was told, through the relations over the
   * rebuilt ones too: a sink written from the rows the rebuilds made
   * takes what follows (rn_log_own) */
  for (int i = 0; !rc && i < p->nrels; i++) p->rels[i]->log_told = p->rels[i]->log.n;
  rn_zone_destroy(&p->scratch);
  p->scratch = held;
  return rc;
}

/* The rows of a table dropped before t was declared again (drop.c) are
 * forgotten in txn: the relations over it declared since made from them
 * what their sinks were told, and the group being sealed tells it. */
static int forget_dropped(rn_rel *t, MDB_txn *txn)
{
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)snprintf(key, sizeof key, "%s%s", RN_META_DROPPED_ENTRY, t->name), key };
  int rc = mdb_drop(txn, t->dropped_dbi, 0);
  if (!rc) rc = mdb_del(txn, t->p->store.meta, &k, NULL);
  return rc && rc != MDB_NOTFOUND ? fail(t, rc) : 0;
}

int rn_rebuild_told(rn_pipeline *p, MDB_txn *txn)
{
  if (!p->rebuilt_any) return 0;
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    if ((r->dropped_open || r->dropped_unflushed) && forget_dropped(r, txn)) return p->err.code;
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
    if (r->dropped_open) r->dropped_unflushed = true;
    r->dropped_open = false;
  }
}

void rn_rebuild_flushed(rn_pipeline *p)
{
  if (!p->rebuilt_any) return;
  bool any = false;
  for (int i = 0; i < p->nrels; i++) {
    p->rels[i]->rebuilt_unflushed = p->rels[i]->dropped_unflushed = false;
    any |= p->rels[i]->rebuilt_pending || p->rels[i]->dropped_open;
  }
  p->rebuilt_any = any; /* the groups after it skip the three loops */
}

/* ---- a rebuild whose columns changed (rn_rebuild_capture) ----
 * Its state is rebuilt as new, and the rows it holds are in the layout of
 * its old catalogue entry, which the new columns cannot read: they are
 * read as a reader of the state reads them (reader.h), before the entry is
 * replaced, and given in the new columns by name, as what its sinks were
 * told. */

enum { GIVE_COPY, GIVE_FLOAT, GIVE_NULL, GIVE_DEFAULT, GIVE_FILL };

typedef struct capture {
  rn_rel *r;
  const rn_schema *old;   /* the columns the state holds its rows in */
  rn_join_reader *jr;     /* r is a join: the reader of its state, or NULL */
  int *right_from;        /* its right table's columns changed: per right column as declared, its
                             column now, or -1 (dropped) (read_right_as_declared); else NULL */
  int *src;               /* per new slot: the old slot, or -1 */
  uint8_t *give;          /* per new slot: GIVE_… */
  msgpack_object *vals;
  msgpack_zone z;
  msgpack_sbuffer out;    /* the row given in the new columns */
  int rc;                 /* a write failed (r's error) */
  char why[1536];         /* its old rows cannot be told: why */
} capture;

static bool same_column_type(const rn_column *a, const rn_column *b)
{
  if (a->type != b->type) return false;
  if (a->type != RN_T_STRUCT) return true;
  if (!a->fields || !b->fields || a->fields->ncols != b->fields->ncols) return false;
  for (int i = 0; i < a->fields->ncols; i++) {
    const rn_column *x = &a->fields->cols[i], *y = &b->fields->cols[i];
    if (strcmp(x->name, y->name) != 0 || x->nullable != y->nullable || !same_column_type(x, y)) return false;
  }
  return true;
}

/* Whether r's columns are its input's (a rename of the input's column is
 * one of r's). */
static bool columns_of_input(const rn_rel *r)
{
  return r->kind == RN_REL_DISTINCT || r->kind == RN_REL_TOP || r->kind == RN_REL_INDEX || r->kind == RN_REL_FILTER;
}

/* The name column `name` of at had before a rename (was =, p:alter) of
 * at's own, or of the relation its columns are: its input's, through
 * distincts, tops, indexes and filters, or a join's left or right table's
 * (a join's column is its table's of the same name); NULL when none. */
static const char *renamed_from(const rn_rel *at, const char *name, int depth)
{
  if (!at || depth > 16) return NULL;
  const char *from = rn_evolve_renamed_from(at->p, at->name, name);
  if (from) return from;
  if (columns_of_input(at)) return renamed_from(at->input, name, depth + 1);
  if (at->kind != RN_REL_JOIN) return NULL;
  from = renamed_from(at->input, name, depth + 1);
  if (from && rn_schema_slot(at->input->schema, name, strlen(name)) >= 0) return from;
  from = at->right ? renamed_from(at->right, name, depth + 1) : NULL;
  return from && rn_schema_slot(at->right->schema, name, strlen(name)) >= 0 ? from : NULL;
}

/* The old slot new column name continues: the same name, else the column a
 * rename of r's, or of the relations its columns come from (renamed_from),
 * names it from, when the new columns no longer hold that name. */
static int old_slot(const rn_rel *r, const rn_schema *old, const char *name)
{
  int s = rn_schema_slot(old, name, strlen(name));
  if (s >= 0) return s;
  const char *from = renamed_from(r, name, 0);
  if (from && rn_schema_slot(r->schema, from, strlen(from)) < 0) s = rn_schema_slot(old, from, strlen(from));
  return s;
}

/* The slot of column name in side's columns old, the side's columns now,
 * following a rename (was =, p:alter) of side's; -1: a new column. */
static int side_slot(const rn_rel *side, const rn_schema *old, const char *name)
{
  int s = rn_schema_slot(old, name, strlen(name));
  const char *from = s < 0 ? rn_evolve_renamed_from(side->p, side->name, name) : NULL;
  if (from && rn_schema_slot(side->schema, from, strlen(from)) < 0) s = rn_schema_slot(old, from, strlen(from));
  return s;
}

/* The old slot a join's new column j, whose name its old columns lack,
 * continues by where both come from: the column of its left or right
 * table it holds, that table's rename followed ("name" to "label", or
 * "u.name" to "name" where the clash went), when neither the old nor the
 * new result is a Lua joiner's and its sides are the tables they were;
 * -1: a new one. An old column whose name the new columns hold is theirs. */
static int join_old_slot(const capture *c, int j)
{
  int i = -1;
  const rn_rel *r = c->r;
  int o = c->jr ? rn_join_origin(r, j) : -1;
  if (o < 0 || rn_join_reader_origin(c->jr, 0) < 0) return -1;
  const char *lname, *rname;
  const rn_schema *ol = rn_join_reader_side(c->jr, false, &lname), *orr = rn_join_reader_side(c->jr, true, &rname);
  if (strcmp(lname, r->input->name) != 0 || strcmp(rname, r->right->name) != 0) return -1;
  bool right = o >= r->input->schema->ncols;
  const rn_rel *side = right ? r->right : r->input;
  const rn_schema *ns = side->schema;
  int at = right ? o - r->input->schema->ncols : o;
  if (at >= ns->ncols) return -1;
  int os = side_slot(side, right ? orr : ol, ns->cols[at].name);
  if (os < 0) return -1;
  int want = right ? ol->ncols + os : os;
  for (i = 0; i < c->old->ncols && rn_join_reader_origin(c->jr, i) != want; i++) {}
  if (i == c->old->ncols) return -1;
  const char *was = c->old->cols[i].name;
  return rn_schema_slot(r->schema, was, strlen(was)) < 0 ? i : -1;
}

/* Whether old column s of a join holds values the state still has: not
 * those of a column its right table dropped (why). */
static bool right_value_kept(capture *c, int s)
{
  if (!c->right_from) return true;
  const char *rname;
  int nl = rn_join_reader_side(c->jr, false, NULL)->ncols, o = rn_join_reader_origin(c->jr, s);
  const rn_schema *rs = rn_join_reader_side(c->jr, true, &rname);
  if (o < nl || o - nl >= rs->ncols || c->right_from[o - nl] >= 0) return true;
  snprintf(c->why, sizeof c->why, "its old rows held in column \"%s\" the values of column \"%s\" of \"%s\", which "
           "that table dropped: the state no longer holds them", c->old->cols[s].name, rs->cols[o - nl].name, rname);
  return false;
}

/* How each new column is given from an old row; false (why) when a column
 * holds values of a type the new one cannot. */
static bool plan_capture(capture *c)
{
  const rn_schema *now = c->r->schema;
  for (int j = 0; j < now->ncols; j++) {
    const rn_column *n = &now->cols[j];
    int s = old_slot(c->r, c->old, n->name);
    if (s < 0) s = join_old_slot(c, j);
    c->src[j] = s;
    if (s >= 0 && !right_value_kept(c, s)) return false;
    if (s < 0) {
      /* null even with a default, even when not nullable: the sinks were told no value of it (a key column's
       * says which row it was) */
      c->give[j] = !n->is_key ? GIVE_NULL : n->has_default ? GIVE_DEFAULT : GIVE_FILL;
      continue;
    }
    const rn_column *o = &c->old->cols[s];
    if (n->type == RN_T_ANY || same_column_type(o, n)) c->give[j] = GIVE_COPY;
    else if (o->type == RN_T_INT && n->type == RN_T_FLOAT) c->give[j] = GIVE_FLOAT;
    else {
      snprintf(c->why, sizeof c->why, "its old rows do not fit its new columns: column \"%s\" held %s, is %s now",
               n->name, o->type == RN_T_STRUCT ? "a struct of other fields" : rn_type_name(o->type),
               rn_type_name(n->type));
      return false;
    }
  }
  return true;
}

/* Old row id in the new columns, into c->out; false (why) when it does not
 * fit them. told: a row as an earlier capture gave it, whose nulls may be
 * columns its sinks were told no value of: they fit any column. */
static bool give_row(capture *c, uint64_t id, const char *row, size_t len, bool told)
{
  const rn_schema *now = c->r->schema;
  const msgpack_object *ov = rn_row_unpack(row, len, c->old->ncols, &c->z);
  if (!ov) {
    snprintf(c->why, sizeof c->why, "its old row %llu does not decode", (unsigned long long)id);
    return false;
  }
  for (int j = 0; j < now->ncols; j++) {
    msgpack_object *v = &c->vals[j];
    const rn_column *n = &now->cols[j];
    v->type = MSGPACK_OBJECT_NIL;
    if (c->give[j] == GIVE_DEFAULT) *v = n->defval;
    if (c->give[j] != GIVE_COPY && c->give[j] != GIVE_FLOAT) continue;
    *v = ov[c->src[j]];
    if (v->type == MSGPACK_OBJECT_NIL && !n->nullable && !told) {
      snprintf(c->why, sizeof c->why, "its old rows do not fit its new columns: row %llu holds null in column "
               "\"%s\", which is not null now", (unsigned long long)id, n->name);
      return false;
    }
    if (c->give[j] == GIVE_FLOAT && v->type != MSGPACK_OBJECT_NIL && v->type != MSGPACK_OBJECT_FLOAT64 &&
        v->type != MSGPACK_OBJECT_FLOAT32) {
      if (!rn_int_is_float(v)) {
        snprintf(c->why, sizeof c->why, "its old rows do not fit its new columns: row %llu holds in column \"%s\" "
                 "an integer no float holds exactly", (unsigned long long)id, n->name);
        return false;
      }
      double d = v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (double)v->via.u64 : (double)v->via.i64;
      v->type = MSGPACK_OBJECT_FLOAT64;
      v->via.f64 = d;
    }
  }
  c->out.size = 0;
  rn_row_pack(now, c->vals, &c->out);
  return true;
}

enum { MISFIT = -77 }; /* give_row said why: the walk stops */

/* A row the reader gives: kept as told, unless an entry of an earlier
 * rebuild says what the sinks were told of its id (1). */
static int capture_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  capture *c = ctx;
  MDB_val v;
  int rc = get_entry(c->r, id, &v);
  if (rc == 0) return 0;
  if (rc != MDB_NOTFOUND) return c->rc = fail(c->r, rc);
  bool fits = give_row(c, id, row, len, false);
  msgpack_zone_clear(&c->z);
  if (!fits) return MISFIT;
  return (c->rc = put_entry(c->r, id, TOLD, c->out.data, c->out.size, NULL, 0));
}

/* The entries an earlier rebuild left untold hold rows in the old layout:
 * given in the new one, in txn (those without a told row stay, saying the
 * sinks hold no row of that id). Read whole first: rewritten under a
 * cursor, LMDB loses entries whose size changes. */
static int capture_pending(capture *c, MDB_txn *txn)
{
  rn_rel *r = c->r;
  msgpack_sbuffer kept; /* |u64 id|u8 has|u32 len|row|… */
  msgpack_sbuffer_init(&kept);
  MDB_cursor *cur;
  MDB_val k, v;
  int rc = mdb_cursor_open(txn, r->rebuilt_dbi, &cur), misfit = 0;
  if (rc) return fail(r, rc);
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && !misfit; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    int has;
    const char *told, *now;
    size_t told_len, now_len;
    if (k.mv_size != 8 || !entry_parse(&v, &has, &told, &told_len, &now, &now_len)) { rc = MDB_CORRUPTED; break; }
    uint64_t id = rn_be64_get(k.mv_data);
    uint32_t len = 0;
    uint8_t h = 0;
    if ((has & TOLD) && !give_row(c, id, told, told_len, true)) misfit = 1;
    else if (has & TOLD) h = TOLD, len = (uint32_t)c->out.size;
    rn_buf_write(&kept, (const char *)&id, 8);
    rn_buf_write(&kept, (const char *)&h, 1);
    rn_buf_write(&kept, (const char *)&len, 4);
    if (len) rn_buf_write(&kept, c->out.data, len);
    msgpack_zone_clear(&c->z);
  }
  mdb_cursor_close(cur);
  if (rc == MDB_NOTFOUND) rc = 0;
  if (!rc) rc = mdb_drop(txn, r->rebuilt_dbi, 0);
  rc = rc ? fail(r, rc) : 0;
  for (size_t off = 0; !rc && !misfit && off < kept.size;) {
    uint64_t id;
    uint32_t len;
    memcpy(&id, kept.data + off, 8);
    memcpy(&len, kept.data + off + 9, 4);
    rc = put_entry_in(r, txn, id, (uint8_t)kept.data[off + 8], kept.data + off + 13, len, NULL, 0);
    off += 13 + len;
  }
  msgpack_sbuffer_destroy(&kept);
  return rc ? rc : misfit ? MISFIT : 0;
}

/* Errors that fail the declaration (tried again, or told the caller);
 * any other reading the old rows says only that they cannot be told. */
static bool fatal(int code)
{
  return code == RN_ENOMEM || code == RN_EFULL || code == RN_EIO;
}

/* A join whose right table's columns changed before it was declared
 * again: that table's rows were rewritten in its new columns, and its old
 * rows were made with them in the columns its declaration record holds.
 * Each right row is read back in those (rn_join_reader_right_now), a
 * column by the name it has now (a rename followed), one dropped null:
 * no new column continues it (join_old_slot). A column of another type
 * now, or another right table, cannot be read back: MISFIT (why). */
static int read_right_as_declared(capture *c)
{
  rn_rel *r = c->r;
  const char *name;
  const rn_schema *old = rn_join_reader_side(c->jr, true, &name), *now = r->right->schema;
  if (!rn_join_reader_right_is_table(c->jr) || strcmp(name, r->right->name) != 0) {
    snprintf(c->why, sizeof c->why, "its old rows were made with rows of \"%s\" in the columns that table had "
             "before its own change: the state no longer holds them", name);
    return MISFIT;
  }
  int *from = malloc(sizeof *from * (size_t)(old->ncols ? old->ncols : 1)), rc = 0;
  if (!from) return rn_err_set(&r->p->err, RN_ENOMEM, "out of memory");
  for (int i = 0; i < old->ncols; i++) from[i] = -1;
  for (int j = 0; j < now->ncols && !rc; j++) {
    int s = side_slot(r->right, old, now->cols[j].name);
    if (s < 0) continue;
    const rn_column *o = &old->cols[s], *n = &now->cols[j];
    if (!same_column_type(o, n)) {
      snprintf(c->why, sizeof c->why, "its old rows were made with rows of \"%s\" whose column \"%s\" held %s, "
               "and holds %s now: the state no longer holds them", name, o->name,
               o->type == RN_T_STRUCT ? "a struct of other fields" : rn_type_name(o->type),
               n->type == RN_T_STRUCT && o->type == RN_T_STRUCT ? "one of other fields" : rn_type_name(n->type));
      rc = MISFIT;
    }
    from[s] = j;
  }
  if (!rc && rn_join_reader_right_now(c->jr, from, now->ncols)) rc = rn_err_set(&r->p->err, RN_ENOMEM, "out of memory");
  if (!rc) c->right_from = from;
  else free(from);
  return rc;
}

/* c's plan for r's columns now: src, give and vals, one per column. */
static int plan_alloc(capture *c)
{
  size_t n = (size_t)(c->r->schema->ncols ? c->r->schema->ncols : 1);
  c->src = calloc(n, sizeof *c->src);
  c->give = calloc(n, 1);
  c->vals = calloc(n, sizeof *c->vals);
  return c->src && c->give && c->vals ? 0 : rn_err_set(&c->r->p->err, RN_ENOMEM, "out of memory");
}

/* What a capture (zone and out set up by its caller) holds, released. */
static void capture_free(capture *c)
{
  msgpack_sbuffer_destroy(&c->out);
  rn_zone_destroy(&c->z);
  free(c->src), free(c->give), free(c->vals), free(c->right_from);
}

/* c's plan for r's new columns from c->old (a join's right rows read back
 * in the columns it was declared with when right_as_declared), r's "rb:"
 * database open, and the entries an earlier rebuild left in the old
 * columns given in the new ones; MISFIT (c->why) when they do not fit. */
static int capture_begin(capture *c, bool right_as_declared)
{
  rn_rel *r = c->r;
  rn_pipeline *p = r->p;
  int rc = plan_alloc(c);
  if (!rc && right_as_declared) rc = read_right_as_declared(c);
  if (rc) return rc;
  if (!plan_capture(c)) return MISFIT;
  rc = rn_state_dbi(p, p->store.wtxn, RN_DB_REBUILT, r->name, 0, &r->rebuilt_dbi);
  if (!rc) r->rebuilt_open = true;
  return rc ? rc : capture_pending(c, p->store.wtxn);
}

/* The captured rows lack the new key columns: rn_rebuild_after gives them
 * the rebuilt rows' values (c->src is no longer needed: the fill slots). */
static void capture_fill(capture *c)
{
  rn_rel *r = c->r;
  for (int j = 0; j < r->schema->ncols; j++)
    if (c->give[j] == GIVE_FILL) c->src[r->nfill++] = j;
  r->rebuild_fill = c->src;
  c->src = NULL;
}

static int capture_rows(capture *c)
{
  rn_rel *r = c->r;
  rn_pipeline *p = r->p;
  rn_reader *rd = NULL;
  rn_err e = { .code = RN_OK };
  bool right_changed = false; /* a join's results hold rows of its right table as they were */
  int rc = r->kind == RN_REL_JOIN ? rn_join_right_changed(p->store.wtxn, p->store.meta, r->name, &right_changed) : 0;
  if (rc) return rc == ENOMEM ? rn_err_set(&p->err, RN_ENOMEM, "out of memory") : fail(r, rc);
  rc = rn_reader_open(p->store.wtxn, p->store.meta, p->store.path, r->name, &rd, &e);
  if (!rc) {
    c->jr = rn_reader_join(rd);
    c->old = rn_reader_schema(rd);
    rc = capture_begin(c, right_changed && c->jr);
  } else if (fatal(rc)) {
    p->err = e;
  } else {
    snprintf(c->why, sizeof c->why, "its old rows could not be read: %.1400s", e.msg);
    rc = MISFIT;
  }
  if (!rc) {
    rc = rn_reader_each(rd, p->store.wtxn, capture_row, c, &e);
    if (rc && rc != MISFIT && c->rc) rc = c->rc; /* a write failed: r's error */
    else if (rc && rc != MISFIT && fatal(rc)) p->err = e;
    else if (rc && rc != MISFIT) snprintf(c->why, sizeof c->why, "its old rows could not be read: %.1400s", e.msg), rc = MISFIT;
  }
  if (!rc) capture_fill(c);
  rn_reader_free(rd);
  return rc;
}

/* A map's rows as its sinks were told (rn_rebuild_capture_told): its
 * function over its input's rows as told, made by a stand-in for it whose
 * columns are the ones it had (the binding packs them there, with their
 * defaults, leaving out names they lack), then given in the new ones. */
static int capture_made(capture *c)
{
  rn_rel *r = c->r;
  c->old = r->told_schema;
  int rc = capture_begin(c, false);
  if (rc) return rc;
  rn_rel as_told = *r; /* r as its sinks hold it; nothing of it is freed but the binding's data */
  as_told.schema = r->told_schema;
  as_told.udata = NULL, as_told.udata_free = NULL;
  as_told.as_told = true, as_told.told_rows = false;
  memset(as_told.slot_hint, 0, sizeof as_told.slot_hint);
  rc = derive_told(&as_told, capture_row, c, false);
  if (as_told.udata_free) as_told.udata_free(as_told.udata);
  if (rc && rc != MISFIT && c->rc) rc = c->rc; /* a write failed: r's error */
  if (!rc) capture_fill(c);
  return rc;
}

/* Runs how over a capture of r, keeping what it found: its rows in
 * rebuilt_dbi (r->rebuild_captured), or, when they cannot be told
 * (MISFIT), nothing, with r->untold_why for the note. */
static int capture_with(rn_rel *r, int (*how)(capture *c))
{
  rn_pipeline *p = r->p;
  free(r->rebuild_fill);
  free(r->untold_why);
  r->rebuild_fill = NULL, r->untold_why = NULL, r->nfill = 0;
  capture c = { .r = r };
  if (!rn_zone_init(&c.z, 4096)) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  msgpack_sbuffer_init(&c.out);
  int rc = how(&c);
  if (!rc && rn_oom()) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (!rc) r->rebuild_captured = true;
  if (rc == MISFIT) { /* a note says so (rn_rebuild_untold_note); nothing is told */
    rc = r->rebuilt_open ? mdb_drop(p->store.wtxn, r->rebuilt_dbi, 0) : 0;
    rc = rc ? fail(r, rc) : 0;
    r->rebuilt_pending = false;
    r->told_unknown = true;
    free(r->rebuild_fill);
    r->rebuild_fill = NULL, r->nfill = 0;
    if (!rc && !(r->untold_why = strdup(c.why))) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  capture_free(&c);
  return rc;
}

/* Whether schema s has a column called name. */
static bool has_col(const rn_schema *s, const char *name)
{
  return s && rn_schema_slot(s, name, strlen(name)) >= 0;
}

/* The relation under r, through filters. */
static const rn_rel *through_filters(const rn_rel *r)
{
  const rn_rel *at = r->input;
  while (at && at->kind == RN_REL_FILTER) at = at->input;
  return at;
}

/* The table filter r is over (through filters), or NULL. */
static const rn_rel *table_under(const rn_rel *r)
{
  const rn_rel *at = through_filters(r);
  return at && at->kind == RN_REL_TABLE ? at : NULL;
}

/* Whether table t's declaration in this run dropped column name (its
 * now_slots say so). */
static bool table_dropped_now(const rn_rel *t, const char *name)
{
  for (int i = 0; t && t->kind == RN_REL_TABLE && t->now_slots && i < t->nstored; i++)
    if (t->now_slots[i] < 0 && strcmp(t->stored_names[i], name) == 0) return true;
  return false;
}

/* Whether the relation under filter c->r (through filters) dropped column
 * name in this run: a table's declaration's now_slots say so; a map
 * declared in this run with other columns (its catalogue entry changed)
 * that lacks it let it go there, and so did such a select whose input
 * still has it or is a table that dropped it in this run (one whose input
 * lacks it otherwise may follow a rename made under it in another run). */
static bool dropped_now(const capture *c, const char *name)
{
  if (table_dropped_now(table_under(c->r), name)) return true;
  const rn_rel *at = through_filters(c->r);
  if (!at || at->kind != RN_REL_MAP || !at->decl_changed || !at->schema || has_col(at->schema, name)) return false;
  int nslots;
  if (!rn_select_slots(at, &nslots)) return true;
  const rn_rel *in = at->input ? through_filters(at) : NULL;
  while (in && in->kind == RN_REL_MAP && in->decl_changed && in->schema && !has_col(in->schema, name)) {
    if (!rn_select_slots(in, &nslots)) return true; /* a select over a map or select that let it go in this run too */
    in = in->input ? through_filters(in) : NULL;
  }
  return in && (has_col(in->schema, name) || table_dropped_now(in, name));
}

/* Whether c's plan gives a new column null while an old column, not known
 * dropped, goes unread (why): a rename in a run before this one (p:alter
 * is not declared again) that nothing here knows of, whose values would
 * be told null. */
static bool renamed_unknown(capture *c)
{
  const rn_schema *now = c->r->schema;
  int added = -1;
  for (int j = 0; j < now->ncols && added < 0; j++)
    if (c->src[j] < 0) added = j;
  if (added < 0) return false;
  for (int i = 0; i < c->old->ncols; i++) {
    bool read = false;
    for (int j = 0; j < now->ncols && !read; j++) read = c->src[j] == i;
    if (read || dropped_now(c, c->old->cols[i].name)) continue;
    snprintf(c->why, sizeof c->why, "its waiting changes hold column \"%s\", which its columns no longer have, "
             "and column \"%s\" is new to them: a rename made in another run is not known here",
             c->old->cols[i].name, now->cols[added].name);
    return true;
  }
  return false;
}

/* A filter over a table whose waiting told rows lack columns the table
 * gained since (fill_from_table): per column of r, the table's slot to
 * take, or -1. */
typedef struct table_fill {
  rn_rel *r;
  MDB_txn *txn;
  const int *from;       /* per column of r: the table's slot, or -1 */
  int nfrom;             /* how many of them are >= 0 */
  int ncols_table;
  repack k;
} table_fill;

static int fill_one(void *ctx, uint64_t id, const char *row, size_t len)
{
  table_fill *f = ctx;
  rn_rel *r = f->r;
  char kb[8];
  rn_be64_put(kb, id);
  MDB_val key = { 8, kb }, v;
  int rc = mdb_get(f->txn, r->rebuilt_dbi, &key, &v), has;
  if (rc == MDB_NOTFOUND) return 0;
  if (rc) return fail(r, rc);
  const char *told, *now;
  size_t told_len, now_len;
  if (!entry_parse(&v, &has, &told, &told_len, &now, &now_len)) return fail(r, MDB_CORRUPTED);
  if (!(has & TOLD)) return 0;
  int n = r->schema->ncols;
  const msgpack_object *tv = rn_row_unpack(told, told_len, n, &f->k.z);
  const msgpack_object *nv = rn_row_unpack(row, len, f->ncols_table, &f->k.z);
  if (!tv || !nv) { msgpack_zone_clear(&f->k.z); return fail(r, MDB_CORRUPTED); }
  memcpy(f->k.vals, tv, sizeof *f->k.vals * (size_t)n);
  for (int j = 0; j < n; j++)
    if (f->from[j] >= 0) f->k.vals[j] = nv[f->from[j]];
  f->k.out.size = 0;
  rn_row_pack(r->schema, f->k.vals, &f->k.out); /* a copy: LMDB's bytes move with the put */
  msgpack_zone_clear(&f->k.z);
  return put_entry_in(r, f->txn, id, TOLD, f->k.out.data, f->k.out.size, NULL, 0);
}

/* The told rows give_waiting gave in r's columns now hold null in each
 * column c's plan found new (c->src -1) that the table under filter r
 * (through filters) has: the table gained it since they were told. The
 * table's rows got its value then (its default, else null: a note said
 * so, which is how a copy of r's rows learns of it too), and no group
 * changed them since (a group tells the waiting rows first): each told
 * row takes the value its id's row of the table holds, read in txn as a
 * reader of the state reads it. A row the table no longer holds (it was
 * dropped) keeps the null. */
static int fill_from_table(capture *c, MDB_txn *txn)
{
  rn_rel *r = c->r;
  rn_pipeline *p = r->p;
  const rn_rel *t = table_under(r);
  int n = r->schema->ncols, want = 0;
  for (int j = 0; j < n; j++) want += c->src[j] < 0;
  if (!t || !want) return 0;
  rn_reader *rd = NULL;
  rn_err e = { .code = RN_OK };
  int rc = rn_reader_open(txn, p->store.meta, p->store.path, t->name, &rd, &e);
  if (rc) {
    p->err = e;
    return rc;
  }
  const rn_schema *ts = rn_reader_schema(rd);
  int *from = malloc(sizeof *from * (size_t)(n ? n : 1));
  table_fill f = { .r = r, .txn = txn, .from = from, .ncols_table = ts->ncols };
  if (!from || (rc = repack_init(&f.k, r))) {
    free(from);
    rn_reader_free(rd);
    return rc ? rc : rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  for (int j = 0; j < n; j++) {
    const char *name = r->schema->cols[j].name;
    from[j] = c->src[j] < 0 ? rn_schema_slot(ts, name, strlen(name)) : -1;
    if (from[j] >= 0 && ts->cols[from[j]].type != r->schema->cols[j].type && r->schema->cols[j].type != RN_T_ANY)
      from[j] = -1; /* not the column it is now: left null */
    f.nfrom += from[j] >= 0;
  }
  if (f.nfrom) {
    rc = rn_reader_each(rd, txn, fill_one, &f, &e);
    if (rc && !p->err.code) p->err = e;
  }
  repack_free(&f.k);
  free(from);
  rn_reader_free(rd);
  return rc;
}

/* Filter r's catalogue entry changed, and the told rows an earlier
 * rebuild left waiting are in the columns the entry held
 * (r->waiting_schema, rn_state_open): in txn, the transaction that replaces
 * the entry, so that they are given once, they are given in r's columns
 * now as a capture gives them (plan_capture: by name, a rename of the
 * relation its columns are followed, an int column widened to float as
 * floats, a new column null, or, over a table that gained it, the value
 * the table's row holds: fill_from_table). The rows it holds now are made
 * afresh at its declaration (rn_rebuild_now). Rows that do not fit:
 * nothing is told, and a note says why. */
static int give_waiting(rn_rel *r, MDB_txn *txn)
{
  rn_pipeline *p = r->p;
  int n = r->schema->ncols;
  capture c = { .r = r, .old = r->waiting_schema };
  if (!rn_zone_init(&c.z, 4096)) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  msgpack_sbuffer_init(&c.out);
  int rc = plan_alloc(&c);
  if (!rc && !c.old) {
    snprintf(c.why, sizeof c.why, "the columns its waiting changes hold rows in could not be read");
    rc = MISFIT;
  } else if (!rc && !plan_capture(&c)) {
    rc = MISFIT;
  }
  for (int j = 0; !rc && j < n; j++)
    if (c.give[j] == GIVE_FILL) {
      snprintf(c.why, sizeof c.why, "its waiting changes hold rows without its key column \"%s\"", r->schema->cols[j].name);
      rc = MISFIT;
    }
  if (!rc && renamed_unknown(&c)) rc = MISFIT;
  if (!rc) rc = capture_pending(&c, txn);
  if (!rc) rc = fill_from_table(&c, txn); /* a column its table gained since: the value the table's rows got */
  if (rc == MISFIT) {
    r->rebuilt_pending = false;
    r->told_unknown = true; /* what is over it cannot be told either */
    rc = mdb_drop(txn, r->rebuilt_dbi, 0);
    rc = rc ? fail(r, rc) : rn_evolve_note(p, "%s: its sinks were not told what its rebuild changed (%s)", r->name, c.why);
  }
  capture_free(&c);
  return rc;
}

int rn_rebuild_capture_told(rn_rel *r)
{
  if (!r->told_schema || !is_derived(r) || !r->tablelike) return 0;
  return capture_with(r, capture_made);
}

int rn_rebuild_capture(rn_rel *r)
{
  if (!r->stateful || r->kind == RN_REL_MAP || !r->input || !r->tablelike || !r->input->tablelike) return 0;
  return capture_with(r, capture_rows);
}

int rn_rebuild_captured_done(rn_rel *r)
{
  if (r->rebuild_captured) { /* its setup did not rebuild it: nothing is compared */
    r->rebuild_captured = false;
    int rc = rn_rebuild_untold(r);
    r->told_unknown = true;
    if (rc) return rc;
    if (!r->untold_why && !(r->untold_why = strdup("its rebuild was not compared with them")))
      return rn_err_set(&r->p->err, RN_ENOMEM, "out of memory");
  }
  if (!r->untold_why) return 0;
  int rc = rn_evolve_note(r->p, "%s: its sinks were not told what its rebuild changed (%s)", r->name, r->untold_why);
  free(r->untold_why);
  r->untold_why = NULL;
  return rc;
}

void rn_rebuild_capture_forget(rn_rel *r)
{
  r->rebuild_captured = r->told_unknown = false;
  free(r->rebuild_fill);
  free(r->untold_why);
  r->rebuild_fill = NULL, r->untold_why = NULL, r->nfill = 0;
}

const rn_rel *rn_told_unknown_under(const rn_rel *r)
{
  for (const rn_rel *at = r->input; at; at = is_derived(at) ? at->input : NULL) {
    if (at->rebuilt_pending) return NULL; /* what its sinks were told is kept */
    if (at->told_unknown) return at;
  }
  return NULL;
}

/* ---- a dropped table's rows (drop.c), as the sinks over it were told ----
 * Read in the columns the dropped table had, given in the columns of the
 * table declared again under its name as a capture gives them (by name,
 * a rename followed, an int widened to float, a new column null). */

static int dropped_plan(capture *c, rn_rel *t)
{
  c->r = t;
  c->old = t->dropped_schema;
  if (!rn_zone_init(&c->z, 4096)) return rn_err_set(&t->p->err, RN_ENOMEM, "out of memory");
  msgpack_sbuffer_init(&c->out);
  int rc = plan_alloc(c);
  if (!rc && !plan_capture(c)) rc = MISFIT;
  for (int j = 0; !rc && j < t->schema->ncols; j++)
    if (c->give[j] == GIVE_FILL) rc = MISFIT; /* a new key column: the rows had none */
  return rc;
}

bool rn_dropped_fits(rn_rel *t)
{
  capture c = { 0 };
  int rc = dropped_plan(&c, t);
  capture_free(&c);
  if (rc && rc != MISFIT) rn_err_clear(&t->p->err); /* out of memory: told as not known */
  return rc == 0;
}

static int scan_dropped(rn_rel *t, rn_scan_fn fn, void *ctx)
{
  rn_pipeline *p = t->p;
  capture c = { 0 };
  int rc = dropped_plan(&c, t);
  MDB_cursor *cur = NULL;
  if (rc == MISFIT) rc = rn_err_set(&p->err, RN_ESCHEMA, "%s: the rows it held when it was dropped do not fit its "
                                    "columns now", t->name);
  if (!rc && (rc = mdb_cursor_open(p->store.wtxn, t->dropped_dbi, &cur))) rc = fail(t, rc);
  MDB_val k, v;
  int mrc = rc ? MDB_NOTFOUND : mdb_cursor_get(cur, &k, &v, MDB_FIRST);
  for (; !rc && mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    uint64_t id = k.mv_size == 8 ? rn_be64_get(k.mv_data) : 0;
    if (!id || !give_row(&c, id, v.mv_data, v.mv_size, true)) {
      rc = rn_err_set(&p->err, RN_ESTORE, "%s: a row it held when it was dropped %s", t->name,
                      id ? c.why : "is under a malformed id");
      break;
    }
    rc = fn(ctx, id, c.out.data, c.out.size);
    msgpack_zone_clear(&c.z);
  }
  if (!rc && mrc != MDB_NOTFOUND) rc = fail(t, mrc);
  if (cur) mdb_cursor_close(cur);
  capture_free(&c);
  return rc;
}
