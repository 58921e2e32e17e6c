/* aggregate_fns.c — the aggregate functions: each one's state, step and
 * result (aggregate_int.h). */
#include "aggregate_int.h"
#include "wb.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- per-aggregate state ----
 *
 * count(col), min, max: |count of non-null values|.
 * sum of an int column: |[sum, count]|, the sum an int64 (it must fit).
 * sum of a float column, avg: |[bin fsum, count]|, the exact sum in fsum.h's
 * stored form (a state written before fsum holds a float64 sum there
 * instead: it is read as that exact value, see fsum_get). */

/* A sum kept as an int64: sum of an int column. */
bool rn_agg_int_sum(const rn_aggregate *a, int i)
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


static void set_count(msgpack_object *o, int64_t n)
{
  o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
  o->via.u64 = (uint64_t)n;
}

/* ---- value counts ("am:", aggregate.h) ----
 *
 * |group key|u8 column|value| -> |u64 count|, the group key as its entry in
 * "ag:" is stored (hashed when long), the value key-encoded (key.h),
 * so the first entry under |group key|u8 column| is the minimum and the last
 * the maximum. A value whose encoding is longer than the room left after
 * |group key|u8 column| less one byte (a string or bytes value of some
 * hundred bytes) shares a bucket with every value of the same first room - 1
 * bytes:
 *
 *     |group key|u8 column|its first room - 1 bytes|0xff| ->
 *         (|u64 count|u32 len|the whole encoded value|)…
 *
 * Every other entry's value part is shorter than a bucket's, and two values
 * whose encodings agree on a bucket's bytes are both in it (an encoding is
 * never a prefix of another), so entries keep value order: the extreme is
 * the first or last entry, or the least or greatest value of its bucket.
 * A bucket holds the values that share that long a prefix: most often one. */

/* Room for the value part of a key under |stored group key|u8 column| (a
 * long group key is stored hashed, aggregate_int.h: room stays). */
static size_t value_room(const gkey *g)
{
  return g->slen + 1 < RN_STORE_KEY_MAX ? RN_STORE_KEY_MAX - g->slen - 1 : 0;
}



/* Moves value enc's count in bucket (data d, at key k) by delta. */
static int bucket_count(rn_aggregate *a, const MDB_val *k, const MDB_val *d, bool found, const char *enc,
                        size_t len, int delta)
{
  msgpack_sbuffer b; /* the bucket rewritten */
  msgpack_sbuffer_init(&b);
  bool seen = false;
  const char *p = found ? d->mv_data : NULL, *end = found ? (const char *)d->mv_data + d->mv_size : NULL;
  int rc = 0;
  while (p && p < end && !rc) {
    uint64_t count;
    uint32_t n;
    if ((size_t)(end - p) < 12) { rc = -1; break; }
    memcpy(&count, p, 8);
    memcpy(&n, p + 8, 4);
    if ((size_t)(end - p - 12) < n) { rc = -1; break; }
    if (n == len && memcmp(p + 12, enc, len) == 0) {
      seen = true;
      count = (uint64_t)((int64_t)count + delta);
    }
    if (count) {
      rn_buf_write(&b, (const char *)&count, 8);
      rn_buf_write(&b, p + 8, 4 + (size_t)n);
    }
    p += 12 + n;
  }
  if (rc) {
    msgpack_sbuffer_destroy(&b);
    return rn_err_set(err_of(a), RN_ESTORE, "%s: a group's value counts could not be decoded", a->out->name);
  }
  if (!seen && delta > 0) {
    uint64_t count = (uint64_t)delta;
    uint32_t n = (uint32_t)len;
    rn_buf_write(&b, (const char *)&count, 8);
    rn_buf_write(&b, (const char *)&n, 4);
    rn_buf_write(&b, enc, len);
  }
  int mrc;
  if (rn_oom()) { msgpack_sbuffer_destroy(&b); return nomem(a); }
  if (b.size == 0) mrc = rn_wb_del(&a->out->p->store, txn_of(a), a->values_dbi, k);
  else {
    MDB_val nd = { b.size, b.data };
    mrc = rn_wb_put(&a->out->p->store, txn_of(a), a->values_dbi, k, &nd, 0);
  }
  msgpack_sbuffer_destroy(&b);
  return mrc && mrc != MDB_NOTFOUND ? store_fail(a, mrc) : 0;
}

/* |group key|u8 column|value| -> count, moved by delta. min and max of one
 * column share the counts. */
static int value_count(rn_aggregate *a, const gkey *g, int i, const msgpack_object *v, int delta)
{
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  rn_buf_write(&b, g->sk, g->slen);
  char idx = (char)a->aggs[i].slot;
  rn_buf_write(&b, &idx, 1);
  const char *col = a->in->schema->cols[a->aggs[i].slot].name;
  int rc = rn_key_append(&b, v) ? rn_err_set(err_of(a), RN_EINVAL, "%s: %s \"%s\" of column \"%s\" is NaN: NaN has no "
                                              "place among min and max", a->out->name,
                                              a->aggs[i].kind == RN_AGG_MAX ? "max" : "min", a->aggs[i].name, col) : 0;
  size_t room = value_room(g), at = g->slen + 1;
  bool bucket = !rc && b.size - at >= room;
  if (bucket && room < AGG_VALUE_ROOM_MIN)
    rc = rn_err_set(err_of(a), RN_EINVAL, "%s: %s \"%s\" of column \"%s\": its group key takes %zu bytes, too many "
                    "to keep values beside it", a->out->name, a->aggs[i].kind == RN_AGG_MAX ? "max" : "min",
                    a->aggs[i].name, col, g->slen);
  if (rn_oom() && !rc) rc = nomem(a);
  if (!rc) {
    char *enc = NULL;
    size_t len = b.size - at;
    if (bucket && !(enc = (char *)rn_scratch_copy(a->out->p, b.data + at, len))) rc = nomem(a);
    if (bucket && !rc) { b.size = at + room - 1; b.data[b.size++] = (char)0xff; } /* the bucket's key */
    MDB_val k = { b.size, b.data }, d;
    uint64_t count = 0;
    int mrc = rc ? 0 : rn_wb_get(&a->out->p->store, txn_of(a), a->values_dbi, &k, &d);
    if (mrc != 0 && mrc != MDB_NOTFOUND) rc = store_fail(a, mrc);
    else if (!rc && bucket) rc = bucket_count(a, &k, &d, mrc == 0, enc, len, delta);
    else if (!rc && mrc == 0 && d.mv_size != sizeof count) /* never read past its end */
      rc = rn_err_set(&a->out->p->err, RN_ESTORE, "state damaged: %s: aggregate \"%s\": a value's count is %zu bytes, "
                      "not 8", a->out->p->store.path, a->out->name, d.mv_size);
    else if (!rc) {
      if (mrc == 0) memcpy(&count, d.mv_data, 8);
      count = (uint64_t)((int64_t)count + delta);
      if (count == 0) mrc = rn_wb_del(&a->out->p->store, txn_of(a), a->values_dbi, &k);
      else { d.mv_size = 8; d.mv_data = &count; mrc = rn_wb_put(&a->out->p->store, txn_of(a), a->values_dbi, &k, &d, 0); }
      if (mrc && mrc != MDB_NOTFOUND) rc = store_fail(a, mrc);
    }
  }
  msgpack_sbuffer_destroy(&b);
  return rc;
}

/* The least (or, max, the greatest) encoded value of bucket d into *enc. */
static int bucket_extreme(rn_aggregate *a, const MDB_val *d, bool max, const char **enc, size_t *len)
{
  const char *p = d->mv_data, *end = p + d->mv_size;
  *enc = NULL;
  while (p < end) {
    uint32_t n;
    if ((size_t)(end - p) < 12) break;
    memcpy(&n, p + 8, 4);
    if ((size_t)(end - p - 12) < n) break;
    const char *e = p + 12;
    if (!*enc) { *enc = e; *len = n; }
    else {
      size_t m = n < *len ? n : *len;
      int c = memcmp(e, *enc, m);
      if (!c) c = (n > *len) - (n < *len);
      if (max ? c > 0 : c < 0) { *enc = e; *len = n; }
    }
    p += 12 + n;
  }
  if (p != end || !*enc)
    return rn_err_set(err_of(a), RN_ESTORE, "%s: a group's value counts could not be decoded", a->out->name);
  return 0;
}

/* The buffers of one user function call: the state packed in, the answer
 * out. The outermost call borrows the aggregate's own; a call made while one
 * runs (its Lua function read the aggregate, whose rows the same functions
 * compute) gets its own, so it never clobbers the outer call's answer. */
typedef struct user_call {
  msgpack_sbuffer *state, *answer;
  msgpack_sbuffer own_state, own_answer; /* a nested call's */
  bool nested;
} user_call;

static void user_call_begin(rn_aggregate *a, const msgpack_object *st, user_call *c)
{
  c->nested = a->user_calls++ > 0;
  if (c->nested) {
    msgpack_sbuffer_init(&c->own_state);
    msgpack_sbuffer_init(&c->own_answer);
  }
  c->state = c->nested ? &c->own_state : &a->state;
  c->answer = c->nested ? &c->own_answer : &a->answer;
  msgpack_sbuffer_clear(c->state);
  msgpack_sbuffer_clear(c->answer);
  msgpack_packer pk;
  msgpack_packer_init(&pk, c->state, rn_buf_write);
  msgpack_pack_object(&pk, *st);
}

static void user_call_end(rn_aggregate *a, user_call *c)
{
  a->user_calls--;
  if (!c->nested) return;
  msgpack_sbuffer_destroy(&c->own_state);
  msgpack_sbuffer_destroy(&c->own_answer);
}

/* An int sum's value: an int64, or while a rebuild runs one past it (16
 * bytes, little-endian): a rebuild takes the rows in key order, and a sum
 * that fits may leave int64 on the way there. */
static __int128 int_sum_of(const msgpack_object *sum)
{
  __int128 r;
  if (sum->type != MSGPACK_OBJECT_BIN || sum->via.bin.size != sizeof r) return as_int(sum);
  memcpy(&r, sum->via.bin.ptr, sizeof r);
  return r;
}

static int sum_overflows(rn_aggregate *a, int i)
{
  return rn_err_set(err_of(a), RN_EINVAL, "%s: sum \"%s\" of column \"%s\" overflows 64 bits", a->out->name,
                    a->aggs[i].name, a->in->schema->cols[a->aggs[i].slot].name);
}

/* Stores r as aggregate i's int sum: past int64 an error, except in a
 * rebuild, which checks the sums it ends with (rn_agg_sums_fit). */
static int int_sum_put(rn_aggregate *a, int i, __int128 r, msgpack_object *sum)
{
  if (r >= 0 && r <= INT64_MAX) { sum->type = MSGPACK_OBJECT_POSITIVE_INTEGER; sum->via.u64 = (uint64_t)r; return 0; }
  if (r < 0 && r >= INT64_MIN) { sum->type = MSGPACK_OBJECT_NEGATIVE_INTEGER; sum->via.i64 = (int64_t)r; return 0; }
  if (!a->rebuilding) return sum_overflows(a, i);
  const char *copy = rn_scratch_copy(a->out->p, (const char *)&r, sizeof r);
  if (!copy) return nomem(a);
  sum->type = MSGPACK_OBJECT_BIN;
  sum->via.bin.ptr = copy;
  sum->via.bin.size = sizeof r;
  return 0;
}

int rn_agg_sums_fit(rn_aggregate *a, const msgpack_object *st)
{
  for (int i = 0; i < a->naggs; i++)
    if (rn_agg_int_sum(a, i) && st[i].type == MSGPACK_OBJECT_ARRAY && st[i].via.array.size == 2 &&
        st[i].via.array.ptr[0].type == MSGPACK_OBJECT_BIN)
      return sum_overflows(a, i);
  return 0;
}

/* Moves the value rx (a row's, or NULL) out of a sum or avg state and ax
 * (or NULL) into it, in one step: an int sum fails only when the result
 * leaves int64, not on the way (nulls are skipped, AGG-1). */
int rn_agg_sum_step(rn_aggregate *a, int i, msgpack_object *st, const msgpack_object *rx, const msgpack_object *ax)
{
  msgpack_object *sum = &st->via.array.ptr[0], *n = &st->via.array.ptr[1];
  if (rx && rx->type == MSGPACK_OBJECT_NIL) rx = NULL;
  if (ax && ax->type == MSGPACK_OBJECT_NIL) ax = NULL;
  set_count(n, as_int(n) - (rx != NULL) + (ax != NULL));
  if (rn_agg_int_sum(a, i))
    return int_sum_put(a, i, int_sum_of(sum) - (rx ? as_int(rx) : 0) + (ax ? as_int(ax) : 0), sum);
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

/* Aggregate i keeps a sum (sum, avg): stepped by rn_agg_sum_step. */

/* The extreme value of a min or max in a group (absent: nil). */
static int extreme(rn_aggregate *a, const gkey *g, int i, bool max, msgpack_object *out)
{
  out->type = MSGPACK_OBJECT_NIL;
  char prefix[g->slen + 1];
  int col = a->aggs[i].slot;
  memcpy(prefix, g->sk, g->slen);
  prefix[g->slen] = (char)(max ? col + 1 : col);
  MDB_cursor *cur;
  int rc = rn_wb_cursor_open(&a->out->p->store, txn_of(a), a->values_dbi, false, &cur);
  if (rc) return store_fail(a, rc);
  MDB_val k = { g->slen + 1, prefix }, d;
  rc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE);
  if (max) rc = rc == 0 ? mdb_cursor_get(cur, &k, &d, MDB_PREV) : mdb_cursor_get(cur, &k, &d, MDB_LAST);
  prefix[g->slen] = (char)col;
  if (rc == 0 && k.mv_size > g->slen + 1 && memcmp(k.mv_data, prefix, g->slen + 1) == 0) {
    const char *enc = (const char *)k.mv_data + g->slen + 1;
    size_t len = k.mv_size - g->slen - 1;
    if (len >= value_room(g)) rc = bucket_extreme(a, &d, max, &enc, &len); /* a bucket of long values */
    if (!rc && rn_key_decode(enc, len, out, 1, zone_of(a)) != 1)
      rc = rn_err_set(err_of(a), RN_ESTORE, "%s: a stored value could not be decoded", a->out->name);
  } else if (rc == MDB_NOTFOUND || rc == 0) {
    rc = 0;
  } else {
    rc = store_fail(a, rc);
  }
  mdb_cursor_close(cur);
  return rc;
}


static bool unknown(const msgpack_object *v)
{
  return v->type == MSGPACK_OBJECT_EXT && v->via.ext.type == 0x7e;
}


/* ---- the functions, one entry each (in the manner of SQLite's FuncDef) ----
 *
 * An entry's init writes the state of an empty group, its step moves one
 * row's contribution in (delta +1) or out (-1), its result packs the
 * group's value. The state bytes each one keeps are drawn at the top. */

typedef struct agg_result_at {
  const gkey *g;
  uint64_t rows;          /* the group's rows */
  msgpack_object *ext;    /* per aggregate: a min/max's value where known */
  msgpack_packer *pk;     /* the result row being packed */
  msgpack_sbuffer *b;     /* its buffer: a user result is written as is */
} agg_result_at;

typedef struct agg_fn {
  int (*init)(rn_aggregate *a, int i, msgpack_object *st);
  int (*step)(rn_aggregate *a, int i, const gkey *g, msgpack_object *st, const msgpack_object *v,
              const char *row, size_t rlen, int delta);
  int (*result)(rn_aggregate *a, int i, const msgpack_object *st, agg_result_at *at);
  bool sums;              /* keeps |[sum, count]|, stepped by rn_agg_sum_step */
  agg_decl decl;
} agg_fn;

/* count(): no state, the group's row count is its value. */
static int count_init(rn_aggregate *a, int i, msgpack_object *st)
{
  (void)a, (void)i;
  st->type = MSGPACK_OBJECT_NIL;
  return 0;
}

static int count_step(rn_aggregate *a, int i, const gkey *g, msgpack_object *st, const msgpack_object *v,
                      const char *row, size_t rlen, int delta)
{
  (void)a, (void)i, (void)g, (void)st, (void)v, (void)row, (void)rlen, (void)delta;
  return 0;
}

static int count_result(rn_aggregate *a, int i, const msgpack_object *st, agg_result_at *at)
{
  (void)a, (void)i, (void)st;
  msgpack_pack_uint64(at->pk, at->rows);
  return 0;
}

/* count(col), min, max: the count of non-null values. */
static int nonnull_init(rn_aggregate *a, int i, msgpack_object *st)
{
  (void)a, (void)i;
  set_count(st, 0);
  return 0;
}

static int count_col_step(rn_aggregate *a, int i, const gkey *g, msgpack_object *st, const msgpack_object *v,
                          const char *row, size_t rlen, int delta)
{
  (void)g, (void)row, (void)rlen;
  if (v[a->aggs[i].slot].type == MSGPACK_OBJECT_NIL) return 0; /* nulls are skipped (AGG-1) */
  set_count(st, as_int(st) + delta);
  return 0;
}

static int count_col_result(rn_aggregate *a, int i, const msgpack_object *st, agg_result_at *at)
{
  (void)a, (void)i;
  msgpack_pack_object(at->pk, *st);
  return 0;
}

/* min and max: their count, and the column's value counts (kept once per
 * column, by its counts owner). */
static int extreme_step(rn_aggregate *a, int i, const gkey *g, msgpack_object *st, const msgpack_object *v,
                        const char *row, size_t rlen, int delta)
{
  (void)row, (void)rlen;
  const msgpack_object *x = &v[a->aggs[i].slot];
  if (x->type == MSGPACK_OBJECT_NIL) return 0; /* nulls are skipped (AGG-1) */
  set_count(st, as_int(st) + delta);
  return a->counts_owner[i] ? value_count(a, g, i, x, delta) : 0;
}

static int extreme_result(rn_aggregate *a, int i, const msgpack_object *st, agg_result_at *at)
{
  (void)st;
  msgpack_object v = at->ext[i];
  int rc = unknown(&v) ? extreme(a, at->g, i, a->aggs[i].kind == RN_AGG_MAX, &v) : 0;
  if (!rc && v.type == MSGPACK_OBJECT_BIN && a->in->schema->cols[a->aggs[i].slot].type == RN_T_STRING)
    v.type = MSGPACK_OBJECT_STR;
  at->ext[i] = v;
  if (!rc) msgpack_pack_object(at->pk, v);
  return rc;
}

/* sum and avg: |[sum, count]|. */
static int sum_init(rn_aggregate *a, int i, msgpack_object *st)
{
  msgpack_object *pair = rn_zone_malloc(zone_of(a), 2 * sizeof *pair);
  if (!pair) return nomem(a);
  set_count(&pair[0], 0);
  if (!rn_agg_int_sum(a, i)) {
    rn_fsum empty;
    rn_fsum_init(&empty);
    int rc = fsum_put(a, i, &empty, &pair[0]);
    if (rc) return rc;
  }
  set_count(&pair[1], 0);
  st->type = MSGPACK_OBJECT_ARRAY;
  st->via.array.size = 2;
  st->via.array.ptr = pair;
  return 0;
}

static int sum_step(rn_aggregate *a, int i, const gkey *g, msgpack_object *st, const msgpack_object *v,
                    const char *row, size_t rlen, int delta)
{
  (void)g, (void)row, (void)rlen;
  const msgpack_object *x = &v[a->aggs[i].slot];
  if (x->type == MSGPACK_OBJECT_NIL) return 0; /* nulls are skipped (AGG-1) */
  return delta < 0 ? rn_agg_sum_step(a, i, st, x, NULL) : rn_agg_sum_step(a, i, st, NULL, x);
}

/* The sum (avg: divided by the count), rounded once; nil for no values. */
static int sum_or_avg_result(rn_aggregate *a, int i, const msgpack_object *st, agg_result_at *at, bool avg)
{
  const msgpack_object *sum = &st->via.array.ptr[0];
  int64_t n = as_int(&st->via.array.ptr[1]);
  rn_fsum f;
  int rc = 0;
  if (n <= 0) msgpack_pack_nil(at->pk);
  else if (rn_agg_int_sum(a, i)) msgpack_pack_object(at->pk, *sum);
  else if (!(rc = fsum_get(a, i, sum, &f)))
    msgpack_pack_double(at->pk, rn_float_canon(avg ? rn_fsum_div(&f, (uint64_t)n) : rn_fsum_value(&f)));
  return rc;
}

static int sum_result(rn_aggregate *a, int i, const msgpack_object *st, agg_result_at *at)
{
  return sum_or_avg_result(a, i, st, at, false);
}

static int avg_result(rn_aggregate *a, int i, const msgpack_object *st, agg_result_at *at)
{
  return sum_or_avg_result(a, i, st, at, true);
}

/* A user aggregate: its state is what its own functions make of it. */
static int user_init(rn_aggregate *a, int i, msgpack_object *st)
{
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

static int user_step(rn_aggregate *a, int i, const gkey *g, msgpack_object *st, const msgpack_object *v,
                     const char *row, size_t rlen, int delta)
{
  (void)g, (void)v;
  if (delta < 0 && !a->fns.can_remove(a->fns.ctx, i))
    return rn_err_set(err_of(a), RN_EINVAL, "%s: aggregate \"%s\" has no remove function, so it cannot follow deletes and updates",
                      a->out->name, a->aggs[i].name);
  user_call c;
  user_call_begin(a, st, &c);
  int rc = a->fns.step(a->fns.ctx, i, delta > 0, c.state->data, c.state->size, a->in, row, rlen, c.answer,
                       err_of(a));
  size_t off = 0;
  char *copy = rc ? NULL : (char *)rn_scratch_copy(a->out->p, c.answer->data, c.answer->size);
  if (!rc && (!copy || rn_unpack(copy, c.answer->size, &off, zone_of(a), st) != MSGPACK_UNPACK_SUCCESS))
    rc = nomem(a);
  user_call_end(a, &c);
  return rc;
}

static int user_result(rn_aggregate *a, int i, const msgpack_object *st, agg_result_at *at)
{
  user_call c;
  user_call_begin(a, st, &c);
  int rc = a->fns.result(a->fns.ctx, i, c.state->data, c.state->size, c.answer, err_of(a));
  if (!rc) rn_buf_write(at->b, c.answer->data, c.answer->size);
  user_call_end(a, &c);
  return rc;
}

#define SUMMABLE AGG_TAKES_NUMBER, "sum and avg take int or float"
#define ORDERED AGG_TAKES_SCALAR, "min and max take scalars"

/* The functions by kind: adding one is an entry here, its kind
 * (aggregate.h) and its name in the DSL. */
static const agg_fn AGG_FNS[] = {
  [RN_AGG_COUNT]     = { count_init,   count_step,     count_result,     false,
                         { RN_T_INT, false, AGG_TAKES_ANY, NULL, false } },
  [RN_AGG_COUNT_COL] = { nonnull_init, count_col_step, count_col_result, false,
                         { RN_T_INT, false, AGG_TAKES_ANY, NULL, false } },
  [RN_AGG_SUM]       = { sum_init,     sum_step,       sum_result,       true,
                         { AGG_RESULT_OF_COLUMN, true, SUMMABLE, false } },
  [RN_AGG_MIN]       = { nonnull_init, extreme_step,   extreme_result,   false,
                         { AGG_RESULT_OF_COLUMN, true, ORDERED, true } },
  [RN_AGG_MAX]       = { nonnull_init, extreme_step,   extreme_result,   false,
                         { AGG_RESULT_OF_COLUMN, true, ORDERED, true } },
  [RN_AGG_AVG]       = { sum_init,     sum_step,       avg_result,       true,
                         { RN_T_FLOAT, true, SUMMABLE, false } },
  [RN_AGG_USER]      = { user_init,    user_step,      user_result,      false,
                         { RN_T_ANY, true, AGG_TAKES_ANY, NULL, false } },
};

const agg_decl *rn_agg_decl_of(rn_agg_kind kind)
{
  return &AGG_FNS[kind].decl;
}

static const agg_fn *fn_of(const rn_aggregate *a, int i)
{
  return &AGG_FNS[a->aggs[i].kind];
}

/* st: aggregate i's state for an empty group. */
int rn_agg_init_state(rn_aggregate *a, int i, msgpack_object *st)
{
  return fn_of(a, i)->init(a, i, st);
}

/* Aggregate i keeps a sum (sum, avg): stepped by rn_agg_sum_step. */
bool rn_agg_summing(const rn_aggregate *a, int i)
{
  return fn_of(a, i)->sums;
}

/* Moves row's contribution in or out of one aggregate's state. */
int rn_agg_step_state(rn_aggregate *a, int i, const gkey *g, msgpack_object *st, const msgpack_object *v,
                      const char *row, size_t rlen, int delta)
{
  return fn_of(a, i)->step(a, i, g, st, v, row, rlen, delta);
}

/* The group's result row: by values, window, aggregates. ext holds each
 * min/max's value where known (UNKNOWN: looked up, and filled in). */
int rn_agg_result_row(rn_aggregate *a, const gkey *g, uint64_t rows, const msgpack_object *st, msgpack_object *ext,
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
  agg_result_at at = { g, rows, ext, &pk, &b };
  for (int i = 0; i < a->naggs && !rc; i++) rc = fn_of(a, i)->result(a, i, &st[i], &at);
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
void rn_agg_next_extremes(const rn_aggregate *a, const msgpack_object *before, const msgpack_object *rv,
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
    /* as the value counts hold it (key.c: -0.0 and 0.0 are one key), so a
     * group's row does not depend on whether its extreme was looked up */
    if ((cur.type == MSGPACK_OBJECT_FLOAT64 || cur.type == MSGPACK_OBJECT_FLOAT32) && cur.via.f64 == 0) cur.via.f64 = 0.0;
    after[i] = cur;
  }
}

