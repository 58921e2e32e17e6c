/* aggregate_apply.c — one input change applied to an aggregate
 * (aggregate_int.h). */
#include "aggregate_int.h"
#include "wb.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Appends to keys the group key (b's first base bytes, then start) of one
 * window. */
static int window_key(rn_aggregate *a, msgpack_sbuffer *b, size_t base, double start, int64_t istart,
                      gkey *keys, int *n)
{
  if (*n == WINDOW_KEYS)
    return rn_err_set(err_of(a), RN_EINVAL, "%s: the event time column \"%s\" falls in more than %d windows",
                      a->out->name, a->in->schema->cols[a->w.slot].name, WINDOW_KEYS);
  b->size = base;
  msgpack_object s = num_obj(a, start, istart);
  rn_key_append(b, &s);
  keys[*n] = (gkey){ (char *)rn_scratch_copy(a->out->p, b->data, b->size), b->size, NULL, 0 };
  return keys[(*n)++].k ? 0 : nomem(a);
}

static const char *time_col(const rn_aggregate *a)
{
  return a->in->schema->cols[a->w.slot].name;
}

/* The windows of an int event time ts, counted in 128 bits: a window whose
 * start or end leaves int64 is an error, never a wrapped bound. */
static int int_windows(rn_aggregate *a, int64_t ts, msgpack_sbuffer *b, size_t base, gkey *keys, int *n)
{
  int64_t size = (int64_t)a->w.size, step = (int64_t)a->w.step; /* at most 2^62 (check_aggs) */
  __int128 from = (__int128)ts - size, k = from / step - (from % step < 0) + 1, hi = ts / step - (ts % step < 0);
  if (k * step < INT64_MIN || hi * step + size > INT64_MAX)
    return rn_err_set(err_of(a), RN_EINVAL, "%s: the event time column \"%s\" is %lld: its window of size %lld "
                      "passes the 64-bit int range", a->out->name, time_col(a), (long long)ts, (long long)size);
  int rc = 0;
  for (; k <= hi && !rc; k++) rc = window_key(a, b, base, 0, (int64_t)(k * step), keys, n);
  return rc;
}

/* Window numbers (ts / step) are exact below 2^53: past it k + 1 == k. */
#define EXACT_WINDOWS 9007199254740992.0

/* The windows of a float event time ts. With size a multiple m of step
 * (tumbling: 1) an event is in the m windows up to floor(ts / step),
 * counted from that one index: bounds rounded apart (ts - size, or start +
 * size) put it in one window too many or in none. NaN, an infinity or a
 * time too far for exact window numbers is an error (it is in no window
 * the key could name; the loop would never end). */
static int float_windows(rn_aggregate *a, double ts, msgpack_sbuffer *b, size_t base, gkey *keys, int *n)
{
  if (isnan(ts) || isinf(ts))
    return rn_err_set(err_of(a), RN_EINVAL, "%s: the event time column \"%s\" is %s: it falls in no window",
                      a->out->name, time_col(a), isnan(ts) ? "NaN" : ts > 0 ? "inf" : "-inf");
  double hi = floor(ts / a->w.step), m = a->w.size / a->w.step;
  if (!(fabs(hi) + m + 2 < EXACT_WINDOWS) || !isfinite(hi * a->w.step + a->w.size))
    return rn_err_set(err_of(a), RN_EINVAL, "%s: the event time column \"%s\" is %.15g: too far from 0 for "
                      "windows of step %.15g (window numbers past 2^53 are not exact)",
                      a->out->name, time_col(a), ts, a->w.step);
  bool multiple = m == floor(m);
  int rc = 0;
  for (double k = multiple ? hi - m + 1 : floor((ts - a->w.size) / a->w.step) + 1; k <= hi && !rc; k++) {
    if (!multiple && k * a->w.step + a->w.size <= ts) continue; /* float rounding at the edge */
    rc = window_key(a, b, base, k * a->w.step, 0, keys, n);
  }
  return rc;
}

/* The group keys a row belongs to, ascending: one without a window, the
 * windows holding its event time with one. */
int rn_agg_group_keys(rn_aggregate *a, const msgpack_object *v, gkey *keys, int *n)
{
  for (int i = 0; i < a->nby && a->key_stated; i++) /* AGG-5: a stated key is never null */
    if (v[a->by[i]].type == MSGPACK_OBJECT_NIL)
      return rn_err_set(err_of(a), RN_EINVAL, "%s: by column \"%s\" is null, but its key = … says it never is",
                        a->out->name, a->in->schema->cols[a->by[i]].name);
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  for (int i = 0; i < a->nby; i++) {
    if (rn_key_append(&b, &v[a->by[i]]) != 0) { /* NaN: no key holds it */
      msgpack_sbuffer_destroy(&b);
      return rn_err_set(err_of(a), RN_EINVAL, "%s: by column \"%s\" is NaN: NaN has no place in a group key",
                        a->out->name, a->in->schema->cols[a->by[i]].name);
    }
  }
  size_t base = b.size; /* of any length: a long one is stored hashed (rn_agg_group_find) */
  if (rn_oom()) {
    msgpack_sbuffer_destroy(&b);
    return nomem(a);
  }
  int rc = 0;
  *n = 0;
  if (a->w.kind == RN_WINDOW_NONE) {
    if (a->nby == 0) rn_buf_write(&b, GLOBAL_KEY, 1);
    keys[(*n)++] = (gkey){ NULL, b.size, NULL, 0 };
  } else {
    const msgpack_object *t = &v[a->w.slot];
    if (t->type == MSGPACK_OBJECT_NIL)
      rc = rn_err_set(err_of(a), RN_EINVAL, "%s: the event time column \"%s\" is null", a->out->name,
                      a->in->schema->cols[a->w.slot].name);
    else rc = a->time_int ? int_windows(a, as_int(t), &b, base, keys, n) : float_windows(a, as_double(t), &b, base, keys, n);
    msgpack_sbuffer_destroy(&b);
    return rc;
  }
  keys[0].k = (char *)rn_scratch_copy(a->out->p, b.data, b.size);
  msgpack_sbuffer_destroy(&b);
  return keys[0].k ? 0 : nomem(a);
}


/* Moves rem out of and add into group g (either may be NULL), then emits
 * the group's change: one UPDATE, or INSERT / DELETE as it appears or
 * empties (AGG-2). */
int rn_agg_group_apply(rn_aggregate *a, const gkey *whole, const msgpack_object *rv, const char *rrow, size_t rlen,
                       const msgpack_object *av, const char *arow, size_t alen, bool quiet)
{
  gkey found_at = *whole, *g = &found_at;
  MDB_val d;
  uint64_t rid = 0, rows = 0;
  msgpack_object *st = rn_zone_malloc(zone_of(a), sizeof *st * (size_t)(a->naggs ? a->naggs : 1));
  if (!st) return nomem(a);
  bool found;
  int rc = rn_agg_group_find(a, txn_of(a), a->groups_dbi, a->key_inline, g, &d, &found);
  if (rc) return rc;
  group_entry e;
  if (found && !rn_agg_entry_parse(&(MDB_val){ g->slen, g->sk }, &d, &e))
    return rn_err_set(err_of(a), RN_ESTORE, "%s: a group's state could not be decoded", a->out->name);
  if (found) {
    rid = e.rid;
    rows = e.rows;
    if (e.final && !rv) { /* made final under an earlier, smaller grace (or one since removed): late */
      a->final_reached = true;
      return 0;
    }
    if (e.final) /* a stream's events are never taken out */
      return rn_err_set(err_of(a), RN_ESTORE, "%s: a change reached a final window", a->out->name);
  } else if (a->w.has_grace && (rc = rn_agg_window_index_put(a, g))) {
    return rc;
  }
  if (found && rows > 0) { /* a tombstone (0 rows) has no state */
    msgpack_object *stored;
    if ((rc = rn_agg_decode_state(a, &e, &stored))) return rc;
    memcpy(st, stored, sizeof *st * (size_t)a->naggs);
  }
  if (rows == 0)
    for (int i = 0; i < a->naggs && !rc; i++) rc = rn_agg_init_state(a, i, &st[i]);
  const char *old = NULL, *now = NULL;
  size_t old_len = 0, now_len = 0;
  msgpack_object *ext_old = rn_zone_malloc(zone_of(a), sizeof *ext_old * (size_t)(2 * a->naggs + 1));
  if (!ext_old) return nomem(a);
  msgpack_object *ext_new = ext_old + a->naggs;
  for (int i = 0; i < a->naggs; i++) { /* a group with no rows has no values */
    ext_old[i] = rows > 0 ? UNKNOWN : (msgpack_object){ .type = MSGPACK_OBJECT_NIL };
  }
  if (!rc && rows > 0 && !quiet) rc = rn_agg_result_row(a, g, rows, st, ext_old, &old, &old_len);
  if (!rc && rv) {
    rows--;
    for (int i = 0; i < a->naggs && !rc; i++)
      if (!(av && rn_agg_summing(a, i))) rc = rn_agg_step_state(a, i, g, &st[i], rv, rrow, rlen, -1);
  }
  if (!rc && av) {
    rows++;
    for (int i = 0; i < a->naggs && !rc; i++) /* a sum moves its old value out and the new in at once */
      rc = rv && rn_agg_summing(a, i) ? rn_agg_sum_step(a, i, &st[i], &rv[a->aggs[i].slot], &av[a->aggs[i].slot])
                               : rn_agg_step_state(a, i, g, &st[i], av, arow, alen, +1);
  }
  if (!rc && rows > 0 && !quiet) {
    rn_agg_next_extremes(a, ext_old, rv, av, ext_new);
    rc = rn_agg_result_row(a, g, rows, st, ext_new, &now, &now_len);
  }
  if (rc) return rc;
  if (!rid && rows > 0) rid = a->out->next_id++;
  /* |rid|rows|[hashed key]|state| — a group at 0 rows keeps its id (a tombstone). */
  msgpack_sbuffer *b = &a->buf;
  msgpack_sbuffer_clear(b);
  rn_buf_write(b, (const char *)&rid, 8);
  rn_buf_write(b, (const char *)&rows, 8);
  if (g->sk != g->k) { /* hashed: the whole key beside the state (group_entry) */
    uint32_t klen = (uint32_t)g->len;
    rn_buf_write(b, (const char[2]){ (char)0xc1, (char)0xfe }, 2);
    rn_buf_write(b, (const char *)&klen, 4);
    rn_buf_write(b, g->k, g->len);
  }
  msgpack_packer pk;
  msgpack_packer_init(&pk, b, rn_buf_write);
  msgpack_pack_array(&pk, (size_t)a->naggs);
  for (int i = 0; i < a->naggs; i++) {
    if (rows == 0) msgpack_pack_nil(&pk); /* reset at the next first row */
    else msgpack_pack_object(&pk, st[i]);
  }
  d.mv_size = b->size;
  d.mv_data = b->data;
  MDB_val k = { g->slen, g->sk };
  rc = rn_wb_put(&a->out->p->store, txn_of(a), a->groups_dbi, &k, &d, 0);
  if (rc) return store_fail(a, rc);
  if (quiet) return 0;
  rn_change c = { 0, rid, now, now_len, old, old_len };
  if (old && now) {
    if (old_len == now_len && memcmp(old, now, now_len) == 0) return 0;
    c.verb = RN_UPDATE;
  } else if (old) {
    c.verb = RN_DELETE;
  } else if (now) {
    c.verb = RN_INSERT;
  } else {
    return 0;
  }
  return rn_emit(a->out, &c);
}

/* ---- one input change ---- */

static int cmp_gkey(const gkey *x, const gkey *y)
{
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->k, y->k, n);
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Applies input change c (quiet: no emission, a rebuild). */
int rn_agg_apply(rn_aggregate *a, const rn_change *c, bool quiet)
{
  const rn_schema *is = a->in->schema;
  const msgpack_object *ov = c->old ? rn_row_unpack(c->old, c->old_len, is->ncols, zone_of(a)) : NULL;
  const msgpack_object *nv = c->row ? rn_row_unpack(c->row, c->row_len, is->ncols, zone_of(a)) : NULL;
  if ((c->old && !ov) || (c->row && !nv))
    return rn_err_set(err_of(a), RN_ESTORE, "%s: a row of %s could not be decoded", a->out->name, a->in->name);
  gkey *ok = rn_zone_malloc(zone_of(a), sizeof *ok * WINDOW_KEYS);
  gkey *nk = rn_zone_malloc(zone_of(a), sizeof *nk * WINDOW_KEYS);
  int no = 0, nn = 0, rc = 0;
  if (!ok || !nk) return nomem(a);
  if (ov) rc = rn_agg_group_keys(a, ov, ok, &no);
  if (!rc && nv) rc = rn_agg_group_keys(a, nv, nk, &nn);
  int windows = nn;
  if (!rc && nv && !ov && a->w.has_grace) rc = rn_agg_drop_late(a, nv, nk, &nn);
  a->final_reached = false;
  /* Old-only groups first, then groups the row stays in, then new-only
   * groups (AGG-2); within each, ascending. */
  for (int i = 0; i < no && !rc; i++) {
    bool stays = false;
    for (int q = 0; q < nn && !stays; q++) stays = cmp_gkey(&ok[i], &nk[q]) == 0;
    if (!stays) rc = rn_agg_group_apply(a, &ok[i], ov, c->old, c->old_len, NULL, NULL, 0, quiet);
  }
  for (int i = 0; i < nn && !rc; i++) {
    bool stays = false;
    for (int q = 0; q < no && !stays; q++) stays = cmp_gkey(&nk[i], &ok[q]) == 0;
    if (stays) rc = rn_agg_group_apply(a, &nk[i], ov, c->old, c->old_len, nv, c->row, c->row_len, quiet);
  }
  for (int i = 0; i < nn && !rc; i++) {
    bool stays = false;
    for (int q = 0; q < no && !stays; q++) stays = cmp_gkey(&nk[i], &ok[q]) == 0;
    if (!stays) rc = rn_agg_group_apply(a, &nk[i], NULL, NULL, 0, nv, c->row, c->row_len, quiet);
  }
  if (!rc && a->final_reached && nn == windows) rc = rn_agg_counter_add(a, LATE_KEY, 1); /* once an event */
  return rc;
}

int rn_aggregate_apply(rn_rel *r, const rn_change *c)
{
  return rn_agg_apply(r->ctx, c, false);
}

/* The operator's apply: the change's relation is the aggregate's one input. */
int rn_agg_operator_apply(rn_rel *r, rn_rel *from, const rn_change *c)
{
  (void)from;
  return rn_agg_apply(r->ctx, c, false);
}

