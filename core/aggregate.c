/* aggregate.c — an aggregate's declaration, rebuild and scan, and its
 * operator (the state is drawn in aggregate.h; its files in aggregate_int.h). */
#include "aggregate_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "evolve.h"
#include "evolve_log.h"
#include "scan.h"
#include "snapshot.h"
#include "wb.h"

/* ---- scanning ---- */

typedef struct aggregate_scan {
  rn_aggregate *a;
  rn_scan_fn fn;
  void *ctx;
} aggregate_scan;

/* One group's row, as stored when its window is final, else computed from
 * its state. */
static int scan_group(rn_aggregate *a, const MDB_val *k, const MDB_val *d, rn_scan_fn fn, void *ctx)
{
  rn_pipeline *p = a->out->p;
  group_entry e;
  if (!rn_agg_entry_parse(k, d, &e))
    return rn_err_set(err_of(a), RN_ESTORE, "%s: a group's state could not be decoded", a->out->name);
  if (e.rows == 0) return 0;
  if (e.final) { /* the row, as stored */
    const char *row = rn_scratch_copy(p, e.rest + 1, e.rest_len - 1);
    return row ? fn(ctx, e.rid, row, e.rest_len - 1) : nomem(a);
  }
  gkey g = { (char *)rn_scratch_copy(p, e.key, e.klen), e.klen, (char *)rn_scratch_copy(p, k->mv_data, k->mv_size),
             k->mv_size };
  msgpack_object *st = NULL;
  const char *row;
  size_t len;
  uint64_t rid = e.rid, rows = e.rows;
  int rc = g.k && g.sk ? rn_agg_decode_state(a, &e, &st) : nomem(a);
  msgpack_object ext[a->naggs ? a->naggs : 1];
  for (int i = 0; i < a->naggs; i++) ext[i] = UNKNOWN;
  if (!rc) rc = rn_agg_result_row(a, &g, rows, st, ext, &row, &len);
  if (!rc) rc = fn(ctx, rid, row, len);
  return rc;
}

static int scan_in(void *ctx, MDB_txn *txn, bool own_scratch)
{
  aggregate_scan *s = ctx;
  rn_aggregate *a = s->a;
  MDB_cursor *cur = NULL;
  int rc = rn_wb_cursor_open(&a->out->p->store, txn, a->groups_dbi, false, &cur);
  if (rc) return store_fail(a, rc);
  MDB_val k, d;
  for (int mrc = mdb_cursor_get(cur, &k, &d, MDB_FIRST); !rc && mrc == 0; mrc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
    if (reserved(&k)) continue;
    rc = scan_group(a, &k, &d, s->fn, s->ctx);
    if (own_scratch) msgpack_zone_clear(&a->out->p->scratch);
  }
  mdb_cursor_close(cur);
  return rc;
}

/* A scan reads a snapshot (snapshot.h), through which every helper here
 * then reads (a->reading); fn may read, not end the group it reads. */
int rn_aggregate_scan(rn_rel *r, rn_scan_fn fn, void *ctx)
{
  rn_aggregate *a = r->ctx;
  aggregate_scan s = { a, fn, ctx };
  return rn_snapshot_read(r->p, r->name, &a->reading, scan_in, &s);
}

/* ---- declaration ---- */

static void free_aggregate(void *ctx)
{
  rn_aggregate *a = ctx;
  if (a->fns.free_ctx) a->fns.free_ctx(a->fns.ctx);
  for (int i = 0; a->aggs && i < a->naggs; i++) free((char *)a->aggs[i].name);
  free(a->aggs);
  free(a->counts_owner);
  free(a->fseen);
  free(a->by);
  msgpack_sbuffer_destroy(&a->buf);
  msgpack_sbuffer_destroy(&a->state);
  msgpack_sbuffer_destroy(&a->answer);
  free(a);
}

static int add_col(rn_schema *s, const char *name, rn_type t, bool nullable, const rn_schema *fields, rn_err *e)
{
  rn_schema *copy = NULL;
  if (fields && (!(copy = rn_schema_new()) || rn_schema_copy_columns(copy, fields, false, e))) {
    rn_schema_free(copy);
    return e->code ? e->code : rn_err_set(e, RN_ENOMEM, "out of memory");
  }
  return rn_schema_add(s, name, strlen(name), t, nullable, copy, e) < 0 ? e->code : 0;
}

static rn_schema *result_schema(rn_pipeline *p, const char *name, rn_aggregate *a)
{
  const rn_schema *is = a->in->schema;
  rn_schema *s = rn_schema_new();
  int rc = s ? 0 : rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  bool nullable_key = false;
  for (int i = 0; i < a->nby && !rc; i++) {
    const rn_column *c = &is->cols[a->by[i]];
    if (!rn_type_is_scalar(c->type)) /* named below: every failure here gets the relation's name once */
      rc = rn_err_set(&p->err, RN_EINVAL, "by column \"%s\" has type %s; groups are keyed by scalars", c->name,
                      rn_type_name(c->type));
    else rc = add_col(s, c->name, c->type, c->nullable && !a->key_stated, NULL, &p->err);
    nullable_key |= c->nullable && !a->key_stated; /* key = …: a null there fails its change (AGG-5) */
  }
  if (!rc && a->w.kind != RN_WINDOW_NONE) {
    rn_type t = a->time_int ? RN_T_INT : RN_T_FLOAT;
    rc = add_col(s, "window_start", t, false, NULL, &p->err);
    if (!rc) rc = add_col(s, "window_end", t, false, NULL, &p->err);
  }
  for (int i = 0; i < a->naggs && !rc; i++) {
    const rn_agg_spec *g = &a->aggs[i];
    const rn_column *c = g->slot >= 0 ? &is->cols[g->slot] : NULL;
    const agg_decl *d = rn_agg_decl_of(g->kind);
    rn_type t = d->result_type == AGG_RESULT_OF_COLUMN ? c->type : (rn_type)d->result_type;
    rc = add_col(s, g->name, t, d->result_nullable, NULL, &p->err);
  }
  if (rc) { rn_err_prefix(&p->err, name); rn_schema_free(s); return NULL; }
  int nkey = a->nby + (a->w.kind != RN_WINDOW_NONE ? 2 : 0);
  if (nkey && !nullable_key) {
    int slots[nkey];
    for (int i = 0; i < a->nby; i++) slots[i] = i;
    if (a->w.kind != RN_WINDOW_NONE) slots[a->nby] = a->nby; /* window_start; window_end follows from it */
    if (rn_schema_set_key(s, slots, a->nby + (a->w.kind != RN_WINDOW_NONE), name, &p->err)) {
      rn_schema_free(s);
      return NULL;
    }
  }
  return s;
}

static int check_aggs(rn_pipeline *p, const char *name, rn_rel *in, const rn_agg_spec *aggs, int naggs,
                      const rn_window *w)
{
  const rn_schema *is = in->schema;
  for (int i = 0; i < naggs; i++) {
    const rn_agg_spec *g = &aggs[i];
    if (g->slot < 0) continue;
    const rn_column *c = &is->cols[g->slot];
    const agg_decl *d = rn_agg_decl_of(g->kind);
    bool numeric = c->type == RN_T_INT || c->type == RN_T_FLOAT;
    if ((d->takes == AGG_TAKES_NUMBER && !numeric) || (d->takes == AGG_TAKES_SCALAR && !rn_type_is_scalar(c->type)))
      return rn_err_set(&p->err, RN_EINVAL, "%s: %s: column \"%s\" is %s; %s",
                        name, g->name, c->name, rn_type_name(c->type), d->takes_what);
  }
  if (w->kind != RN_WINDOW_NONE) {
    const rn_column *t = &is->cols[w->slot];
    if (t->type != RN_T_INT && t->type != RN_T_FLOAT)
      return rn_err_set(&p->err, RN_EINVAL, "%s: the window's time column \"%s\" is %s; it must be int or float",
                        name, t->name, rn_type_name(t->type));
    if (!isfinite(w->size) || !isfinite(w->step))
      return rn_err_set(&p->err, RN_EINVAL, "%s: a window needs a finite size and step", name);
    if (!(w->size > 0) || !(w->step > 0) || w->size / w->step > MAX_WINDOWS)
      return rn_err_set(&p->err, RN_EINVAL, "%s: a window needs size > 0 and step > 0, size/step at most %d",
                        name, MAX_WINDOWS);
    if (t->type == RN_T_INT && (w->size != floor(w->size) || w->step != floor(w->step)))
      return rn_err_set(&p->err, RN_EINVAL, "%s: an int time column takes whole window sizes and steps", name);
    if (t->type == RN_T_INT && (w->size > 0x1p62 || w->step > 0x1p62)) /* int window math stays in 128 bits */
      return rn_err_set(&p->err, RN_EINVAL, "%s: an int time column takes window sizes and steps up to 2^62", name);
    if (w->has_grace && in->tablelike)
      return rn_err_set(&p->err, RN_EINVAL, "%s: grace is for windows over streams", name);
  }
  return 0;
}

static int rebuild_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  rn_aggregate *a = ctx;
  rn_change c = { RN_INSERT, id, row, len, NULL, 0 };
  int rc = rn_agg_apply(a, &c, true);
  msgpack_zone_clear(&a->out->p->scratch);
  return rc;
}

/* Resets every group entry to |rid|0 rows|no state|: keys first, then
 * the writes, since LMDB loses an entry that a cursor rewrites with
 * another size in place (mdb_cursor_put MDB_CURRENT: it was then found by
 * no lookup, and its group got a new id). An entry stored as it is under
 * a key longer than the declaration's key_inline moves to its hashed
 * place (rn_agg_group_rehash), where rn_agg_group_find then finds it: a
 * min or max given to an aggregate declared without one leaves its values
 * no room beside a key that long (AGG_VALUE_ROOM_MIN), and the rebuild has
 * dropped the value counts, so the entry is all there is to move. */
static int reset_groups(rn_aggregate *a, MDB_txn *txn)
{
  msgpack_sbuffer keys; /* |u32 klen|key|u32 vlen|u64 rid|u64 0|[hashed key]|0x90|u8 rehash| … */
  msgpack_sbuffer_init(&keys);
  MDB_cursor *cur;
  int rc = rn_wb_cursor_open(&a->out->p->store, txn, a->groups_dbi, false, &cur);
  if (rc) return store_fail(a, rc);
  MDB_val k, d;
  static const uint64_t no_rows = 0;
  for (rc = mdb_cursor_get(cur, &k, &d, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
    group_entry e;
    if (reserved(&k)) continue;
    if (!rn_agg_entry_parse(&k, &d, &e)) { rc = -1; break; }
    uint32_t klen = (uint32_t)k.mv_size, vlen = (uint32_t)(17 + e.head_len);
    char rehash = !e.head_len && k.mv_size > a->key_inline;
    rn_buf_write(&keys, (const char *)&klen, 4);
    rn_buf_write(&keys, k.mv_data, k.mv_size);
    rn_buf_write(&keys, (const char *)&vlen, 4);
    rn_buf_write(&keys, d.mv_data, 8);
    rn_buf_write(&keys, (const char *)&no_rows, 8);
    rn_buf_write(&keys, e.head, e.head_len); /* a hashed group keeps its whole key */
    rn_buf_write(&keys, "\x90", 1); /* an empty array: no state */
    rn_buf_write(&keys, &rehash, 1);
  }
  mdb_cursor_close(cur);
  if (rc == MDB_NOTFOUND) rc = rn_oom() ? nomem(a) : 0;
  else if (rc == -1) rc = rn_err_set(err_of(a), RN_ESTORE, "%s: a group's state could not be decoded", a->out->name);
  else rc = store_fail(a, rc);
  for (size_t off = 0; !rc && off < keys.size;) {
    uint32_t klen, vlen;
    uint64_t rid;
    memcpy(&klen, keys.data + off, 4);
    memcpy(&vlen, keys.data + off + 4 + klen, 4);
    memcpy(&rid, keys.data + off + 8 + klen, 8);
    MDB_val gk = { klen, keys.data + off + 4 }, nd = { vlen, keys.data + off + 8 + klen };
    if (keys.data[off + 8 + klen + vlen]) rc = rn_agg_group_rehash(a, txn, &gk, rid, 0, "\x90", 1, NULL);
    else if ((rc = rn_wb_put(&a->out->p->store, txn, a->groups_dbi, &gk, &nd, 0))) rc = store_fail(a, rc);
    off += 9 + klen + vlen;
  }
  msgpack_sbuffer_destroy(&keys);
  return rc;
}

/* After a rebuild: every group's int sums fit int64 (rn_agg_sums_fit). */
static int check_rebuilt_sums(rn_aggregate *a, MDB_txn *txn)
{
  bool int_sums = false;
  for (int i = 0; i < a->naggs; i++) int_sums |= rn_agg_int_sum(a, i);
  if (!int_sums) return 0;
  MDB_cursor *cur;
  int rc = rn_wb_cursor_open(&a->out->p->store, txn, a->groups_dbi, false, &cur);
  if (rc) return store_fail(a, rc);
  MDB_val k, d;
  int err = 0;
  for (rc = mdb_cursor_get(cur, &k, &d, MDB_FIRST); !err && rc == 0; rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
    group_entry e;
    if (reserved(&k) || !rn_agg_entry_parse(&k, &d, &e) || !e.rest_len || e.final) continue;
    msgpack_object *st;
    if (e.rows > 0 && !(err = rn_agg_decode_state(a, &e, &st))) err = rn_agg_sums_fit(a, st);
    msgpack_zone_clear(zone_of(a));
  }
  mdb_cursor_close(cur);
  if (err) return err;
  return rc == MDB_NOTFOUND ? 0 : store_fail(a, rc);
}

/* Rebuilds from the input's current rows: group ids stay (the entries are
 * reset, not removed), state restarts. */
static int rebuild(rn_aggregate *a, bool created)
{
  if (!a->in->tablelike) {
    if (created) return 0;
    return rn_err_set(err_of(a), RN_ESCHEMA,
                      "%s: its state missed groups of the stream %s and cannot be rebuilt from a stream; "
                      "declare it in every session (or remove the state)", a->out->name, a->in->name);
  }
  MDB_txn *txn = txn_of(a);
  int rc = rn_rebuild_before(a->out); /* its rows as its sinks were told */
  if (rc) return rc;
  rc = rn_wb_drop(&a->out->p->store, txn, a->values_dbi, 0);
  if (rc) return store_fail(a, rc);
  rc = reset_groups(a, txn);
  if (rc) return rc;
  a->rebuilding = true;
  rc = rn_rel_scan(a->in, rebuild_row, a);
  a->rebuilding = false;
  if (!rc) rc = check_rebuilt_sums(a, txn);
  return rc ? rc : rn_rebuild_after(a->out); /* what changed, for its sinks (evolve_log.h) */
}

/* State written before format 2 holds float sums as doubles, drifted (or
 * stuck at inf or NaN): over a table it is rebuilt once, exactly, from the
 * table's rows; over a stream each old sum is read as the value it holds
 * and is exact from there on (fsum_get). */
static int check_format(rn_aggregate *a, bool *rebuild_it)
{
  MDB_val k = { 1, (void *)FORMAT_KEY }, d;
  int rc = rn_wb_get(&a->out->p->store, txn_of(a), a->groups_dbi, &k, &d);
  if (rc && rc != MDB_NOTFOUND) return store_fail(a, rc);
  bool old = rc == MDB_NOTFOUND || d.mv_size < 17 || ((const unsigned char *)d.mv_data)[16] < STATE_FORMAT;
  bool float_sums = false;
  for (int i = 0; i < a->naggs; i++) float_sums |= rn_agg_summing(a, i) && !rn_agg_int_sum(a, i);
  if (old && float_sums && a->in->tablelike) *rebuild_it = true;
  if (!old) return 0;
  char v[17] = { 0 };
  v[16] = STATE_FORMAT;
  d = (MDB_val){ sizeof v, v };
  rc = rn_wb_put(&a->out->p->store, txn_of(a), a->groups_dbi, &k, &d, 0);
  return rc ? store_fail(a, rc) : 0;
}

/* A runnel.agg column whose own functions changed (evolve_code.h marks a):
 * the rows its sinks were told came from the old functions, which cannot
 * be run again, and reading its stored states with the new ones would make
 * the new rows: nothing is told, and a note says so (evolve_log.h). */
static int untold_if_functions_changed(rn_aggregate *a, bool created)
{
  rn_rel *r = a->out;
  bool user = false;
  for (int i = 0; i < a->naggs; i++) user |= a->aggs[i].kind == RN_AGG_USER;
  if (created || !user || !r->rebuild_tells || r->rebuild_captured || r->evolved_by != r->name) return 0;
  int rc = rn_rebuild_untold(r);
  r->told_unknown = true;
  free(r->untold_why);
  r->untold_why = strdup("its runnel.agg functions changed: the old ones cannot be run again");
  return rc ? rc : r->untold_why ? 0 : rn_err_set(&r->p->err, RN_ENOMEM, "out of memory");
}

static bool holds_id(const MDB_val *k)
{
  return !reserved(k);
}

/* Its counters against the ids of its groups (a group that empties keeps
 * its id in "ag:"; the reserved one-byte keys hold none): rn_state_check_ids. */
static int check_ids(rn_aggregate *a)
{
  rn_pipeline *p = a->out->p;
  size_t not_ids = 0;
  for (int b = 0xfc; b <= 0xff; b++) {
    char key = (char)b;
    MDB_val k = { 1, &key }, d;
    int rc = mdb_get(p->store.wtxn, a->groups_dbi, &k, &d);
    if (rc == 0) not_ids++;
    else if (rc != MDB_NOTFOUND) return store_fail(a, rc);
  }
  return rn_state_check_ids(p, a->out, p->store.wtxn, a->groups_dbi, not_ids, holds_id);
}

static int setup_state(void *ctx, bool created, bool rebuild_it)
{
  rn_aggregate *a = ctx;
  rn_pipeline *p = a->out->p;
  int rc = rn_state_dbi(p, p->store.wtxn, RN_DB_AGG_GROUPS, a->out->name, 0, &a->groups_dbi);
  if (!rc) rc = check_ids(a); /* before check_format may write its mark */
  if (!rc) rc = rn_state_dbi(p, p->store.wtxn, RN_DB_AGG_VALUES, a->out->name, 0, &a->values_dbi);
  if (!rc && a->w.kind != RN_WINDOW_NONE) rc = rn_agg_windows_open(a, created);
  if (!rc) rc = check_format(a, &rebuild_it);
  bool changed = false; /* another declaration with the same columns (sum of another column) */
  if (!rc) rc = rn_agg_decl_record(a, p->store.wtxn, !created && a->out->rebuild_tells, &changed); /* also for
                                                                                                   * readers */
  if (!rc && changed && !created && !(rc = rn_evolve_decl_changed(p, a->out))) rebuild_it = true;
  if (!rc && rebuild_it) rc = untold_if_functions_changed(a, created);
  if (!rc && rebuild_it) rc = rebuild(a, created);
  return rc;
}

static int declare_aggregate(rn_pipeline *p, const char *name, rn_rel *in, const int *by, int nby,
                             const rn_window *w, const rn_agg_spec *aggs, int naggs,
                             const rn_agg_fns *fns, bool key_stated, rn_rel **out)
{
  int rc = rn_check_declarable(p, name);
  if (!rc) rc = rn_check_not_lookup(p, name, "aggregate", in);
  if (!rc) rc = check_aggs(p, name, in, aggs, naggs, w);
  rn_aggregate *a = rc ? NULL : calloc(1, sizeof *a);
  if (!rc && !a) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (rc) {
    if (fns->free_ctx) fns->free_ctx(fns->ctx);
    return rc;
  }
  a->in = in;
  a->key_stated = key_stated;
  a->nby = nby;
  a->w = *w;
  a->naggs = naggs;
  a->fns = *fns;
  a->time_int = w->kind != RN_WINDOW_NONE && in->schema->cols[w->slot].type == RN_T_INT;
  msgpack_sbuffer_init(&a->buf);
  msgpack_sbuffer_init(&a->state);
  msgpack_sbuffer_init(&a->answer);
  a->by = malloc(sizeof *a->by * (size_t)(nby ? nby : 1));
  a->aggs = calloc((size_t)(naggs ? naggs : 1), sizeof *a->aggs);
  a->counts_owner = calloc((size_t)(naggs ? naggs : 1), sizeof *a->counts_owner);
  a->fseen = calloc((size_t)(naggs ? naggs : 1), sizeof *a->fseen);
  if (!a->by || !a->aggs || !a->counts_owner || !a->fseen) { free_aggregate(a); return rn_err_set(&p->err, RN_ENOMEM, "out of memory"); }
  if (in->schema->ncols > 255) { free_aggregate(a); return rn_err_set(&p->err, RN_EINVAL, "%s: aggregates take inputs of at most 255 columns", name); }
  for (int i = 0; i < naggs; i++) {
    bool counts = rn_agg_decl_of(aggs[i].kind)->value_counts;
    a->counts_owner[i] = counts;
    for (int q = 0; q < i && counts; q++)
      if (rn_agg_decl_of(aggs[q].kind)->value_counts && aggs[q].slot == aggs[i].slot) a->counts_owner[i] = false;
  }
  /* Group keys stored as they are, as before, up to where a min or max
   * would leave its values no room (AGG_VALUE_ROOM_MIN) or a grace window
   * no room in "aw:" (9 bytes of start); longer ones hashed (longkey.h). */
  a->key_inline = RN_STORE_KEY_MAX;
  for (int i = 0; i < naggs; i++)
    if (a->counts_owner[i]) a->key_inline = RN_STORE_KEY_MAX - 1 - AGG_VALUE_ROOM_MIN;
  if (w->has_grace && a->key_inline > RN_STORE_KEY_MAX - 9) a->key_inline = RN_STORE_KEY_MAX - 9;
  if (nby) memcpy(a->by, by, sizeof *by * (size_t)nby); /* by may be NULL without by columns */
  for (int i = 0; i < naggs; i++) {
    a->aggs[i] = aggs[i];
    if (!(a->aggs[i].name = strdup(aggs[i].name))) { free_aggregate(a); return rn_err_set(&p->err, RN_ENOMEM, "out of memory"); }
  }
  rn_schema *s = result_schema(p, name, a);
  rn_rel *r = s ? rn_rel_new(p, name, RN_REL_AGGREGATE, s) : NULL;
  if (!r) {
    free_aggregate(a);
    if (s) rn_schema_free(s);
    return s ? rn_err_set(&p->err, RN_ENOMEM, "out of memory") : p->err.code;
  }
  a->out = r;
  r->ctx = a;
  r->input = in;
  r->tablelike = true;
  r->persistent = r->stateful = true;
  rc = rn_open_derived_state(p, r, setup_state, a);
  if (!rc) rc = rn_push_ptr((void ***)&in->outputs, &in->noutputs, &in->outcap, r);
  if (rc) {
    rn_rel_discard_last(p);
    return rc;
  }
  *out = r;
  return 0;
}

int rn_declare_aggregate(rn_pipeline *p, const char *name, rn_rel *in, const int *by, int nby,
                         const rn_window *w, const rn_agg_spec *aggs, int naggs,
                         const rn_agg_fns *fns, rn_rel **out)
{
  return declare_aggregate(p, name, in, by, nby, w, aggs, naggs, fns, false, out);
}

int rn_declare_aggregate_keyed(rn_pipeline *p, const char *name, rn_rel *in, const int *by, int nby,
                               const rn_window *w, const rn_agg_spec *aggs, int naggs,
                               const rn_agg_fns *fns, rn_rel **out)
{
  return declare_aggregate(p, name, in, by, nby, w, aggs, naggs, fns, true, out);
}

const rn_rel_ops rn_aggregate_ops = { .name = "aggregate", .apply = rn_agg_operator_apply, .scan = rn_aggregate_scan,
                                       .free = free_aggregate };

