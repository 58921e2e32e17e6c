/* aggregate_window.c — final windows and lateness (aggregate_int.h). */
#include "aggregate_int.h"
#include "wb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- final windows (windowed streams with grace) ----
 *
 * "aw:" |encoded window start|stored group key| -> |stored group key| (the
 * key of its entry in "ag:": hashed when long, aggregate_int.h) lists the windows
 * not final yet, oldest first. When the largest event time passes a
 * window's end plus grace, no event can reach it again (AGG-3): its value
 * counts go and its entry in "ag:" becomes |rid|rows|0xc1|result row|, the
 * row it will always have. State then grows with the open windows only.
 * "aw:" is there exactly while the aggregate has grace (rn_agg_windows_open). */

/* |0xc1 0xfe|: a hashed group's whole key follows (group_entry). */
static const char LONG_HEAD[2] = { (char)0xc1, (char)0xfe };

bool rn_agg_entry_parse(const MDB_val *k, const MDB_val *d, group_entry *e)
{
  const char *v = d->mv_data;
  if (d->mv_size < 16) return false;
  memcpy(&e->rid, v, 8);
  memcpy(&e->rows, v + 8, 8);
  e->key = k->mv_data;
  e->klen = k->mv_size;
  e->head = v + 16;
  e->head_len = 0;
  size_t off = 16;
  if (d->mv_size >= 22 && memcmp(v + 16, LONG_HEAD, 2) == 0) {
    uint32_t klen;
    memcpy(&klen, v + 18, 4);
    if (d->mv_size - 22 < klen) return false;
    e->key = v + 22;
    e->klen = klen;
    off = 22 + (size_t)klen;
    e->head_len = off - 16;
  }
  e->rest = v + off;
  e->rest_len = d->mv_size - off;
  e->final = e->rest_len > 0 && e->rest[0] == FINAL_MARK;
  return true;
}

bool rn_agg_entry_whole(void *ctx, const MDB_val *d, const char **key, size_t *klen)
{
  (void)ctx;
  static const MDB_val none = { 0, NULL };
  group_entry e;
  if (!rn_agg_entry_parse(&none, d, &e) || !e.head_len) return false;
  *key = e.key;
  *klen = e.klen;
  return true;
}

/* Looks at most at one key as it is, then at RN_LONGKEY_PROBES hashed forms. */
int rn_agg_group_find(rn_aggregate *a, MDB_txn *txn, MDB_dbi dbi, size_t inline_max, gkey *g, MDB_val *d,
                      bool *found)
{
  rn_store *s = &a->out->p->store;
  *found = false;
  g->sk = g->k;
  g->slen = g->len;
  bool place_free = false; /* g's own place holds no entry: a new group goes there when it fits inline_max */
  if (g->len <= RN_STORE_KEY_MAX) {
    MDB_val k = { g->len, g->k };
    int rc = rn_wb_get(s, txn, dbi, &k, d);
    if (rc && rc != MDB_NOTFOUND) return store_fail(a, rc);
    group_entry e;
    if (rc == 0 && rn_agg_entry_parse(&k, d, &e) && !e.head_len) return *found = true, 0;
    place_free = rc == MDB_NOTFOUND && g->len <= inline_max;
    if (place_free && g->len <= AGG_KEY_INLINE_LEAST) return 0; /* never hashed */
  } /* longer, its place holds a hashed group, or it was stored hashed under a smaller key_inline */
  char *stored = rn_zone_malloc(zone_of(a), RN_LONGKEY_STORED);
  if (!stored) return nomem(a);
  int rc = rn_longkey_find(s, txn, dbi, g->k, g->len, rn_agg_entry_whole, NULL, stored, d);
  if ((rc == MDB_NOTFOUND || rc == RN_LONGKEY_FULL) && place_free) return 0; /* a new group, stored as it is */
  g->sk = stored;
  g->slen = RN_LONGKEY_STORED;
  if (rc == RN_LONGKEY_FULL)
    return rn_err_set(err_of(a), RN_ESTORE, "%s: too many long group keys share one hash", a->out->name);
  if (rc && rc != MDB_NOTFOUND) return store_fail(a, rc);
  *found = rc == 0;
  return 0;
}

int rn_agg_group_rehash(rn_aggregate *a, MDB_txn *txn, const MDB_val *key, uint64_t rid, uint64_t rows,
                        const char *rest, size_t rest_len, gkey *moved)
{
  rn_store *s = &a->out->p->store;
  char *whole = (char *)rn_scratch_copy(a->out->p, key->mv_data, key->mv_size); /* key and rest may be in a page */
  char *kept = (char *)rn_scratch_copy(a->out->p, rest, rest_len);
  char *stored = rn_zone_malloc(zone_of(a), RN_LONGKEY_STORED);
  if (!whole || !kept || !stored) return nomem(a);
  MDB_val old = { key->mv_size, whole }, d;
  int rc = rn_wb_del(s, txn, a->groups_dbi, &old);
  if (rc) return store_fail(a, rc);
  rc = rn_longkey_find(s, txn, a->groups_dbi, whole, key->mv_size, rn_agg_entry_whole, NULL, stored, &d);
  if (rc == RN_LONGKEY_FULL)
    return rn_err_set(err_of(a), RN_ESTORE, "%s: too many long group keys share one hash", a->out->name);
  if (rc && rc != MDB_NOTFOUND) return store_fail(a, rc);
  msgpack_sbuffer *b = &a->buf; /* |rid|rows|0xc1 0xfe|u32 klen|key|rest| (group_entry) */
  msgpack_sbuffer_clear(b);
  uint32_t klen = (uint32_t)key->mv_size;
  rn_buf_write(b, (const char *)&rid, 8);
  rn_buf_write(b, (const char *)&rows, 8);
  rn_buf_write(b, LONG_HEAD, 2);
  rn_buf_write(b, (const char *)&klen, 4);
  rn_buf_write(b, whole, key->mv_size);
  rn_buf_write(b, kept, rest_len);
  if (rn_oom()) return nomem(a);
  MDB_val sk = { RN_LONGKEY_STORED, stored }, nd = { b->size, b->data };
  if ((rc = rn_wb_put(s, txn, a->groups_dbi, &sk, &nd, 0))) return store_fail(a, rc);
  if (moved) *moved = (gkey){ whole, key->mv_size, stored, RN_LONGKEY_STORED };
  return 0;
}

int rn_agg_decode_state(rn_aggregate *a, const group_entry *e, msgpack_object **st)
{
  msgpack_object arr;
  size_t off = 0;
  const char *copy = rn_scratch_copy(a->out->p, e->rest, e->rest_len);
  if (!copy || rn_unpack(copy, e->rest_len, &off, zone_of(a), &arr) != MSGPACK_UNPACK_SUCCESS ||
      arr.type != MSGPACK_OBJECT_ARRAY || arr.via.array.size != (uint32_t)a->naggs)
    return rn_err_set(err_of(a), RN_ESTORE, "%s: a group's state could not be decoded", a->out->name);
  *st = arr.via.array.ptr;
  return 0;
}

/* *start: the window start of group key g (its last key part). */
int rn_agg_window_start_of(rn_aggregate *a, const char *g, size_t len, rn_agg_time *start)
{
  int nk = a->nby + 1;
  msgpack_object kv[nk];
  if (rn_key_decode(g, len, kv, nk, zone_of(a)) != nk)
    return rn_err_set(err_of(a), RN_ESTORE, "%s: a group key could not be decoded", a->out->name);
  *start = (rn_agg_time){ as_double(&kv[a->nby]), a->time_int ? as_int(&kv[a->nby]) : 0 };
  return 0;
}

/* For an int time column: the least largest time at which the window at
 * start is final, start + size + ceil(grace) (times are whole: past its
 * end by grace is past it by ceil(grace)); past int64 when it never is. */
static __int128 int_final_at(const rn_aggregate *a, int64_t start)
{
  double grace = ceil(a->w.grace);
  __int128 whole = grace > 0x1p100 ? (__int128)1 << 100 : (__int128)grace;
  return (__int128)start + (int64_t)a->w.size + whole;
}

/* The window at start is final once max_ts passed its end plus grace
 * (AGG-3); an int time column compares exactly (its times pass 2^53, where
 * doubles would round a nanosecond's event into a final window). */
bool rn_agg_window_final(const rn_aggregate *a, rn_agg_time start, rn_agg_time max_ts)
{
  if (!a->time_int) return max_ts.d >= start.d + a->w.size + a->w.grace;
  return max_ts.i >= int_final_at(a, start.i);
}

/* Lists window g in "aw:" as not final yet. */
int rn_agg_window_index_put(rn_aggregate *a, const gkey *g)
{
  rn_agg_time start;
  int rc = rn_agg_window_start_of(a, g->k, g->len, &start);
  if (rc) return rc;
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  msgpack_object s = num_obj(a, start.d, start.i);
  rn_key_append(&b, &s);
  rn_buf_write(&b, g->sk, g->slen);
  MDB_val k = { b.size, b.data }, d = { g->slen, g->sk };
  rc = b.size > RN_STORE_KEY_MAX ? 0 : mdb_put(txn_of(a), a->windows_dbi, &k, &d, 0); /* too long: stays open */
  double at = start.d + a->w.size + a->w.grace;
  bool listed = !rc && b.size <= RN_STORE_KEY_MAX;
  if (listed && at < a->next_final) a->next_final = at;
  if (listed && a->time_int && int_final_at(a, start.i) < a->next_final_int) a->next_final_int = int_final_at(a, start.i);
  msgpack_sbuffer_destroy(&b);
  return rc ? store_fail(a, rc) : 0;
}

/* Lists in "aw:" every window of "ag:" not final yet: grace was given to
 * an aggregate declared before without it, whose windows were never
 * listed (none of them would ever be made final). Once, at declaration. A
 * window stored as it is under a key too long to list beside its start
 * (more than key_inline, 502 bytes with grace) moves to its hashed place
 * first, after the walk (rn_agg_group_rehash): left there, it would never
 * be made final, and would take events again once grace was dropped, as no
 * window made final does. Without min or max it has no value counts to
 * move (with one, key_inline was 494 already and it is hashed). */
static int list_open_windows(rn_aggregate *a)
{
  rn_pipeline *p = a->out->p;
  bool counts = false;
  for (int i = 0; i < a->naggs; i++) counts |= a->counts_owner[i];
  MDB_cursor *cur;
  int rc = rn_wb_cursor_open(&p->store, p->store.wtxn, a->groups_dbi, false, &cur);
  if (rc) return store_fail(a, rc);
  msgpack_sbuffer moving; /* |u32 klen|key|u64 rid|u64 rows|u32 rest_len|rest| … */
  msgpack_sbuffer_init(&moving);
  MDB_val k, d;
  int err = 0;
  for (rc = mdb_cursor_get(cur, &k, &d, MDB_FIRST); !rc && !err; rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
    group_entry e;
    if (reserved(&k) || !rn_agg_entry_parse(&k, &d, &e) || e.final || e.rows == 0) continue;
    if (!e.head_len && k.mv_size > a->key_inline && !counts) {
      uint32_t klen = (uint32_t)k.mv_size, rlen = (uint32_t)e.rest_len;
      rn_buf_write(&moving, (const char *)&klen, 4);
      rn_buf_write(&moving, k.mv_data, k.mv_size);
      rn_buf_write(&moving, (const char *)&e.rid, 8);
      rn_buf_write(&moving, (const char *)&e.rows, 8);
      rn_buf_write(&moving, (const char *)&rlen, 4);
      rn_buf_write(&moving, e.rest, e.rest_len);
      continue;
    }
    gkey g = { (char *)rn_scratch_copy(p, e.key, e.klen), e.klen, (char *)rn_scratch_copy(p, k.mv_data, k.mv_size),
               k.mv_size };
    err = g.k && g.sk ? rn_agg_window_index_put(a, &g) : nomem(a);
  }
  mdb_cursor_close(cur);
  if (!err && rc != MDB_NOTFOUND) err = store_fail(a, rc);
  if (!err && rn_oom()) err = nomem(a);
  for (size_t off = 0; !err && off < moving.size;) {
    uint32_t klen, rlen;
    uint64_t rid, rows;
    memcpy(&klen, moving.data + off, 4);
    MDB_val gk = { klen, moving.data + off + 4 };
    memcpy(&rid, moving.data + off + 4 + klen, 8);
    memcpy(&rows, moving.data + off + 12 + klen, 8);
    memcpy(&rlen, moving.data + off + 20 + klen, 4);
    gkey g;
    err = rn_agg_group_rehash(a, p->store.wtxn, &gk, rid, rows, moving.data + off + 24 + klen, rlen, &g);
    if (!err) err = rn_agg_window_index_put(a, &g);
    off += 24 + (size_t)klen + rlen;
  }
  msgpack_sbuffer_destroy(&moving);
  return err;
}

/* Opens "aw:" when the aggregate has grace (listing the windows made
 * before it had: the database's being there says they are listed), and
 * drops it when it has none, so that grace given again lists them anew. */
int rn_agg_windows_open(rn_aggregate *a, bool created)
{
  rn_pipeline *p = a->out->p;
  char name[RN_NAME_MAX + 8];
  snprintf(name, sizeof name, "%s%s", RN_DB_AGG_WINDOWS, a->out->name);
  MDB_dbi dbi;
  int rc = rn_store_dbi_open(&p->store, p->store.wtxn, name, 0, &dbi);
  if (rc && rc != MDB_NOTFOUND) return store_fail(a, rc);
  bool listed = rc == 0;
  if (!a->w.has_grace) return listed && (rc = rn_wb_drop(&p->store, p->store.wtxn, dbi, 1)) ? store_fail(a, rc) : 0;
  rc = rn_state_dbi(p, p->store.wtxn, RN_DB_AGG_WINDOWS, a->out->name, 0, &a->windows_dbi);
  return rc || listed || created ? rc : list_open_windows(a);
}

/* Makes the window stored under sk final: its row is stored as it is,
 * its state dropped. */
static int finalize_window(rn_aggregate *a, char *sk, size_t slen)
{
  MDB_val k = { slen, sk }, d;
  int rc = rn_wb_get(&a->out->p->store, txn_of(a), a->groups_dbi, &k, &d);
  if (rc) return rc == MDB_NOTFOUND ? 0 : store_fail(a, rc);
  group_entry e;
  if (!rn_agg_entry_parse(&k, &d, &e) || e.final)
    return rn_err_set(err_of(a), RN_ESTORE, "%s: a group's state could not be decoded", a->out->name);
  gkey g = { (char *)rn_scratch_copy(a->out->p, e.key, e.klen), e.klen, sk, slen };
  const char *head = rn_scratch_copy(a->out->p, d.mv_data, 16 + e.head_len); /* |rid|rows|[hashed key]| */
  if (!g.k || !head) return nomem(a);
  msgpack_object *st;
  if ((rc = rn_agg_decode_state(a, &e, &st))) return rc;
  msgpack_object ext[a->naggs ? a->naggs : 1];
  for (int i = 0; i < a->naggs; i++) ext[i] = UNKNOWN;
  const char *row;
  size_t len;
  if ((rc = rn_agg_result_row(a, &g, e.rows, st, ext, &row, &len))) return rc;
  MDB_cursor *cur; /* the value counts under |group key| */
  if ((rc = rn_wb_cursor_open(&a->out->p->store, txn_of(a), a->values_dbi, true, &cur))) return store_fail(a, rc);
  for (;;) { /* seek again after each delete: LMDB's cursor may sit past a page's end */
    MDB_val vk = { slen, sk }, vd;
    rc = mdb_cursor_get(cur, &vk, &vd, MDB_SET_RANGE);
    if (rc || vk.mv_size <= slen || memcmp(vk.mv_data, sk, slen) != 0) break;
    if ((rc = mdb_cursor_del(cur, 0))) break;
  }
  mdb_cursor_close(cur);
  if (rc && rc != MDB_NOTFOUND) return store_fail(a, rc);
  msgpack_sbuffer *b = &a->buf;
  msgpack_sbuffer_clear(b);
  rn_buf_write(b, head, 16 + e.head_len);
  rn_buf_write(b, &FINAL_MARK, 1);
  rn_buf_write(b, row, len);
  d = (MDB_val){ b->size, b->data };
  rc = rn_wb_put(&a->out->p->store, txn_of(a), a->groups_dbi, &k, &d, 0);
  return rc ? store_fail(a, rc) : 0;
}

/* Makes final, oldest first, every window max_ts has passed by its grace.
 * Within one LMDB transaction next_final says when the oldest open window
 * becomes final, so most events skip the index; a new transaction (a
 * commit, or a rollback that may bring windows back) works it out again. */
int rn_agg_finalize_windows(rn_aggregate *a, rn_agg_time max_ts)
{
  uint64_t serial = a->out->p->store.txn_serial;
  bool none_final = a->time_int ? max_ts.i < a->next_final_int : max_ts.d < a->next_final;
  if (a->next_final_txn == serial && none_final) return 0;
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn_of(a), a->windows_dbi, &cur);
  if (rc) return store_fail(a, rc);
  MDB_val k, d;
  int err = 0, made = 0; /* err is runnel's error; rc stays LMDB's */
  double next = HUGE_VAL;
  __int128 next_int = (__int128)1 << 120; /* none open: never */
  while (!err && (rc = mdb_cursor_get(cur, &k, &d, MDB_FIRST)) == 0) {
    msgpack_object kv[1]; /* the start (an int or a float: 9 bytes), then the stored group key */
    if (k.mv_size <= 9 || rn_key_decode(k.mv_data, 9, kv, 1, zone_of(a)) != 1) {
      err = rn_err_set(err_of(a), RN_ESTORE, "%s: a window index key could not be decoded", a->out->name);
      break;
    }
    rn_agg_time start = { as_double(&kv[0]), a->time_int ? as_int(&kv[0]) : 0 };
    if (!rn_agg_window_final(a, start, max_ts)) {
      next = start.d + a->w.size + a->w.grace;
      if (a->time_int) next_int = int_final_at(a, start.i);
      break;
    }
    char *sk = (char *)rn_scratch_copy(a->out->p, d.mv_data, d.mv_size); /* the group's stored key */
    size_t slen = d.mv_size;
    if (!sk) err = nomem(a);
    else if ((rc = mdb_cursor_del(cur, 0))) break;
    else if (!(err = finalize_window(a, sk, slen))) made++;
  }
  mdb_cursor_close(cur);
  if (!err && made) err = rn_agg_counter_add(a, FINAL_KEY, made);
  if (err) return err;
  if (rc != 0 && rc != MDB_NOTFOUND) return store_fail(a, rc);
  a->next_final_txn = serial;
  a->next_final = next;
  a->next_final_int = next_int;
  return 0;
}

/* ---- lateness (windowed streams with grace) ---- */

static int reserved_get(rn_aggregate *a, const char *key, double *v, bool *found)
{
  MDB_val k = { 1, (void *)key }, d;
  int rc = rn_wb_get(&a->out->p->store, txn_of(a), a->groups_dbi, &k, &d);
  *found = rc == 0;
  if (rc == 0) memcpy(v, d.mv_data, sizeof *v);
  return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_fail(a, rc);
}

static int reserved_put(rn_aggregate *a, const char *key, double v)
{
  MDB_val k = { 1, (void *)key }, d = { sizeof v, &v };
  int rc = rn_wb_put(&a->out->p->store, txn_of(a), a->groups_dbi, &k, &d, 0);
  return rc ? store_fail(a, rc) : 0;
}

/* Adds by to the reserved counter key (late or final windows). */
int rn_agg_counter_add(rn_aggregate *a, const char *key, double by)
{
  double v = 0;
  bool found;
  int rc = reserved_get(a, key, &v, &found);
  return rc ? rc : reserved_put(a, key, v + by);
}

/* The largest event time seen, under MAX_TS_KEY: |double| for a float
 * time column, |double|int64| for an int one (a state written before holds
 * the double alone: read as it is, clamped to int64). */
static int max_ts_get(rn_aggregate *a, rn_agg_time *max_ts, bool *seen)
{
  MDB_val k = { 1, (void *)MAX_TS_KEY }, d;
  int rc = rn_wb_get(&a->out->p->store, txn_of(a), a->groups_dbi, &k, &d);
  *seen = rc == 0;
  if (rc) return rc == MDB_NOTFOUND ? 0 : store_fail(a, rc);
  memcpy(&max_ts->d, d.mv_data, sizeof max_ts->d);
  if (d.mv_size >= 16) memcpy(&max_ts->i, (const char *)d.mv_data + 8, sizeof max_ts->i);
  else max_ts->i = max_ts->d >= 0x1p63 ? INT64_MAX : max_ts->d < -0x1p63 ? INT64_MIN : (int64_t)max_ts->d;
  return 0;
}

static int max_ts_put(rn_aggregate *a, rn_agg_time ts)
{
  char v[16];
  memcpy(v, &ts.d, 8);
  memcpy(v + 8, &ts.i, 8);
  MDB_val k = { 1, (void *)MAX_TS_KEY }, d = { a->time_int ? 16 : 8, v };
  int rc = rn_wb_put(&a->out->p->store, txn_of(a), a->groups_dbi, &k, &d, 0);
  return rc ? store_fail(a, rc) : 0;
}

/* Drops the windows of an event that are final (AGG-3); keeps the largest
 * event time seen and the late count in the aggregate's own database, so a
 * rollback rolls them back too. */
int rn_agg_drop_late(rn_aggregate *a, const msgpack_object *v, gkey *keys, int *n)
{
  rn_agg_time max_ts = { 0, 0 }, ts = { as_double(&v[a->w.slot]), a->time_int ? as_int(&v[a->w.slot]) : 0 };
  bool seen;
  int rc = max_ts_get(a, &max_ts, &seen);
  if (rc) return rc;
  int kept = 0;
  for (int i = 0; i < *n; i++) {
    rn_agg_time start;
    if ((rc = rn_agg_window_start_of(a, keys[i].k, keys[i].len, &start))) return rc;
    if (seen && rn_agg_window_final(a, start, max_ts)) continue;
    keys[kept++] = keys[i];
  }
  if (kept < *n && (rc = rn_agg_counter_add(a, LATE_KEY, 1))) return rc;
  *n = kept;
  if (seen && (a->time_int ? ts.i <= max_ts.i : ts.d <= max_ts.d)) return 0;
  if ((rc = max_ts_put(a, ts))) return rc;
  return rn_agg_finalize_windows(a, ts); /* none of this event's own windows is final at ts */
}

static uint64_t counter_read(const rn_rel *r, const char *key)
{
  rn_aggregate *a = r->ctx;
  rn_pipeline *p = r->p;
  MDB_txn *txn;
  if (rn_store_reader(&p->store, &txn, &p->err)) return 0;
  MDB_val k = { 1, (void *)key }, d;
  double v = 0;
  if (rn_wb_get(&p->store, txn, a->groups_dbi, &k, &d) == 0) memcpy(&v, d.mv_data, sizeof v);
  rn_store_reader_done(&p->store);
  return (uint64_t)v;
}

uint64_t rn_aggregate_late(const rn_rel *r) { return counter_read(r, LATE_KEY); }
uint64_t rn_aggregate_final(const rn_rel *r) { return counter_read(r, FINAL_KEY); }
bool rn_aggregate_counter_key(const MDB_val *k) { return reserved(k); }

