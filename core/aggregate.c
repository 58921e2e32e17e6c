/* aggregate.c — grouped aggregates and windows (the state is drawn in
 * aggregate.h). */
#include "aggregate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsum.h"
#include "key.h"
#include "row.h"
#include "scan.h"
#include "snapshot.h"

#define MAX_WINDOWS 1024            /* windows one event may fall in */
static const char GLOBAL_KEY[1] = { 0x00 };
static const char MAX_TS_KEY[1] = { (char)0xff };  /* the largest event time seen */
static const char LATE_KEY[1] = { (char)0xfe };    /* events dropped as late */
static const char FINAL_KEY[1] = { (char)0xfd };   /* windows made final (their state dropped) */
static const char FINAL_MARK = (char)0xc1;         /* never a msgpack byte: a final window's value */
/* |u64 0|u64 0|u8 format|: sums are exact (fsum.h) from format 2 on. Drawn
 * as an empty group so that older versions pass over it. */
static const char FORMAT_KEY[1] = { (char)0xfc };
enum { STATE_FORMAT = 2 };

/* One-byte keys other than the global group's are counters, not groups. */
static bool reserved(const MDB_val *k)
{
  return k->mv_size == 1 && ((const unsigned char *)k->mv_data)[0] >= 0xfc;
}

/* A float sum by its stored form: a group's state is read for its old
 * result, stepped and read for its new one, so each is decoded once. */
struct fsum_seen {
  uint32_t len;                   /* 0: none yet */
  char enc[RN_FSUM_MAX_ENCODED];  /* the stored form */
  rn_fsum f;                      /* what it decodes to */
};

typedef struct rn_aggregate {
  rn_rel *out, *in;
  int nby;
  int *by;                /* input slots of the by columns */
  rn_window w;
  bool time_int;          /* the time column is an int: integer window math */
  int naggs;
  rn_agg_spec *aggs;      /* names owned */
  rn_agg_fns fns;
  bool *counts_owner;     /* per aggregate: the min/max that keeps its column's value counts */
  struct fsum_seen *fseen; /* per aggregate: the float sum read or written last */
  MDB_dbi groups_dbi, values_dbi, windows_dbi; /* windows_dbi: with grace only */
  uint64_t next_final_txn;  /* the store's txn_serial next_final was worked out in (0: none) */
  double next_final;        /* the largest event time below which no open window is final */
  MDB_txn *reading;       /* a scan's read transaction, or NULL: the group's */
  msgpack_sbuffer buf;    /* scratch: a group's value */
  msgpack_sbuffer state, answer; /* scratch: a user aggregate's state in, its answer out */
} rn_aggregate;

typedef struct gkey {
  char *k;                /* scratch */
  size_t len;
} gkey;

/* Where the aggregate reads and writes: the group's transaction, or a scan's. */
static MDB_txn *txn_of(rn_aggregate *a) { return a->reading ? a->reading : a->out->p->store.wtxn; }
static rn_err *err_of(rn_aggregate *a) { return &a->out->p->err; }
static msgpack_zone *zone_of(rn_aggregate *a) { return &a->out->p->scratch; }
static int nomem(rn_aggregate *a) { return rn_err_set(err_of(a), RN_ENOMEM, "out of memory"); }
static int store_fail(rn_aggregate *a, int rc) { return rn_store_fail(err_of(a), rc, a->out->name); }

static int64_t floor_div(int64_t x, int64_t y)
{
  int64_t q = x / y;
  return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}

static msgpack_object num_obj(rn_aggregate *a, double d, int64_t i)
{
  msgpack_object o;
  if (a->time_int) {
    if (i >= 0) { o.type = MSGPACK_OBJECT_POSITIVE_INTEGER; o.via.u64 = (uint64_t)i; }
    else { o.type = MSGPACK_OBJECT_NEGATIVE_INTEGER; o.via.i64 = i; }
  } else {
    o.type = MSGPACK_OBJECT_FLOAT64;
    o.via.f64 = d;
  }
  return o;
}

static double as_double(const msgpack_object *o)
{
  return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (double)o->via.u64
       : o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? (double)o->via.i64 : o->via.f64;
}

static int64_t as_int(const msgpack_object *o)
{
  return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)o->via.u64 : o->via.i64;
}

/* The group keys a row belongs to, ascending: one without a window, the
 * windows holding its event time with one. */
static int group_keys(rn_aggregate *a, const msgpack_object *v, gkey *keys, int *n)
{
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  for (int i = 0; i < a->nby; i++) rn_key_append(&b, &v[a->by[i]]);
  size_t base = b.size;
  int rc = 0;
  *n = 0;
  if (a->w.kind == RN_WINDOW_NONE) {
    if (a->nby == 0) rn_buf_write(&b, GLOBAL_KEY, 1);
    keys[(*n)++] = (gkey){ NULL, b.size };
  } else {
    const msgpack_object *t = &v[a->w.slot];
    if (t->type == MSGPACK_OBJECT_NIL) {
      rc = rn_err_set(err_of(a), RN_EINVAL, "%s: the event time column \"%s\" is null", a->out->name,
                      a->in->schema->cols[a->w.slot].name);
    } else if (a->time_int) {
      int64_t ts = as_int(t), size = (int64_t)a->w.size, step = (int64_t)a->w.step;
      for (int64_t k = floor_div(ts - size, step) + 1; k <= floor_div(ts, step) && !rc; k++) {
        b.size = base;
        msgpack_object s = num_obj(a, 0, k * step);
        rn_key_append(&b, &s);
        keys[*n].len = b.size;
        keys[*n].k = (char *)rn_scratch_copy(a->out->p, b.data, b.size);
        if (!keys[(*n)++].k) rc = nomem(a);
      }
    } else {
      double ts = as_double(t);
      for (double k = floor((ts - a->w.size) / a->w.step) + 1; k <= floor(ts / a->w.step) && !rc; k++) {
        if (k * a->w.step + a->w.size <= ts) continue; /* float rounding at the edge */
        b.size = base;
        msgpack_object s = num_obj(a, k * a->w.step, 0);
        rn_key_append(&b, &s);
        keys[*n].len = b.size;
        keys[*n].k = (char *)rn_scratch_copy(a->out->p, b.data, b.size);
        if (!keys[(*n)++].k) rc = nomem(a);
      }
    }
    msgpack_sbuffer_destroy(&b);
    return rc;
  }
  keys[0].k = (char *)rn_scratch_copy(a->out->p, b.data, b.size);
  msgpack_sbuffer_destroy(&b);
  return keys[0].k ? 0 : nomem(a);
}

/* ---- per-aggregate state ----
 *
 * count(col), min, max: |count of non-null values|.
 * sum of an int column: |[sum, count]|, the sum an int64 (it must fit).
 * sum of a float column, avg: |[bin fsum, count]|, the exact sum in fsum.h's
 * stored form (a state written before fsum holds a float64 sum there
 * instead: it is read as that exact value, see fsum_get). */

/* A sum kept as an int64: sum of an int column. */
static bool int_sum(const rn_aggregate *a, int i)
{
  return a->aggs[i].kind == RN_AGG_SUM && a->in->schema->cols[a->aggs[i].slot].type == RN_T_INT;
}

/* The exact sum aggregate i's state o holds. */
static int fsum_get(rn_aggregate *a, int i, const msgpack_object *o, rn_fsum *f)
{
  struct fsum_seen *seen = &a->fseen[i];
  if (o->type == MSGPACK_OBJECT_BIN && o->via.bin.size == seen->len &&
      memcmp(o->via.bin.ptr, seen->enc, seen->len) == 0) {
    *f = seen->f;
    return 0;
  }
  if (o->type == MSGPACK_OBJECT_BIN && o->via.bin.size <= sizeof seen->enc &&
      rn_fsum_decode(f, o->via.bin.ptr, o->via.bin.size) == 0) {
    memcpy(seen->enc, o->via.bin.ptr, o->via.bin.size);
    seen->len = o->via.bin.size;
    seen->f = *f;
    return 0;
  }
  if (o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32) { /* an old state */
    rn_fsum_init(f);
    rn_fsum_add(f, o->via.f64, +1);
    return 0;
  }
  return rn_err_set(err_of(a), RN_ESTORE, "%s: a group's sum could not be decoded", a->out->name);
}

/* Stores f's stored form into aggregate i's state o (scratch). */
static int fsum_put(rn_aggregate *a, int i, const rn_fsum *f, msgpack_object *o)
{
  struct fsum_seen *seen = &a->fseen[i];
  size_t len = rn_fsum_encode(f, seen->enc);
  seen->len = (uint32_t)len;
  seen->f = *f;
  const char *copy = rn_scratch_copy(a->out->p, seen->enc, len);
  if (!copy) return nomem(a);
  o->type = MSGPACK_OBJECT_BIN;
  o->via.bin.ptr = copy;
  o->via.bin.size = (uint32_t)len;
  return 0;
}

static int init_state(rn_aggregate *a, int i, msgpack_object *st)
{
  const rn_agg_spec *g = &a->aggs[i];
  switch (g->kind) {
  case RN_AGG_COUNT: st->type = MSGPACK_OBJECT_NIL; return 0;
  case RN_AGG_COUNT_COL: case RN_AGG_MIN: case RN_AGG_MAX:
    st->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
    st->via.u64 = 0;
    return 0;
  case RN_AGG_SUM: case RN_AGG_AVG: {
    msgpack_object *pair = rn_zone_malloc(zone_of(a), 2 * sizeof *pair);
    if (!pair) return nomem(a);
    pair[0].type = MSGPACK_OBJECT_POSITIVE_INTEGER;
    pair[0].via.u64 = 0;
    if (!int_sum(a, i)) {
      rn_fsum empty;
      rn_fsum_init(&empty);
      int rc = fsum_put(a, i, &empty, &pair[0]);
      if (rc) return rc;
    }
    pair[1].type = MSGPACK_OBJECT_POSITIVE_INTEGER;
    pair[1].via.u64 = 0;
    st->type = MSGPACK_OBJECT_ARRAY;
    st->via.array.size = 2;
    st->via.array.ptr = pair;
    return 0;
  }
  case RN_AGG_USER: {
    msgpack_sbuffer b;
    msgpack_sbuffer_init(&b);
    int rc = a->fns.init(a->fns.ctx, i, &b, err_of(a));
    size_t off = 0;
    char *copy = rc ? NULL : (char *)rn_scratch_copy(a->out->p, b.data, b.size);
    if (!rc && (!copy || rn_unpack(copy, b.size, &off, zone_of(a), st) != MSGPACK_UNPACK_SUCCESS))
      rc = nomem(a);
    msgpack_sbuffer_destroy(&b);
    return rc;
  }
  }
  return 0;
}

static void set_count(msgpack_object *o, int64_t n)
{
  o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
  o->via.u64 = (uint64_t)n;
}

/* |group key|u8 column|value| -> count, moved by delta. min and max of one
 * column share the counts. */
static int value_count(rn_aggregate *a, const gkey *g, int i, const msgpack_object *v, int delta)
{
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  rn_buf_write(&b, g->k, g->len);
  char idx = (char)a->aggs[i].slot;
  rn_buf_write(&b, &idx, 1);
  int rc = rn_key_append(&b, v) ? rn_err_set(err_of(a), RN_EINVAL, "%s: NaN has no place among min and max", a->out->name) : 0;
  if (!rc && b.size > 511)
    rc = rn_err_set(err_of(a), RN_EINVAL, "%s: %s: a value and its group key are longer than 511 bytes",
                    a->out->name, a->aggs[i].name);
  if (!rc) {
    MDB_val k = { b.size, b.data }, d;
    uint64_t count = 0;
    int mrc = mdb_get(txn_of(a), a->values_dbi, &k, &d);
    if (mrc == 0) memcpy(&count, d.mv_data, 8);
    else if (mrc != MDB_NOTFOUND) rc = store_fail(a, mrc);
    if (!rc) {
      count = (uint64_t)((int64_t)count + delta);
      if (count == 0) mrc = mdb_del(txn_of(a), a->values_dbi, &k, NULL);
      else { d.mv_size = 8; d.mv_data = &count; mrc = mdb_put(txn_of(a), a->values_dbi, &k, &d, 0); }
      if (mrc && mrc != MDB_NOTFOUND) rc = store_fail(a, mrc);
    }
  }
  msgpack_sbuffer_destroy(&b);
  return rc;
}

/* Packs a user aggregate's state for its step or result function and
 * readies the answer buffer. */
static void user_call_buffers(rn_aggregate *a, const msgpack_object *st)
{
  msgpack_sbuffer_clear(&a->state);
  msgpack_sbuffer_clear(&a->answer);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &a->state, rn_buf_write);
  msgpack_pack_object(&pk, *st);
}

/* Moves the value rx (a row's, or NULL) out of a sum or avg state and ax
 * (or NULL) into it, in one step: an int sum fails only when the result
 * leaves int64, not on the way (nulls are skipped, AGG-1). */
static int sum_step(rn_aggregate *a, int i, msgpack_object *st, const msgpack_object *rx, const msgpack_object *ax)
{
  msgpack_object *sum = &st->via.array.ptr[0], *n = &st->via.array.ptr[1];
  if (rx && rx->type == MSGPACK_OBJECT_NIL) rx = NULL;
  if (ax && ax->type == MSGPACK_OBJECT_NIL) ax = NULL;
  set_count(n, as_int(n) - (rx != NULL) + (ax != NULL));
  if (int_sum(a, i)) {
    __int128 r = (__int128)as_int(sum) - (rx ? as_int(rx) : 0) + (ax ? as_int(ax) : 0);
    if (r > INT64_MAX || r < INT64_MIN)
      return rn_err_set(err_of(a), RN_EINVAL, "%s: sum \"%s\" of column \"%s\" overflows 64 bits", a->out->name,
                        a->aggs[i].name, a->in->schema->cols[a->aggs[i].slot].name);
    if (r >= 0) { sum->type = MSGPACK_OBJECT_POSITIVE_INTEGER; sum->via.u64 = (uint64_t)r; }
    else { sum->type = MSGPACK_OBJECT_NEGATIVE_INTEGER; sum->via.i64 = (int64_t)r; }
    return 0;
  }
  rn_fsum f;
  int rc = fsum_get(a, i, sum, &f);
  if (rc) return rc;
  bool ints = a->in->schema->cols[a->aggs[i].slot].type == RN_T_INT; /* avg of ints: summed exactly too */
  if (rx && ints) rn_fsum_add_int(&f, as_int(rx), -1);
  else if (rx) rn_fsum_add(&f, as_double(rx), -1);
  if (ax && ints) rn_fsum_add_int(&f, as_int(ax), +1);
  else if (ax) rn_fsum_add(&f, as_double(ax), +1);
  return fsum_put(a, i, &f, sum);
}

static bool summing(const rn_aggregate *a, int i)
{
  return a->aggs[i].kind == RN_AGG_SUM || a->aggs[i].kind == RN_AGG_AVG;
}

/* Moves row's contribution in or out of one aggregate's state. */
static int step_state(rn_aggregate *a, int i, const gkey *g, msgpack_object *st, const msgpack_object *v,
                      const char *row, size_t rlen, int delta)
{
  const rn_agg_spec *s = &a->aggs[i];
  if (s->kind == RN_AGG_COUNT) return 0;
  if (s->kind == RN_AGG_USER) {
    if (delta < 0 && !a->fns.can_remove(a->fns.ctx, i))
      return rn_err_set(err_of(a), RN_EINVAL, "%s: aggregate \"%s\" has no remove function, so it cannot follow deletes and updates",
                        a->out->name, s->name);
    user_call_buffers(a, st);
    int rc = a->fns.step(a->fns.ctx, i, delta > 0, a->state.data, a->state.size, a->in, row, rlen,
                         &a->answer, err_of(a));
    size_t off = 0;
    char *copy = rc ? NULL : (char *)rn_scratch_copy(a->out->p, a->answer.data, a->answer.size);
    if (!rc && (!copy || rn_unpack(copy, a->answer.size, &off, zone_of(a), st) != MSGPACK_UNPACK_SUCCESS))
      rc = nomem(a);
    return rc;
  }
  const msgpack_object *x = &v[s->slot];
  if (x->type == MSGPACK_OBJECT_NIL) return 0; /* nulls are skipped (AGG-1) */
  switch (s->kind) {
  case RN_AGG_COUNT_COL:
    set_count(st, as_int(st) + delta);
    return 0;
  case RN_AGG_MIN: case RN_AGG_MAX:
    set_count(st, as_int(st) + delta);
    return a->counts_owner[i] ? value_count(a, g, i, x, delta) : 0;
  case RN_AGG_SUM: case RN_AGG_AVG:
    return delta < 0 ? sum_step(a, i, st, x, NULL) : sum_step(a, i, st, NULL, x);
  default:
    return 0;
  }
}

/* The extreme value of a min or max in a group (absent: nil). */
static int extreme(rn_aggregate *a, const gkey *g, int i, bool max, msgpack_object *out)
{
  out->type = MSGPACK_OBJECT_NIL;
  char prefix[g->len + 1];
  int col = a->aggs[i].slot;
  memcpy(prefix, g->k, g->len);
  prefix[g->len] = (char)(max ? col + 1 : col);
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn_of(a), a->values_dbi, &cur);
  if (rc) return store_fail(a, rc);
  MDB_val k = { g->len + 1, prefix }, d;
  rc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE);
  if (max) rc = rc == 0 ? mdb_cursor_get(cur, &k, &d, MDB_PREV) : mdb_cursor_get(cur, &k, &d, MDB_LAST);
  prefix[g->len] = (char)col;
  if (rc == 0 && k.mv_size > g->len + 1 && memcmp(k.mv_data, prefix, g->len + 1) == 0) {
    if (rn_key_decode((const char *)k.mv_data + g->len + 1, k.mv_size - g->len - 1, out, 1, zone_of(a)) != 1)
      rc = rn_err_set(err_of(a), RN_ESTORE, "%s: a stored value could not be decoded", a->out->name);
  } else if (rc == MDB_NOTFOUND || rc == 0) {
    rc = 0;
  } else {
    rc = store_fail(a, rc);
  }
  mdb_cursor_close(cur);
  return rc;
}

/* An extreme not known yet: result_row looks it up. */
static const msgpack_object UNKNOWN = { .type = MSGPACK_OBJECT_EXT, .via.ext = { 0x7e, 0, NULL } };

static bool unknown(const msgpack_object *v)
{
  return v->type == MSGPACK_OBJECT_EXT && v->via.ext.type == 0x7e;
}

/* The group's result row: by values, window, aggregates. ext holds each
 * min/max's value where known (UNKNOWN: looked up, and filled in). */
static int result_row(rn_aggregate *a, const gkey *g, uint64_t rows, const msgpack_object *st, msgpack_object *ext,
                      const char **row, size_t *len)
{
  const rn_schema *os = a->out->schema;
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &b, rn_buf_write);
  msgpack_pack_array(&pk, (size_t)os->ncols);
  int nkey = a->nby + (a->w.kind != RN_WINDOW_NONE);
  msgpack_object kv[nkey ? nkey : 1];
  int rc = 0;
  if (nkey && rn_key_decode(g->k, g->len, kv, nkey, zone_of(a)) != nkey)
    rc = rn_err_set(err_of(a), RN_ESTORE, "%s: a group key could not be decoded", a->out->name);
  for (int i = 0; i < a->nby && !rc; i++) {
    msgpack_object v = kv[i];
    if (v.type == MSGPACK_OBJECT_BIN && a->in->schema->cols[a->by[i]].type == RN_T_STRING) v.type = MSGPACK_OBJECT_STR;
    msgpack_pack_object(&pk, v);
  }
  if (!rc && a->w.kind != RN_WINDOW_NONE) {
    const msgpack_object *s = &kv[a->nby];
    msgpack_pack_object(&pk, *s);
    msgpack_object e = num_obj(a, as_double(s) + a->w.size, a->time_int ? as_int(s) + (int64_t)a->w.size : 0);
    msgpack_pack_object(&pk, e);
  }
  for (int i = 0; i < a->naggs && !rc; i++) {
    const msgpack_object *x = &st[i];
    switch (a->aggs[i].kind) {
    case RN_AGG_COUNT: msgpack_pack_uint64(&pk, rows); break;
    case RN_AGG_COUNT_COL: msgpack_pack_object(&pk, *x); break;
    case RN_AGG_SUM: case RN_AGG_AVG: {
      const msgpack_object *sum = &x->via.array.ptr[0];
      int64_t n = as_int(&x->via.array.ptr[1]);
      rn_fsum f;
      if (n <= 0) msgpack_pack_nil(&pk);
      else if (int_sum(a, i)) msgpack_pack_object(&pk, *sum);
      else if (!(rc = fsum_get(a, i, sum, &f)))   /* rounded once: the sum, or the sum / n */
        msgpack_pack_double(&pk, a->aggs[i].kind == RN_AGG_SUM ? rn_fsum_value(&f) : rn_fsum_div(&f, (uint64_t)n));
      break;
    }
    case RN_AGG_MIN: case RN_AGG_MAX: {
      msgpack_object v = ext[i];
      if (unknown(&v)) rc = extreme(a, g, i, a->aggs[i].kind == RN_AGG_MAX, &v);
      if (!rc && v.type == MSGPACK_OBJECT_BIN && a->in->schema->cols[a->aggs[i].slot].type == RN_T_STRING)
        v.type = MSGPACK_OBJECT_STR;
      ext[i] = v;
      if (!rc) msgpack_pack_object(&pk, v);
      break;
    }
    case RN_AGG_USER: {
      user_call_buffers(a, x);
      rc = a->fns.result(a->fns.ctx, i, a->state.data, a->state.size, &a->answer, err_of(a));
      if (!rc) rn_buf_write(&b, a->answer.data, a->answer.size);
      break;
    }
    }
  }
  if (!rc) {
    *row = rn_scratch_copy(a->out->p, b.data, b.size);
    *len = b.size;
    if (!*row) rc = nomem(a);
  }
  msgpack_sbuffer_destroy(&b);
  return rc;
}

/* Orders two values of one column (normalized: the same type). */
static int cmp_value(const msgpack_object *x, const msgpack_object *y)
{
  switch (x->type) {
  case MSGPACK_OBJECT_POSITIVE_INTEGER: case MSGPACK_OBJECT_NEGATIVE_INTEGER: {
    int64_t p = as_int(x), q = as_int(y);
    return (p > q) - (p < q);
  }
  case MSGPACK_OBJECT_FLOAT32: case MSGPACK_OBJECT_FLOAT64:
    return (x->via.f64 > y->via.f64) - (x->via.f64 < y->via.f64);
  case MSGPACK_OBJECT_BOOLEAN:
    return (int)x->via.boolean - (int)y->via.boolean;
  default: { /* strings and bytes, bytewise as their keys sort */
    uint32_t n = x->via.str.size < y->via.str.size ? x->via.str.size : y->via.str.size;
    int c = n ? memcmp(x->via.str.ptr, y->via.str.ptr, n) : 0;
    return c ? (c > 0) - (c < 0) : (x->via.str.size > y->via.str.size) - (x->via.str.size < y->via.str.size);
  }
  }
}

/* The extremes after a change, from those before it: the same, or the
 * added value if it goes beyond; unknown (looked up) only when the removed
 * value was the extreme. */
static void next_extremes(const rn_aggregate *a, const msgpack_object *before, const msgpack_object *rv,
                          const msgpack_object *av, msgpack_object *after)
{
  for (int i = 0; i < a->naggs; i++) {
    const rn_agg_spec *s = &a->aggs[i];
    after[i] = UNKNOWN;
    if (s->kind != RN_AGG_MIN && s->kind != RN_AGG_MAX) continue;
    msgpack_object cur = before[i];
    if (unknown(&cur)) continue;
    if (rv && rv[s->slot].type != MSGPACK_OBJECT_NIL && cur.type != MSGPACK_OBJECT_NIL &&
        cmp_value(&rv[s->slot], &cur) == 0)
      continue; /* the extreme left (or one of its copies did): look it up */
    if (av && av[s->slot].type != MSGPACK_OBJECT_NIL) {
      int c = cur.type == MSGPACK_OBJECT_NIL ? -1 : cmp_value(&av[s->slot], &cur);
      if (s->kind == RN_AGG_MAX ? c > 0 || cur.type == MSGPACK_OBJECT_NIL : c < 0) cur = av[s->slot];
    }
    after[i] = cur;
  }
}

/* ---- final windows (windowed streams with grace) ----
 *
 * "aw:" |encoded window start|group key| -> |group key| lists the windows
 * not final yet, oldest first. When the largest event time passes a
 * window's end plus grace, no event can reach it again (AGG-3): its value
 * counts go and its entry in "ag:" becomes |rid|rows|0xc1|result row|, the
 * row it will always have. State then grows with the open windows only. */

/* The aggregates' states in a group entry |rid|rows|state|, decoded into
 * scratch. */
static int decode_state(rn_aggregate *a, const MDB_val *d, msgpack_object **st)
{
  msgpack_object arr;
  size_t off = 0;
  const char *copy = rn_scratch_copy(a->out->p, (const char *)d->mv_data + 16, d->mv_size - 16);
  if (!copy || rn_unpack(copy, d->mv_size - 16, &off, zone_of(a), &arr) != MSGPACK_UNPACK_SUCCESS ||
      arr.type != MSGPACK_OBJECT_ARRAY || arr.via.array.size != (uint32_t)a->naggs)
    return rn_err_set(err_of(a), RN_ESTORE, "%s: a group's state could not be decoded", a->out->name);
  *st = arr.via.array.ptr;
  return 0;
}

static int window_start_of(rn_aggregate *a, const char *g, size_t len, double *start)
{
  int nk = a->nby + 1;
  msgpack_object kv[nk];
  if (rn_key_decode(g, len, kv, nk, zone_of(a)) != nk)
    return rn_err_set(err_of(a), RN_ESTORE, "%s: a group key could not be decoded", a->out->name);
  *start = as_double(&kv[a->nby]);
  return 0;
}

static bool window_final(const rn_aggregate *a, double start, double max_ts)
{
  return max_ts >= start + a->w.size + a->w.grace;
}

static int window_index_put(rn_aggregate *a, const gkey *g)
{
  double start;
  int rc = window_start_of(a, g->k, g->len, &start);
  if (rc) return rc;
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  msgpack_object s = num_obj(a, start, (int64_t)start);
  rn_key_append(&b, &s);
  rn_buf_write(&b, g->k, g->len);
  MDB_val k = { b.size, b.data }, d = { g->len, g->k };
  rc = b.size > 511 ? 0 : mdb_put(txn_of(a), a->windows_dbi, &k, &d, 0); /* too long: stays open */
  double at = start + a->w.size + a->w.grace;
  if (!rc && b.size <= 511 && at < a->next_final) a->next_final = at;
  msgpack_sbuffer_destroy(&b);
  return rc ? store_fail(a, rc) : 0;
}

static int counter_add(rn_aggregate *a, const char *key, double by);

static int result_row(rn_aggregate *a, const gkey *g, uint64_t rows, const msgpack_object *st, msgpack_object *ext,
                      const char **row, size_t *len);

/* Makes window g final: its row is stored as it is, its state dropped. */
static int finalize_window(rn_aggregate *a, const gkey *g)
{
  MDB_val k = { g->len, g->k }, d;
  int rc = mdb_get(txn_of(a), a->groups_dbi, &k, &d);
  if (rc) return rc == MDB_NOTFOUND ? 0 : store_fail(a, rc);
  uint64_t head[2];
  memcpy(head, d.mv_data, 16);
  msgpack_object *st;
  if ((rc = decode_state(a, &d, &st))) return rc;
  msgpack_object ext[a->naggs ? a->naggs : 1];
  for (int i = 0; i < a->naggs; i++) ext[i] = UNKNOWN;
  const char *row;
  size_t len;
  if ((rc = result_row(a, g, head[1], st, ext, &row, &len))) return rc;
  MDB_cursor *cur; /* the value counts under |group key| */
  if ((rc = mdb_cursor_open(txn_of(a), a->values_dbi, &cur))) return store_fail(a, rc);
  for (;;) { /* seek again after each delete: LMDB's cursor may sit past a page's end */
    MDB_val vk = { g->len, g->k }, vd;
    rc = mdb_cursor_get(cur, &vk, &vd, MDB_SET_RANGE);
    if (rc || vk.mv_size <= g->len || memcmp(vk.mv_data, g->k, g->len) != 0) break;
    if ((rc = mdb_cursor_del(cur, 0))) break;
  }
  mdb_cursor_close(cur);
  if (rc && rc != MDB_NOTFOUND) return store_fail(a, rc);
  msgpack_sbuffer *b = &a->buf;
  msgpack_sbuffer_clear(b);
  rn_buf_write(b, (const char *)head, 16);
  rn_buf_write(b, &FINAL_MARK, 1);
  rn_buf_write(b, row, len);
  d = (MDB_val){ b->size, b->data };
  rc = mdb_put(txn_of(a), a->groups_dbi, &k, &d, 0);
  return rc ? store_fail(a, rc) : 0;
}

/* Makes final, oldest first, every window max_ts has passed by its grace.
 * Within one LMDB transaction next_final says when the oldest open window
 * becomes final, so most events skip the index; a new transaction (a
 * commit, or a rollback that may bring windows back) works it out again. */
static int finalize_windows(rn_aggregate *a, double max_ts)
{
  uint64_t serial = a->out->p->store.txn_serial;
  if (a->next_final_txn == serial && max_ts < a->next_final) return 0;
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn_of(a), a->windows_dbi, &cur);
  if (rc) return store_fail(a, rc);
  MDB_val k, d;
  int err = 0, made = 0; /* err is runnel's error; rc stays LMDB's */
  double next = HUGE_VAL;
  while (!err && (rc = mdb_cursor_get(cur, &k, &d, MDB_FIRST)) == 0) {
    int nk = a->nby + 2; /* the start, then the group key's values */
    msgpack_object kv[nk];
    if (rn_key_decode(k.mv_data, k.mv_size, kv, nk, zone_of(a)) != nk) {
      err = rn_err_set(err_of(a), RN_ESTORE, "%s: a window index key could not be decoded", a->out->name);
      break;
    }
    if (!window_final(a, as_double(&kv[0]), max_ts)) {
      next = as_double(&kv[0]) + a->w.size + a->w.grace;
      break;
    }
    gkey g = { (char *)rn_scratch_copy(a->out->p, d.mv_data, d.mv_size), d.mv_size };
    if (!g.k) err = nomem(a);
    else if ((rc = mdb_cursor_del(cur, 0))) break;
    else if (!(err = finalize_window(a, &g))) made++;
  }
  mdb_cursor_close(cur);
  if (!err && made) err = counter_add(a, FINAL_KEY, made);
  if (err) return err;
  if (rc != 0 && rc != MDB_NOTFOUND) return store_fail(a, rc);
  a->next_final_txn = serial;
  a->next_final = next;
  return 0;
}

/* Moves rem out of and add into group g (either may be NULL), then emits
 * the group's change: one UPDATE, or INSERT / DELETE as it appears or
 * empties (AGG-2). */
static int group_apply(rn_aggregate *a, const gkey *g, const msgpack_object *rv, const char *rrow, size_t rlen,
                       const msgpack_object *av, const char *arow, size_t alen, bool quiet)
{
  MDB_val k = { g->len, g->k }, d;
  uint64_t rid = 0, rows = 0;
  msgpack_object *st = rn_zone_malloc(zone_of(a), sizeof *st * (size_t)(a->naggs ? a->naggs : 1));
  if (!st) return nomem(a);
  int rc = mdb_get(txn_of(a), a->groups_dbi, &k, &d);
  if (rc == 0) {
    memcpy(&rid, d.mv_data, 8);
    memcpy(&rows, (char *)d.mv_data + 8, 8);
    if (d.mv_size > 16 && ((const char *)d.mv_data)[16] == FINAL_MARK) /* drop_late keeps events out */
      return rn_err_set(err_of(a), RN_ESTORE, "%s: a change reached a final window", a->out->name);
  } else if (rc == MDB_NOTFOUND && a->w.has_grace) {
    if ((rc = window_index_put(a, g))) return rc;
    rc = MDB_NOTFOUND;
  }
  if (rc == 0 && rows > 0) { /* a tombstone (0 rows) has no state */
    msgpack_object *stored;
    if ((rc = decode_state(a, &d, &stored))) return rc;
    memcpy(st, stored, sizeof *st * (size_t)a->naggs);
  } else if (rc != 0 && rc != MDB_NOTFOUND) {
    return store_fail(a, rc);
  }
  rc = 0;
  if (rows == 0)
    for (int i = 0; i < a->naggs && !rc; i++) rc = init_state(a, i, &st[i]);
  const char *old = NULL, *now = NULL;
  size_t old_len = 0, now_len = 0;
  msgpack_object *ext_old = rn_zone_malloc(zone_of(a), sizeof *ext_old * (size_t)(2 * a->naggs + 1));
  if (!ext_old) return nomem(a);
  msgpack_object *ext_new = ext_old + a->naggs;
  for (int i = 0; i < a->naggs; i++) { /* a group with no rows has no values */
    ext_old[i] = rows > 0 ? UNKNOWN : (msgpack_object){ .type = MSGPACK_OBJECT_NIL };
  }
  if (!rc && rows > 0 && !quiet) rc = result_row(a, g, rows, st, ext_old, &old, &old_len);
  if (!rc && rv) {
    rows--;
    for (int i = 0; i < a->naggs && !rc; i++)
      if (!(av && summing(a, i))) rc = step_state(a, i, g, &st[i], rv, rrow, rlen, -1);
  }
  if (!rc && av) {
    rows++;
    for (int i = 0; i < a->naggs && !rc; i++) /* a sum moves its old value out and the new in at once */
      rc = rv && summing(a, i) ? sum_step(a, i, &st[i], &rv[a->aggs[i].slot], &av[a->aggs[i].slot])
                               : step_state(a, i, g, &st[i], av, arow, alen, +1);
  }
  if (!rc && rows > 0 && !quiet) {
    next_extremes(a, ext_old, rv, av, ext_new);
    rc = result_row(a, g, rows, st, ext_new, &now, &now_len);
  }
  if (rc) return rc;
  if (!rid && rows > 0) rid = a->out->next_id++;
  /* |rid|rows|state| — a group at 0 rows keeps its id (a tombstone). */
  msgpack_sbuffer *b = &a->buf;
  msgpack_sbuffer_clear(b);
  rn_buf_write(b, (const char *)&rid, 8);
  rn_buf_write(b, (const char *)&rows, 8);
  msgpack_packer pk;
  msgpack_packer_init(&pk, b, rn_buf_write);
  msgpack_pack_array(&pk, (size_t)a->naggs);
  for (int i = 0; i < a->naggs; i++) {
    if (rows == 0) msgpack_pack_nil(&pk); /* reset at the next first row */
    else msgpack_pack_object(&pk, st[i]);
  }
  d.mv_size = b->size;
  d.mv_data = b->data;
  rc = mdb_put(txn_of(a), a->groups_dbi, &k, &d, 0);
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

/* ---- lateness (windowed streams with grace) ---- */

static int reserved_get(rn_aggregate *a, const char *key, double *v, bool *found)
{
  MDB_val k = { 1, (void *)key }, d;
  int rc = mdb_get(txn_of(a), a->groups_dbi, &k, &d);
  *found = rc == 0;
  if (rc == 0) memcpy(v, d.mv_data, sizeof *v);
  return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_fail(a, rc);
}

static int reserved_put(rn_aggregate *a, const char *key, double v)
{
  MDB_val k = { 1, (void *)key }, d = { sizeof v, &v };
  int rc = mdb_put(txn_of(a), a->groups_dbi, &k, &d, 0);
  return rc ? store_fail(a, rc) : 0;
}

static int counter_add(rn_aggregate *a, const char *key, double by)
{
  double v = 0;
  bool found;
  int rc = reserved_get(a, key, &v, &found);
  return rc ? rc : reserved_put(a, key, v + by);
}

/* Drops the windows of an event that are final (AGG-3); keeps the largest
 * event time seen and the late count in the aggregate's own database, so a
 * rollback rolls them back too. */
static int drop_late(rn_aggregate *a, const msgpack_object *v, gkey *keys, int *n)
{
  double max_ts = 0, ts = as_double(&v[a->w.slot]);
  bool seen;
  int rc = reserved_get(a, MAX_TS_KEY, &max_ts, &seen);
  if (rc) return rc;
  int kept = 0;
  for (int i = 0; i < *n; i++) {
    double start;
    if ((rc = window_start_of(a, keys[i].k, keys[i].len, &start))) return rc;
    if (seen && window_final(a, start, max_ts)) continue;
    keys[kept++] = keys[i];
  }
  if (kept < *n && (rc = counter_add(a, LATE_KEY, 1))) return rc;
  *n = kept;
  if (seen && ts <= max_ts) return 0;
  if ((rc = reserved_put(a, MAX_TS_KEY, ts))) return rc;
  return finalize_windows(a, ts); /* none of this event's own windows is final at ts */
}

static uint64_t counter_read(const rn_rel *r, const char *key)
{
  rn_aggregate *a = r->ctx;
  rn_pipeline *p = r->p;
  MDB_txn *txn;
  if (rn_store_reader(&p->store, &txn, &p->err)) return 0;
  MDB_val k = { 1, (void *)key }, d;
  double v = 0;
  if (mdb_get(txn, a->groups_dbi, &k, &d) == 0) memcpy(&v, d.mv_data, sizeof v);
  rn_store_reader_done(&p->store);
  return (uint64_t)v;
}

uint64_t rn_aggregate_late(const rn_rel *r) { return counter_read(r, LATE_KEY); }
uint64_t rn_aggregate_final(const rn_rel *r) { return counter_read(r, FINAL_KEY); }

/* ---- one input change ---- */

static int cmp_gkey(const gkey *x, const gkey *y)
{
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->k, y->k, n);
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

static int apply(rn_aggregate *a, const rn_change *c, bool quiet)
{
  const rn_schema *is = a->in->schema;
  const msgpack_object *ov = c->old ? rn_row_unpack(c->old, c->old_len, is->ncols, zone_of(a)) : NULL;
  const msgpack_object *nv = c->row ? rn_row_unpack(c->row, c->row_len, is->ncols, zone_of(a)) : NULL;
  if ((c->old && !ov) || (c->row && !nv))
    return rn_err_set(err_of(a), RN_ESTORE, "%s: a row of %s could not be decoded", a->out->name, a->in->name);
  gkey *ok = rn_zone_malloc(zone_of(a), sizeof *ok * MAX_WINDOWS);
  gkey *nk = rn_zone_malloc(zone_of(a), sizeof *nk * MAX_WINDOWS);
  int no = 0, nn = 0, rc = 0;
  if (!ok || !nk) return nomem(a);
  if (ov) rc = group_keys(a, ov, ok, &no);
  if (!rc && nv) rc = group_keys(a, nv, nk, &nn);
  if (!rc && nv && !ov && a->w.has_grace) rc = drop_late(a, nv, nk, &nn);
  /* Old-only groups first, then groups the row stays in, then new-only
   * groups (AGG-2); within each, ascending. */
  for (int i = 0; i < no && !rc; i++) {
    bool stays = false;
    for (int q = 0; q < nn && !stays; q++) stays = cmp_gkey(&ok[i], &nk[q]) == 0;
    if (!stays) rc = group_apply(a, &ok[i], ov, c->old, c->old_len, NULL, NULL, 0, quiet);
  }
  for (int i = 0; i < nn && !rc; i++) {
    bool stays = false;
    for (int q = 0; q < no && !stays; q++) stays = cmp_gkey(&nk[i], &ok[q]) == 0;
    if (stays) rc = group_apply(a, &nk[i], ov, c->old, c->old_len, nv, c->row, c->row_len, quiet);
  }
  for (int i = 0; i < nn && !rc; i++) {
    bool stays = false;
    for (int q = 0; q < no && !stays; q++) stays = cmp_gkey(&nk[i], &ok[q]) == 0;
    if (!stays) rc = group_apply(a, &nk[i], NULL, NULL, 0, nv, c->row, c->row_len, quiet);
  }
  return rc;
}

int rn_aggregate_apply(rn_rel *r, const rn_change *c)
{
  return apply(r->ctx, c, false);
}

/* The operator's apply: the change's relation is the aggregate's one input. */
static int aggregate_apply(rn_rel *r, rn_rel *from, const rn_change *c)
{
  (void)from;
  return apply(r->ctx, c, false);
}

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
  uint64_t rid, rows;
  memcpy(&rid, d->mv_data, 8);
  memcpy(&rows, (char *)d->mv_data + 8, 8);
  if (rows == 0) return 0;
  if (d->mv_size > 16 && ((const char *)d->mv_data)[16] == FINAL_MARK) { /* the row, as stored */
    const char *row = rn_scratch_copy(p, (const char *)d->mv_data + 17, d->mv_size - 17);
    return row ? fn(ctx, rid, row, d->mv_size - 17) : nomem(a);
  }
  gkey g = { (char *)rn_scratch_copy(p, k->mv_data, k->mv_size), k->mv_size };
  msgpack_object *st = NULL;
  const char *row;
  size_t len;
  int rc = g.k ? decode_state(a, d, &st) : nomem(a);
  msgpack_object ext[a->naggs ? a->naggs : 1];
  for (int i = 0; i < a->naggs; i++) ext[i] = UNKNOWN;
  if (!rc) rc = result_row(a, &g, rows, st, ext, &row, &len);
  if (!rc) rc = fn(ctx, rid, row, len);
  return rc;
}

static int scan_in(void *ctx, MDB_txn *txn, bool own_scratch)
{
  aggregate_scan *s = ctx;
  rn_aggregate *a = s->a;
  MDB_cursor *cur = NULL;
  int rc = mdb_cursor_open(txn, a->groups_dbi, &cur);
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
    if (!rn_type_is_scalar(c->type))
      rc = rn_err_set(&p->err, RN_EINVAL, "%s: by column \"%s\" has type %s; groups are keyed by scalars",
                      name, c->name, rn_type_name(c->type));
    else rc = add_col(s, c->name, c->type, c->nullable, NULL, &p->err);
    nullable_key |= c->nullable;
  }
  if (!rc && a->w.kind != RN_WINDOW_NONE) {
    rn_type t = a->time_int ? RN_T_INT : RN_T_FLOAT;
    rc = add_col(s, "window_start", t, false, NULL, &p->err);
    if (!rc) rc = add_col(s, "window_end", t, false, NULL, &p->err);
  }
  for (int i = 0; i < a->naggs && !rc; i++) {
    const rn_agg_spec *g = &a->aggs[i];
    const rn_column *c = g->slot >= 0 ? &is->cols[g->slot] : NULL;
    switch (g->kind) {
    case RN_AGG_COUNT: case RN_AGG_COUNT_COL: rc = add_col(s, g->name, RN_T_INT, false, NULL, &p->err); break;
    case RN_AGG_AVG: rc = add_col(s, g->name, RN_T_FLOAT, true, NULL, &p->err); break;
    case RN_AGG_USER: rc = add_col(s, g->name, RN_T_ANY, true, NULL, &p->err); break;
    case RN_AGG_SUM: case RN_AGG_MIN: case RN_AGG_MAX:
      rc = add_col(s, g->name, c->type, true, NULL, &p->err);
      break;
    }
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
    bool numeric = c->type == RN_T_INT || c->type == RN_T_FLOAT;
    if ((g->kind == RN_AGG_SUM || g->kind == RN_AGG_AVG) && !numeric)
      return rn_err_set(&p->err, RN_EINVAL, "%s: %s: column \"%s\" is %s; sum and avg take int or float",
                        name, g->name, c->name, rn_type_name(c->type));
    if ((g->kind == RN_AGG_MIN || g->kind == RN_AGG_MAX) && !rn_type_is_scalar(c->type))
      return rn_err_set(&p->err, RN_EINVAL, "%s: %s: column \"%s\" is %s; min and max take scalars",
                        name, g->name, c->name, rn_type_name(c->type));
  }
  if (w->kind != RN_WINDOW_NONE) {
    const rn_column *t = &is->cols[w->slot];
    if (t->type != RN_T_INT && t->type != RN_T_FLOAT)
      return rn_err_set(&p->err, RN_EINVAL, "%s: the window's time column \"%s\" is %s; it must be int or float",
                        name, t->name, rn_type_name(t->type));
    if (!(w->size > 0) || !(w->step > 0) || w->size / w->step > MAX_WINDOWS)
      return rn_err_set(&p->err, RN_EINVAL, "%s: a window needs size > 0 and step > 0, size/step at most %d",
                        name, MAX_WINDOWS);
    if (t->type == RN_T_INT && (w->size != floor(w->size) || w->step != floor(w->step)))
      return rn_err_set(&p->err, RN_EINVAL, "%s: an int time column takes whole window sizes and steps", name);
    if (w->has_grace && in->tablelike)
      return rn_err_set(&p->err, RN_EINVAL, "%s: grace is for windows over streams", name);
  }
  return 0;
}

static int rebuild_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  rn_aggregate *a = ctx;
  rn_change c = { RN_INSERT, id, row, len, NULL, 0 };
  int rc = apply(a, &c, true);
  msgpack_zone_clear(&a->out->p->scratch);
  return rc;
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
  int rc = mdb_drop(txn, a->values_dbi, 0);
  if (rc) return store_fail(a, rc);
  MDB_cursor *cur;
  if ((rc = mdb_cursor_open(txn, a->groups_dbi, &cur))) return store_fail(a, rc);
  MDB_val k, d;
  for (rc = mdb_cursor_get(cur, &k, &d, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
    if (reserved(&k)) continue;
    uint64_t rid;
    memcpy(&rid, d.mv_data, 8);
    char v[17] = { 0 };
    memcpy(v, &rid, 8);
    v[16] = (char)0x90; /* an empty array: no state */
    MDB_val nd = { 17, v };
    if ((rc = mdb_cursor_put(cur, &k, &nd, MDB_CURRENT))) break;
  }
  mdb_cursor_close(cur);
  if (rc != MDB_NOTFOUND) return store_fail(a, rc);
  return rn_rel_scan(a->in, rebuild_row, a);
}

/* State written before format 2 holds float sums as doubles, drifted (or
 * stuck at inf or NaN): over a table it is rebuilt once, exactly, from the
 * table's rows; over a stream each old sum is read as the value it holds
 * and is exact from there on (fsum_get). */
static int check_format(rn_aggregate *a, bool *rebuild_it)
{
  MDB_val k = { 1, (void *)FORMAT_KEY }, d;
  int rc = mdb_get(txn_of(a), a->groups_dbi, &k, &d);
  if (rc && rc != MDB_NOTFOUND) return store_fail(a, rc);
  bool old = rc == MDB_NOTFOUND || d.mv_size < 17 || ((const unsigned char *)d.mv_data)[16] < STATE_FORMAT;
  bool float_sums = false;
  for (int i = 0; i < a->naggs; i++) float_sums |= summing(a, i) && !int_sum(a, i);
  if (old && float_sums && a->in->tablelike) *rebuild_it = true;
  if (!old) return 0;
  char v[17] = { 0 };
  v[16] = STATE_FORMAT;
  d = (MDB_val){ sizeof v, v };
  rc = mdb_put(txn_of(a), a->groups_dbi, &k, &d, 0);
  return rc ? store_fail(a, rc) : 0;
}

static int setup_state(void *ctx, bool created, bool rebuild_it)
{
  rn_aggregate *a = ctx;
  rn_pipeline *p = a->out->p;
  int rc = rn_state_dbi(p, p->store.wtxn, RN_DB_AGG_GROUPS, a->out->name, 0, &a->groups_dbi);
  if (!rc) rc = rn_state_dbi(p, p->store.wtxn, RN_DB_AGG_VALUES, a->out->name, 0, &a->values_dbi);
  if (!rc && a->w.has_grace) rc = rn_state_dbi(p, p->store.wtxn, RN_DB_AGG_WINDOWS, a->out->name, 0, &a->windows_dbi);
  if (!rc) rc = check_format(a, &rebuild_it);
  if (!rc && rebuild_it) rc = rebuild(a, created);
  return rc;
}

int rn_declare_aggregate(rn_pipeline *p, const char *name, rn_rel *in, const int *by, int nby,
                         const rn_window *w, const rn_agg_spec *aggs, int naggs,
                         const rn_agg_fns *fns, rn_rel **out)
{
  int rc = rn_check_declarable(p, name);
  if (!rc) rc = check_aggs(p, name, in, aggs, naggs, w);
  rn_aggregate *a = rc ? NULL : calloc(1, sizeof *a);
  if (!rc && !a) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (rc) {
    if (fns->free_ctx) fns->free_ctx(fns->ctx);
    return rc;
  }
  a->in = in;
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
    bool minmax = aggs[i].kind == RN_AGG_MIN || aggs[i].kind == RN_AGG_MAX;
    a->counts_owner[i] = minmax;
    for (int q = 0; q < i && minmax; q++)
      if ((aggs[q].kind == RN_AGG_MIN || aggs[q].kind == RN_AGG_MAX) && aggs[q].slot == aggs[i].slot) a->counts_owner[i] = false;
  }
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

const rn_rel_ops rn_aggregate_ops = { .name = "aggregate", .apply = aggregate_apply, .scan = rn_aggregate_scan,
                                       .free = free_aggregate };
