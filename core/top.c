/* top.c — rel:top{ n, by, order, rank }: per group of the by columns, the
 * first n rows of a table-like input in an order, with their 1-based rank.
 *
 * Rules (TOP-n in specs):
 * (1) Rows are ordered by the order columns, each ascending or descending,
 *     then by row id ascending: a total order, so the top is deterministic.
 *     Null sorts after every value, in either direction. Ranks are row
 *     numbers 1..n (equal values get consecutive ranks, by id).
 * (2) The output holds the input's columns then the rank column; a row
 *     keeps its input row id. Its changes are the real rank movements: a row
 *     whose rank (or row) changes is an UPDATE with its old and new rank, a
 *     row entering the top an INSERT, one leaving it a DELETE. A row moving
 *     to another group while in both tops is one UPDATE.
 * (3) Cost: a change seeks its group in O(log size) LMDB work, then walks
 *     only the rows whose rank really changes (plus one row filling in or
 *     pushed out). A group is never rescanned; a new or stale state, or a
 *     changed declaration, is rebuilt from the input at open.
 * (4) Group and order values may be of any length, compared whole
 *     (longorder.h: a row whose values pass a key is found in its bucket).
 *     A group whose values take more than RN_LONGORDER_INLINE bytes (a long
 *     group) has its rows in the bucket of its first RN_LONGORDER_INLINE
 *     bytes, with the other long groups sharing them: there an entry's
 *     group is told by its row's values, and a seek of its group's first
 *     or last entry is a search of the bucket by label (O(64) seeks).
 *
 * State, "<prefix>" name (store.h); g: the by values' key encoding (key.h),
 * o: the order key (rn_order_append), id: the input row id:
 *
 *     "tt:"  the tops       |g|o|u64 id BE| -> |u64 rank|row|
 *     "tx:"  the rest       |g|o|u64 id BE| -> |row|
 *     (g and o longer than a key holds: longorder.h; a long g's rows are
 *     in the bucket of its first 503 bytes, in (g, o, id) order)
 *     "tp:"  "decl" -> msgpack [n, [by slots], [order slots], [desc flags], format]
 *            "input" -> the input's name (for runnel verify)
 *
 * Every input row is in "tt:" or "tx:", never both; a group's "tx:" rows
 * all sort after its "tt:" rows, and "tx:" holds rows of a group only while
 * its top is full. So a group's last "tt:" entry (one seek) gives its size
 * and its boundary, and its first "tx:" entry (one seek) fills a vacancy. */
#include "top.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evolve.h"
#include "evolve_log.h"
#include "key.h"
#include "longorder.h"
#include "ops.h"
#include "row.h"
#include "scan.h"
#include "snapshot.h"

#define MAX_KEY RN_STORE_KEY_MAX
#define NULL_LAST 0xFF    /* an order key's null: after every tag, inverted or not */
#define ORDER_INT_ZERO 0x11 /* the tag of the int 0 in an order key (put_compact_int) */

typedef struct rn_top {
  rn_rel *out;            /* the relation */
  MDB_dbi top_dbi;        /* "tt:" */
  MDB_dbi rest_dbi;       /* "tx:" */
  MDB_dbi decl_dbi;       /* "tp:" */
  uint64_t n;
  int nby;
  int by[RN_TOP_COLS];
  rn_order order;
  int in_ncols;
  MDB_cursor *top_cur, *rest_cur; /* on "tt:" and "tx:" in the write transaction … */
  uint64_t cur_txn;       /* … of this store txn_serial (LMDB frees them with it) */
  rn_change *pending;     /* this change's output changes, emitted at its end */
  size_t npending, cap;
  msgpack_sbuffer kbuf;   /* building keys and ranked rows */
  rn_longorder lo;        /* its long keys' (longorder.h) */
  msgpack_sbuffer gbuf;   /* an entry's group values (a long group's walk) */
  msgpack_zone gzone;     /* its row, decoded */
} rn_top;

/* A row's place: its key and the length of its group prefix; a long key
 * (longorder.h) holds no id: its entry's value ends with it. A long group
 * (4): glen is its bucket's prefix, g its whole group values. */
typedef struct tkey {
  const char *k;
  size_t len, glen;
  bool lng;
  uint64_t id;            /* a long key's */
  bool lgroup;            /* a long group's */
  const char *g;          /* the group values' encoding (a short group's: k's first glen bytes) */
  size_t gl;
} tkey;

static int store_fail(rn_top *t, int rc)
{
  return rn_store_fail(&t->out->p->err, rc, t->out->name);
}

/* RN_ESTORE: t's state is damaged, as detail (a printf format) says;
 * named as the other damage messages name theirs: the state's path, then
 * the top. */
static int damaged(rn_top *t, const char *detail, ...) __attribute__((format(printf, 2, 3)));
static int damaged(rn_top *t, const char *detail, ...)
{
  char what[1200];
  va_list ap;
  va_start(ap, detail);
  vsnprintf(what, sizeof what, detail, ap);
  va_end(ap);
  return rn_err_set(&t->out->p->err, RN_ESTORE, "state damaged: %s: top \"%s\": %s", t->out->p->store.path,
                    t->out->name, what);
}

static int no_memory(rn_top *t)
{
  return rn_err_set(&t->out->p->err, RN_ENOMEM, "out of memory");
}

/* The cursor on dbi ("tt:" or "tx:") kept for the write transaction txn
 * (every change and rebuild runs in it): opening one per seek would cost
 * a good part of the seek. Never closed here: LMDB frees it with txn. */
static int cursor(rn_top *t, MDB_txn *txn, MDB_dbi dbi, MDB_cursor **out)
{
  rn_store *s = &t->out->p->store;
  if (t->cur_txn != s->txn_serial || !t->top_cur || !t->rest_cur) {
    t->top_cur = t->rest_cur = NULL;
    int rc = mdb_cursor_open(txn, t->top_dbi, &t->top_cur);
    if (!rc) rc = mdb_cursor_open(txn, t->rest_dbi, &t->rest_cur);
    if (rc) { t->top_cur = t->rest_cur = NULL; return store_fail(t, rc); }
    t->cur_txn = s->txn_serial;
  }
  *out = dbi == t->top_dbi ? t->top_cur : t->rest_cur;
  return 0;
}

/* ---- order keys (shared with index.c) ---- */

/* An int as a tag then its significant bytes big-endian: a negative one
 * 0x10 - n (n bytes of it; -1: none), another 0x11 + n (0: none). Numeric
 * order, prefix-free, between the keys of booleans and floats (key.h) like
 * rn_key_append's 9 bytes; a score or an id takes 2 to 5: smaller state,
 * fewer pages to touch per change. */
static void put_compact_int(msgpack_sbuffer *out, const msgpack_object *v)
{
  bool negative = v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER;
  uint64_t u = negative ? (uint64_t)v->via.i64 : v->via.u64;
  uint64_t magnitude = negative ? ~u : u;
  int n = 0;
  while (n < 8 && magnitude >> (8 * n)) n++;
  unsigned char b[9];
  b[0] = (unsigned char)(negative ? ORDER_INT_ZERO - 1 - n : ORDER_INT_ZERO + n);
  for (int i = 0; i < n; i++) b[1 + i] = (unsigned char)(u >> (8 * (n - 1 - i)));
  rn_buf_write(out, (const char *)b, (size_t)n + 1);
}

int rn_order_value_append(msgpack_sbuffer *out, const msgpack_object *v)
{
  if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER && v->type != MSGPACK_OBJECT_NEGATIVE_INTEGER)
    return rn_key_append(out, v);
  put_compact_int(out, v);
  return 0;
}

int rn_order_append_one(const rn_order *o, int i, const msgpack_object *v, msgpack_sbuffer *out)
{
  if (v->type == MSGPACK_OBJECT_NIL) {
    char t = (char)NULL_LAST;
    rn_buf_write(out, &t, 1);
    return 0;
  }
  size_t at = out->size;
  if (rn_order_value_append(out, v) != 0) return -1;
  if (o->desc[i])
    for (size_t b = at; b < out->size; b++) out->data[b] = (char)~out->data[b];
  return 0;
}

int rn_order_append(const rn_order *o, const msgpack_object *vals, msgpack_sbuffer *out, int *bad_slot)
{
  for (int i = 0; i < o->n; i++)
    if (rn_order_append_one(o, i, &vals[o->slots[i]], out) != 0) {
      *bad_slot = o->slots[i];
      return -1;
    }
  return 0;
}

int rn_order_resolve(rn_pipeline *p, const char *what, const rn_schema *s, int n,
                     const char *const *names, const bool *desc, rn_order *o)
{
  if (n < 1 || n > RN_TOP_COLS)
    return rn_err_set(&p->err, RN_EINVAL, "%s: an order needs 1 to %d columns, got %d", what, RN_TOP_COLS, n);
  o->n = n;
  for (int i = 0; i < n; i++) {
    int slot = rn_schema_slot(s, names[i], strlen(names[i]));
    if (slot < 0) return rn_err_set(&p->err, RN_EINVAL, "%s: no column \"%s\" to order by", what, names[i]);
    if (!rn_type_is_scalar(s->cols[slot].type))
      return rn_err_set(&p->err, RN_EINVAL, "%s: column \"%s\" has type %s: only scalar columns have an order",
                        what, names[i], rn_type_name(s->cols[slot].type));
    o->slots[i] = slot;
    o->desc[i] = desc[i];
  }
  return 0;
}

int rn_order_record_input(rn_rel *out, MDB_txn *txn, MDB_dbi decl_dbi, bool *changed)
{
  static char input_key[] = "input";
  MDB_val k = { 5, input_key }, v = { strlen(out->input->name), (void *)out->input->name }, old;
  if (rn_group_oom(out->p, 0)) return out->p->err.code;
  int rc = mdb_get(txn, decl_dbi, &k, &old);
  if (rc == 0 && (old.mv_size != v.mv_size || memcmp(old.mv_data, v.mv_data, v.mv_size) != 0)) *changed = true;
  rc = rc == 0 || rc == MDB_NOTFOUND ? mdb_put(txn, decl_dbi, &k, &v, 0) : rc;
  return rc ? rn_store_fail(&out->p->err, rc, out->name) : 0;
}

/* ---- keys and rows ---- */

/* The error of rn_longorder_key's rc. */
static int longorder_fail(rn_top *t, int rc)
{
  if (rc == RN_LONGORDER_DAMAGED)
    return damaged(t, "an entry of its order does not decode");
  return rc == ENOMEM ? no_memory(t) : store_fail(t, rc);
}

/* The place of row (of id) in t's state, in scratch. A long key's
 * (longorder.h) is its entry's, or when it has none (a row not yet
 * placed: place) a new one made in txn; *moved: other entries' keys
 * changed for it. */
static int row_key(rn_top *t, MDB_txn *txn, const char *row, size_t len, uint64_t id, bool place, tkey *key,
                   bool *moved)
{
  *moved = false;
  rn_pipeline *p = t->out->p;
  const msgpack_object *vals = rn_row_unpack(row, len, t->in_ncols, &p->scratch);
  if (!vals) return damaged(t, "a row of %s does not decode", t->out->input->name);
  msgpack_sbuffer *b = &t->kbuf;
  b->size = 0;
  for (int i = 0; i < t->nby; i++)
    if (rn_order_value_append(b, &vals[t->by[i]]) != 0)
      return rn_err_set(&p->err, RN_EINVAL, "%s: column \"%s\" of row id %llu is NaN: not a group",
                        t->out->name, t->out->input->schema->cols[t->by[i]].name, (unsigned long long)id);
  key->gl = b->size;
  key->lgroup = key->gl > RN_LONGORDER_INLINE;
  key->glen = key->lgroup ? RN_LONGORDER_INLINE : key->gl;
  key->g = key->lgroup ? rn_scratch_copy(p, b->data, key->gl) : NULL;
  if (key->lgroup && !key->g) return no_memory(t);
  int bad = 0;
  if (rn_order_append(&t->order, vals, b, &bad) != 0)
    return rn_err_set(&p->err, RN_EINVAL, "%s: column \"%s\" of row id %llu is NaN: NaN has no place in an order",
                      t->out->name, t->out->input->schema->cols[bad].name, (unsigned long long)id);
  if (rn_group_oom(p, 0)) return p->err.code;
  key->lng = b->size > RN_LONGORDER_INLINE;
  key->id = id;
  if (key->lng) {
    char lk[MAX_KEY];
    int rc = rn_longorder_key(txn, &t->lo, b->data, b->size, id, place, lk, moved);
    if (rc == MDB_NOTFOUND)
      return damaged(t, "%s changed a row it never held", t->out->input->name);
    if (rc) return longorder_fail(t, rc);
    key->k = rn_scratch_copy(p, lk, MAX_KEY);
    key->len = MAX_KEY;
    if (!key->lgroup) key->g = key->k;
    return key->k ? 0 : no_memory(t);
  }
  char idk[8];
  rn_be64_put(idk, id);
  rn_buf_write(b, idk, 8);
  if (rn_group_oom(p, 0)) return p->err.code;
  key->k = rn_scratch_copy(p, b->data, b->size);
  key->len = b->size;
  key->g = key->k;
  return key->k ? 0 : no_memory(t);
}

/* memcmp order of two keys, shorter first on a tie (LMDB's order). */
static int key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
  int c = memcmp(a, b, alen < blen ? alen : blen);
  return c ? c : (alen > blen) - (alen < blen);
}

/* Whether key k starts with short group g's values. */
static bool group_key_in(const MDB_val *k, const tkey *g)
{
  return k->mv_size >= g->glen && memcmp(k->mv_data, g->k, g->glen) == 0;
}

/* Where entry k -> v (its row after skip bytes) sorts against g's group
 * into *where: < 0 before it, 0 in it, > 0 after it. Its key's prefix
 * tells, and in a long group's bucket its row's group values (4). */
static int group_cmp(rn_top *t, const MDB_val *k, const MDB_val *v, size_t skip, const tkey *g, int *where)
{
  *where = key_cmp(k->mv_data, k->mv_size < g->glen ? k->mv_size : g->glen, g->k, g->glen);
  if (*where || !g->lgroup) return 0;
  uint64_t id;
  size_t len;
  const msgpack_object *vals = NULL;
  if (rn_longorder_entry(k, v, skip, &id, &len)) {
    msgpack_zone_clear(&t->gzone);
    vals = rn_row_unpack((const char *)v->mv_data + skip, len, t->in_ncols, &t->gzone);
  }
  msgpack_sbuffer *b = &t->gbuf;
  b->size = 0;
  for (int i = 0; vals && i < t->nby; i++)
    if (rn_order_value_append(b, &vals[t->by[i]]) != 0) vals = NULL;
  if (rn_group_oom(t->out->p, 0)) return t->out->p->err.code;
  if (!vals)
    return damaged(t, "an entry of its order does not decode");
  *where = key_cmp(b->data, b->size, g->g, g->gl);
  return 0;
}

/* row with rank appended as a last column, in scratch. */
static const char *ranked(rn_top *t, const char *row, size_t len, uint64_t rank, size_t *out_len)
{
  rn_pipeline *p = t->out->p;
  size_t starts[1];
  if (rn_row_spans(row, len, t->in_ncols, 0, starts) != 0) return NULL;
  msgpack_sbuffer *b = &t->kbuf;
  b->size = 0;
  msgpack_packer pk;
  msgpack_packer_init(&pk, b, rn_buf_write);
  msgpack_pack_array(&pk, (size_t)t->in_ncols + 1);
  rn_buf_write(b, row + starts[0], len - starts[0]);
  msgpack_pack_uint64(&pk, rank);
  *out_len = b->size;
  return rn_group_oom(p, 0) ? NULL : rn_scratch_copy(p, b->data, b->size);
}

/* Queues an output change; rows are input rows, ranked here. */
static int queue(rn_top *t, rn_verb verb, uint64_t id, const char *old, size_t old_len, uint64_t old_rank,
                 const char *row, size_t len, uint64_t rank)
{
  if (t->npending == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 16;
    rn_change *grown = realloc(t->pending, cap * sizeof *grown);
    if (!grown) return no_memory(t);
    t->pending = grown;
    t->cap = cap;
  }
  rn_change c = { .verb = verb, .id = id };
  if (old && !(c.old = ranked(t, old, old_len, old_rank, &c.old_len))) return no_memory(t);
  if (row && !(c.row = ranked(t, row, len, rank, &c.row_len))) return no_memory(t);
  t->pending[t->npending++] = c;
  return 0;
}

/* ---- the state's entries ---- */

/* A long key's entry's value ends with its id (longorder.h). */
static int put_top(rn_top *t, MDB_txn *txn, const tkey *k, uint64_t rank, const char *row, size_t len)
{
  MDB_val key = { k->len, (void *)k->k }, v = { 8 + len + (k->lng ? 8 : 0), NULL };
  int rc = mdb_put(txn, t->top_dbi, &key, &v, MDB_RESERVE);
  if (rc) return store_fail(t, rc);
  memcpy(v.mv_data, &rank, 8);
  memcpy((char *)v.mv_data + 8, row, len);
  if (k->lng) rn_be64_put((char *)v.mv_data + 8 + len, k->id);
  return 0;
}

static int put_rest(rn_top *t, MDB_txn *txn, const tkey *k, const char *row, size_t len)
{
  MDB_val key = { k->len, (void *)k->k }, v = { len + (k->lng ? 8 : 0), (void *)row };
  int rc = k->lng ? mdb_put(txn, t->rest_dbi, &key, &v, MDB_RESERVE) : mdb_put(txn, t->rest_dbi, &key, &v, 0);
  if (!rc && k->lng) {
    memcpy(v.mv_data, row, len);
    rn_be64_put((char *)v.mv_data + len, k->id);
  }
  return rc ? store_fail(t, rc) : 0;
}

/* One entry of a group, copied out of LMDB's pages into scratch. */
typedef struct entry {
  bool found;
  tkey key;
  uint64_t rank;          /* "tt:" entries */
  const char *row;
  size_t len;
} entry;

static int copy_entry(rn_top *t, const MDB_val *k, const MDB_val *v, bool ranked_value, const tkey *g, entry *e)
{
  rn_pipeline *p = t->out->p;
  size_t skip = ranked_value ? 8 : 0;
  if (v->mv_size < skip || k->mv_size < g->glen + 8)
    return damaged(t, "an entry of its order is malformed");
  e->found = true;
  e->key.glen = g->glen;
  e->key.lgroup = g->lgroup;
  e->key.g = g->g;
  e->key.gl = g->gl;
  e->key.len = k->mv_size;
  e->key.k = rn_scratch_copy(p, k->mv_data, k->mv_size);
  size_t row_len;
  e->key.lng = rn_longorder_entry(k, v, skip, &e->key.id, &row_len);
  e->len = e->key.lng ? row_len : v->mv_size - skip;
  e->row = rn_scratch_copy(p, (const char *)v->mv_data + skip, e->len);
  e->rank = 0;
  if (ranked_value) memcpy(&e->rank, v->mv_data, 8);
  return e->key.k && e->row ? 0 : no_memory(t);
}

static uint64_t key_id(const tkey *k)
{
  return k->lng ? k->id : rn_be64_get(k->k + k->len - 8);
}

/* What a long group's search of its bucket compares entries with (4). */
typedef struct group_target {
  rn_top *t;
  const tkey *g;
  int at;                 /* what an entry of the group is: -1 before what is sought, +1 after */
  bool failed;            /* group_cmp's error (said) */
} group_target;

static int cmp_group(void *ctx, int d, const MDB_val *k, const MDB_val *v, int *c)
{
  group_target *gt = ctx;
  int where, rc = group_cmp(gt->t, k, v, gt->t->lo.skip[d], gt->g, &where);
  *c = where < 0 ? -1 : where > 0 ? 1 : gt->at;
  gt->failed = rc != 0;
  return rc;
}

/* The entry of a long group g in dbi index d ("tt:" 0, "tx:" 1) that is
 * first (last false) or last in it, by a search of its bucket: O(64)
 * seeks, however many rows the long groups sharing its first bytes hold. */
static int long_group_end(rn_top *t, MDB_txn *txn, const tkey *g, int d, bool last, entry *e)
{
  e->found = false;
  group_target gt = { t, g, last ? -1 : 1, false };
  rn_longorder_near near;
  int rc = rn_longorder_search(txn, &t->lo, g->k, 1u << d, cmp_group, &gt, &near);
  if (rc) return gt.failed ? rc : store_fail(t, rc);
  bool has = last ? near.has_below : near.has_above;
  if (!has) return 0;
  char key[MAX_KEY];
  memcpy(key, g->k, RN_LONGORDER_INLINE);
  rn_be64_put(key + RN_LONGORDER_INLINE, last ? near.below : near.above);
  MDB_val k = { MAX_KEY, key }, v;
  rc = mdb_get(txn, t->lo.dbi[d], &k, &v);
  if (rc) return store_fail(t, rc);
  int where;
  if ((rc = group_cmp(t, &k, &v, t->lo.skip[d], g, &where)) || where != 0) return rc;
  return copy_entry(t, &k, &v, d == 0, g, e);
}

/* The first "tx:" entry of g's group (a seek; a long group's: a search). */
static int group_first_rest(rn_top *t, MDB_txn *txn, const tkey *g, entry *e)
{
  e->found = false;
  if (g->lgroup) return long_group_end(t, txn, g, 1, false, e);
  MDB_cursor *cur;
  int rc = cursor(t, txn, t->rest_dbi, &cur);
  if (rc) return rc;
  MDB_val k = { g->glen, (void *)g->k }, v;
  rc = mdb_cursor_get(cur, &k, &v, g->glen ? MDB_SET_RANGE : MDB_FIRST);
  if (rc == 0 && group_key_in(&k, g)) rc = copy_entry(t, &k, &v, false, g, e);
  else if (rc == 0 || rc == MDB_NOTFOUND) rc = 0;
  else rc = store_fail(t, rc);
  return rc;
}

/* The last "tt:" entry of g's group (a seek just past the group, one step
 * back): its rank is the size of the top. */
static int group_last_top(rn_top *t, MDB_txn *txn, const tkey *g, entry *e)
{
  e->found = false;
  if (g->lgroup) return long_group_end(t, txn, g, 0, true, e);
  char end[MAX_KEY];
  size_t elen = g->glen;
  memcpy(end, g->k, elen);
  while (elen && (unsigned char)end[elen - 1] == 0xFF) elen--;
  if (elen) end[elen - 1]++; /* the first key after every key starting with g */
  MDB_cursor *cur;
  int rc = cursor(t, txn, t->top_dbi, &cur);
  if (rc) return rc;
  MDB_val k = { elen, end }, v;
  rc = elen ? mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE) : MDB_NOTFOUND;
  rc = rc == 0 ? mdb_cursor_get(cur, &k, &v, MDB_PREV) : rc == MDB_NOTFOUND ? mdb_cursor_get(cur, &k, &v, MDB_LAST) : rc;
  if (rc == 0 && group_key_in(&k, g)) rc = copy_entry(t, &k, &v, true, g, e);
  else if (rc == 0 || rc == MDB_NOTFOUND) rc = 0;
  else rc = store_fail(t, rc);
  return rc;
}

/* Moves by delta the rank of every "tt:" entry of from's group from from
 * (inclusive) up to stop (exclusive; NULL: the group's end), queueing their
 * UPDATEs; *first: the rank the first one had (0 if none), *moved: how
 * many. Only these rows' ranks change: the walk is the cost bound (3). */
static int shift(rn_top *t, MDB_txn *txn, const tkey *from, const tkey *stop, int delta,
                 uint64_t *first, uint64_t *moved)
{
  rn_pipeline *p = t->out->p;
  *first = *moved = 0;
  MDB_cursor *cur;
  int rc = cursor(t, txn, t->top_dbi, &cur);
  if (rc) return rc;
  MDB_val k = { from->len, (void *)from->k }, v;
  int where;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (stop && key_cmp(k.mv_data, k.mv_size, stop->k, stop->len) >= 0) break;
    if ((rc = group_cmp(t, &k, &v, 8, from, &where)) || where != 0) break;
    entry e;
    if ((rc = copy_entry(t, &k, &v, true, from, &e))) break;
    uint64_t rank = e.rank + (uint64_t)(int64_t)delta;
    if (!*moved) *first = e.rank;
    ++*moved;
    char *val = (char *)rn_scratch_copy(p, v.mv_data, v.mv_size);
    if (!val) { rc = no_memory(t); break; }
    memcpy(val, &rank, 8);
    /* the key as copied, not k: a row on an overflow page LMDB cannot
     * rewrite in place has its node deleted from the page k points into,
     * then added again with the key given */
    MDB_val nv = { v.mv_size, val }, ck = { e.key.len, (void *)e.key.k };
    if ((rc = mdb_cursor_put(cur, &ck, &nv, MDB_CURRENT))) { rc = store_fail(t, rc); break; }
    if ((rc = queue(t, RN_UPDATE, key_id(&e.key), e.row, e.len, e.rank, e.row, e.len, rank))) break;
  }
  return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Moves e (a "tx:" entry) into the top at rank, queueing its INSERT. */
static int promote(rn_top *t, MDB_txn *txn, const entry *e, uint64_t rank)
{
  MDB_val k = { e->key.len, (void *)e->key.k };
  int rc = mdb_del(txn, t->rest_dbi, &k, NULL);
  if (rc) return store_fail(t, rc);
  rc = put_top(t, txn, &e->key, rank, e->row, e->len);
  return rc ? rc : queue(t, RN_INSERT, key_id(&e->key), NULL, 0, 0, e->row, e->len, rank);
}

/* Moves e (a "tt:" entry) out of the top, queueing its DELETE. */
static int demote(rn_top *t, MDB_txn *txn, const entry *e)
{
  MDB_val k = { e->key.len, (void *)e->key.k };
  int rc = mdb_del(txn, t->top_dbi, &k, NULL);
  if (rc) return store_fail(t, rc);
  rc = put_rest(t, txn, &e->key, e->row, e->len);
  return rc ? rc : queue(t, RN_DELETE, key_id(&e->key), e->row, e->len, e->rank, NULL, 0, 0);
}

/* The rank of k in the top, 0 when it is in the rest (or absent). */
static int rank_of(rn_top *t, MDB_txn *txn, const tkey *k, uint64_t *rank)
{
  MDB_val key = { k->len, (void *)k->k }, v;
  int rc = mdb_get(txn, t->top_dbi, &key, &v);
  *rank = 0;
  if (rc == 0 && v.mv_size >= 8) memcpy(rank, v.mv_data, 8);
  return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_fail(t, rc);
}

/* ---- the three moves ---- */

/* Removes the row at k; *rank: the rank it had (0: not in the top; known
 * when the caller looked it up already). The rows after it move up one,
 * the group's first "tx:" row fills in. */
static int take_out(rn_top *t, MDB_txn *txn, const tkey *k, bool known, uint64_t *rank)
{
  int rc = known ? 0 : rank_of(t, txn, k, rank);
  if (rc) return rc;
  MDB_val key = { k->len, (void *)k->k };
  if (!*rank) {
    rc = mdb_del(txn, t->rest_dbi, &key, NULL);
    if (rc == MDB_NOTFOUND)
      return damaged(t, "%s deleted a row it never held", t->out->input->name);
    return rc ? store_fail(t, rc) : 0;
  }
  if ((rc = mdb_del(txn, t->top_dbi, &key, NULL))) return store_fail(t, rc);
  uint64_t first, moved;
  entry fill;
  rc = shift(t, txn, k, NULL, -1, &first, &moved);
  if (!rc) rc = group_first_rest(t, txn, k, &fill);
  return rc || !fill.found ? rc : promote(t, txn, &fill, *rank + moved);
}

/* Adds row at k; *rank: its rank (0: not in the top). A full top whose
 * last row sorts after k pushes that row out. known_last: the group's last
 * top entry when the caller sought it already (else NULL). */
static int put_in(rn_top *t, MDB_txn *txn, const tkey *k, const char *row, size_t len, const entry *known_last,
                  uint64_t *rank)
{
  entry last;
  int rc = known_last ? 0 : group_last_top(t, txn, k, &last);
  if (known_last) last = *known_last;
  uint64_t size = last.found ? last.rank : 0;
  *rank = 0;
  if (rc) return rc;
  if (size >= t->n) {
    if (key_cmp(k->k, k->len, last.key.k, last.key.len) > 0) return put_rest(t, txn, k, row, len);
    if ((rc = demote(t, txn, &last))) return rc;
    size--;
  }
  uint64_t first, moved;
  rc = shift(t, txn, k, NULL, +1, &first, &moved);
  *rank = moved ? first : size + 1;
  return rc ? rc : put_top(t, txn, k, *rank, row, len);
}

/* Queues the DELETE of the row c leaving the top from rank a, first of the
 * change's output: a reader applying them in order never sees two rows
 * holding one rank at its end. */
static int queue_leaving(rn_top *t, const rn_change *c, uint64_t a)
{
  int rc = queue(t, RN_DELETE, c->id, c->old, c->old_len, a, NULL, 0, 0);
  if (rc) return rc;
  rn_change leaving = t->pending[t->npending - 1];
  memmove(t->pending + 1, t->pending, (t->npending - 1) * sizeof *t->pending);
  t->pending[0] = leaving;
  return 0;
}

/* The row's own change once it left ko (rank a, 0: not in the top) and
 * reached kn (rank b): (2). */
static int queue_own(rn_top *t, const rn_change *c, uint64_t a, uint64_t b)
{
  if (a && b) return queue(t, RN_UPDATE, c->id, c->old, c->old_len, a, c->row, c->row_len, b);
  if (a) return queue_leaving(t, c, a);
  if (b) return queue(t, RN_INSERT, c->id, NULL, 0, 0, c->row, c->row_len, b);
  return 0;
}

/* A row of one group from ko to kn, ko's rank a > 0 (already known):
 * only the rows between its two places move (3). */
static int move_in_top(rn_top *t, MDB_txn *txn, const rn_change *c, const tkey *ko, const tkey *kn, uint64_t a)
{
  MDB_val key = { ko->len, (void *)ko->k };
  int rc = mdb_del(txn, t->top_dbi, &key, NULL);
  if (rc) return store_fail(t, rc);
  uint64_t first, moved, b;
  if (key_cmp(kn->k, kn->len, ko->k, ko->len) < 0) { /* up: [kn, ko) move down one */
    rc = shift(t, txn, kn, ko, +1, &first, &moved);
    b = moved ? first : a;
  } else {
    entry fill;
    if ((rc = group_first_rest(t, txn, ko, &fill))) return rc;
    if (fill.found && key_cmp(kn->k, kn->len, fill.key.k, fill.key.len) > 0) { /* out of the top */
      rc = shift(t, txn, ko, NULL, -1, &first, &moved);
      if (!rc) rc = promote(t, txn, &fill, a + moved);
      if (!rc) rc = put_rest(t, txn, kn, c->row, c->row_len);
      return rc ? rc : queue_leaving(t, c, a);
    }
    rc = shift(t, txn, ko, kn, -1, &first, &moved); /* down: (ko, kn) move up one */
    b = a + moved;
  }
  if (!rc) rc = put_top(t, txn, kn, b, c->row, c->row_len);
  return rc ? rc : queue(t, RN_UPDATE, c->id, c->old, c->old_len, a, c->row, c->row_len, b);
}

/* Applies c to the state, queueing the output changes. */
static int place(rn_top *t, MDB_txn *txn, const rn_change *c)
{
  tkey ko = { 0 }, kn = { 0 };
  bool moved = false, ignored;
  int rc = c->old ? row_key(t, txn, c->old, c->old_len, c->id, false, &ko, &ignored) : 0;
  if (!rc && c->row) rc = row_key(t, txn, c->row, c->row_len, c->id, true, &kn, &moved);
  if (!rc && moved && c->old) rc = row_key(t, txn, c->old, c->old_len, c->id, false, &ko, &ignored); /* relabelled */
  if (rc) return rc;
  uint64_t a = 0, b = 0;
  bool same_group = c->old && c->row && ko.gl == kn.gl && memcmp(ko.g, kn.g, ko.gl) == 0;
  entry last = { .found = false };
  if (same_group && (rc = group_last_top(t, txn, &ko, &last))) return rc;
  /* a row after the group's last top row is in the rest: one seek says so */
  bool in_rest = same_group && (!last.found || key_cmp(ko.k, ko.len, last.key.k, last.key.len) > 0);
  if (same_group && !in_rest && (rc = rank_of(t, txn, &ko, &a))) return rc;
  if (same_group && a && key_cmp(ko.k, ko.len, kn.k, kn.len) == 0) { /* only other columns changed */
    rc = put_top(t, txn, &kn, a, c->row, c->row_len);
    return rc ? rc : queue_own(t, c, a, a);
  }
  if (same_group && a) return move_in_top(t, txn, c, &ko, &kn, a);
  if (c->old && (rc = take_out(t, txn, &ko, same_group, &a))) return rc;
  if (c->row && (rc = put_in(t, txn, &kn, c->row, c->row_len, in_rest ? &last : NULL, &b))) return rc;
  return queue_own(t, c, a, b);
}

/* Counts the queued INSERTs and DELETEs into the relation's row count. */
static void count_pending(rn_top *t)
{
  for (size_t i = 0; i < t->npending; i++)
    t->out->count += t->pending[i].verb == RN_INSERT ? 1 : t->pending[i].verb == RN_DELETE ? (uint64_t)-1 : 0;
}

/* The apply (ops.h): the state first, then the queued changes, so that no
 * cursor of ours is open while the relations downstream write. */
static int top_apply(rn_rel *r, rn_rel *from, const rn_change *c)
{
  (void)from;
  rn_top *t = r->ctx;
  if (c->old && c->row && c->old_len == c->row_len && memcmp(c->old, c->row, c->row_len) == 0) return 0;
  t->npending = 0;
  int rc = place(t, r->p->store.wtxn, c);
  if (rc) return rc;
  count_pending(t);
  for (size_t i = 0; !rc && i < t->npending; i++) rc = rn_emit(r, &t->pending[i]);
  return rc;
}

/* ---- scan: the tops in group then rank order ---- */

typedef struct top_scan {
  rn_top *t;
  rn_scan_fn fn;
  void *ctx;
} top_scan;

static int scan_in(void *ctx, MDB_txn *txn, bool own_scratch)
{
  top_scan *s = ctx;
  rn_top *t = s->t;
  rn_pipeline *p = t->out->p;
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn, t->top_dbi, &cur);
  if (rc) return store_fail(t, rc);
  MDB_val k, v;
  for (int mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !rc && mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    uint64_t rank = 0;
    size_t len = 0;
    const char *row = NULL;
    uint64_t id = 0;
    size_t row_len = v.mv_size - 8;
    if (v.mv_size >= 8 && k.mv_size >= 8) {
      memcpy(&rank, v.mv_data, 8);
      if (!rn_longorder_entry(&k, &v, 8, &id, &row_len)) id = rn_be64_get((const char *)k.mv_data + k.mv_size - 8);
      row = ranked(t, (const char *)v.mv_data + 8, row_len, rank, &len);
    }
    rc = row ? s->fn(s->ctx, id, row, len)
             : damaged(t, "a row of its top does not decode");
    if (own_scratch) msgpack_zone_clear(&p->scratch);
  }
  mdb_cursor_close(cur);
  return rc;
}

static int top_scan_rows(rn_rel *r, rn_scan_fn fn, void *ctx)
{
  top_scan s = { r->ctx, fn, ctx };
  return rn_snapshot_read(r->p, r->name, NULL, scan_in, &s);
}

/* ---- state: opened, checked against the declaration, rebuilt ---- */

/* The declaration as stored under "decl" (see the drawing). */
static void describe(const rn_top *t, msgpack_sbuffer *out)
{
  msgpack_packer pk;
  msgpack_packer_init(&pk, out, rn_buf_write);
  msgpack_pack_array(&pk, 5);
  msgpack_pack_uint64(&pk, t->n);
  msgpack_pack_array(&pk, (size_t)t->nby);
  for (int i = 0; i < t->nby; i++) msgpack_pack_int(&pk, t->by[i]);
  msgpack_pack_array(&pk, (size_t)t->order.n);
  for (int i = 0; i < t->order.n; i++) msgpack_pack_int(&pk, t->order.slots[i]);
  msgpack_pack_array(&pk, (size_t)t->order.n);
  for (int i = 0; i < t->order.n; i++) t->order.desc[i] ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
  msgpack_pack_int(&pk, RN_ORDER_FORMAT);
}

/* Records the declaration; *changed when another one was stored. */
static int record_decl(rn_top *t, MDB_txn *txn, bool *changed)
{
  msgpack_sbuffer d;
  msgpack_sbuffer_init(&d);
  describe(t, &d);
  static char decl_key[] = "decl";
  MDB_val k = { 4, decl_key }, v;
  int rc = mdb_get(txn, t->decl_dbi, &k, &v);
  *changed = rc == 0 && (v.mv_size != d.size || memcmp(v.mv_data, d.data, d.size) != 0);
  if (rc == 0 || rc == MDB_NOTFOUND) {
    v.mv_size = d.size;
    v.mv_data = d.data;
    rc = rn_group_oom(t->out->p, 0) ? -1 : mdb_put(txn, t->decl_dbi, &k, &v, 0);
  }
  msgpack_sbuffer_destroy(&d);
  if (rc == -1) return t->out->p->err.code;
  return rc ? store_fail(t, rc) : 0;
}

static int rebuild_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  rn_top *t = ctx;
  rn_change c = { .verb = RN_INSERT, .id = id, .row = row, .row_len = len };
  t->npending = 0;
  int rc = place(t, t->out->p->store.wtxn, &c);
  if (!rc) count_pending(t);
  msgpack_zone_clear(&t->out->p->scratch);
  return rc;
}

static int setup_state(void *ctx, bool created, bool rebuild_it)
{
  rn_top *t = ctx;
  rn_pipeline *p = t->out->p;
  MDB_txn *txn = p->store.wtxn;
  bool changed = false;
  int rc = rn_state_dbi(p, txn, RN_DB_TOP_ROWS, t->out->name, 0, &t->top_dbi);
  if (!rc) rc = rn_state_dbi(p, txn, RN_DB_TOP_REST, t->out->name, 0, &t->rest_dbi);
  t->lo = (rn_longorder){ .dbi = { t->top_dbi, t->rest_dbi }, .skip = { 8, 0 }, .ndbi = 2, .nby = t->nby,
                          .by = t->by, .order = &t->order, .ncols = t->in_ncols };
  if (!rc) rc = rn_state_dbi(p, txn, RN_DB_TOP_DECL, t->out->name, 0, &t->decl_dbi);
  if (!rc) rc = record_decl(t, txn, &changed);
  if (!rc) rc = rn_order_record_input(t->out, txn, t->decl_dbi, &changed);
  /* another n, by, order or input: its rows change, so what is declared over
   * it holds rows made from its old ones and is rebuilt too (as for an
   * aggregate declared again) */
  if (!rc && changed && !created) rc = rn_evolve_decl_changed(p, t->out);
  if (rc || !(rebuild_it || changed)) return rc;
  if ((rc = rn_rebuild_before(t->out))) return rc; /* its rows as its sinks were told (evolve_log.h) */
  if ((rc = mdb_drop(txn, t->top_dbi, 0)) || (rc = mdb_drop(txn, t->rest_dbi, 0))) return store_fail(t, rc);
  t->out->count = 0;
  rc = rn_rel_scan(t->out->input, rebuild_row, t);
  return rc ? rc : rn_rebuild_after(t->out);
}

/* ---- declaration ---- */

/* *out: in's columns, keyless, then the rank column. */
static int output_schema(rn_pipeline *p, const char *name, const rn_rel *in, const char *rank, rn_schema **out)
{
  if (!*rank) /* no row could name it, nor could a Lua row table hold it */
    return rn_err_set(&p->err, RN_EINVAL, "%s: the rank column's name is empty (the default is \"rank\")", name);
  if (rn_schema_slot(in->schema, rank, strlen(rank)) >= 0)
    return rn_err_set(&p->err, RN_EINVAL, "%s: the rank column \"%s\" is already a column of %s", name, rank, in->name);
  *out = rn_schema_new();
  if (!*out) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  int rc = rn_schema_copy_columns(*out, in->schema, false, &p->err);
  if (!rc && rn_schema_add(*out, rank, strlen(rank), RN_T_INT, false, NULL, &p->err) < 0) {
    rc = p->err.code;
    rn_err_prefix(&p->err, name); /* the top it was for */
  }
  if (rc) { rn_schema_free(*out); *out = NULL; }
  return rc;
}

/* The by columns and order of spec, as slots of in. */
static int resolve(rn_pipeline *p, const char *name, const rn_rel *in, const rn_top_spec *spec, rn_top *t)
{
  if (spec->n < 1) return rn_err_set(&p->err, RN_EINVAL, "%s: n must be at least 1", name);
  if (spec->nby < 0 || spec->nby > RN_TOP_COLS)
    return rn_err_set(&p->err, RN_EINVAL, "%s: by takes at most %d columns", name, RN_TOP_COLS);
  t->n = spec->n;
  t->nby = spec->nby;
  t->in_ncols = in->schema->ncols;
  for (int i = 0; i < spec->nby; i++) {
    int slot = rn_schema_slot(in->schema, spec->by[i], strlen(spec->by[i]));
    if (slot < 0) return rn_err_set(&p->err, RN_EINVAL, "%s: no column \"%s\" in %s to group by", name, spec->by[i], in->name);
    if (!rn_type_is_scalar(in->schema->cols[slot].type))
      return rn_err_set(&p->err, RN_EINVAL, "%s: column \"%s\" has type %s: only scalar columns group a top",
                        name, spec->by[i], rn_type_name(in->schema->cols[slot].type));
    t->by[i] = slot;
  }
  return rn_order_resolve(p, name, in->schema, spec->norder, spec->order, spec->desc, &t->order);
}

static void free_top(void *ctx)
{
  rn_top *t = ctx;
  free(t->pending);
  msgpack_sbuffer_destroy(&t->kbuf);
  msgpack_sbuffer_destroy(&t->gbuf);
  rn_zone_destroy(&t->gzone);
  free(t);
}

int rn_declare_top(rn_pipeline *p, const char *name, rn_rel *in, const rn_top_spec *spec, rn_rel **out)
{
  if (rn_check_not_lookup(p, name, "top", in)) return p->err.code;
  if (!in->tablelike)
    return rn_err_set(&p->err, RN_EINVAL,
                      "%s: top needs a table-like relation (a table, or a relation derived from one); "
                      "%s is a stream", name, in->name);
  rn_top *t = calloc(1, sizeof *t);
  if (!t) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  msgpack_sbuffer_init(&t->kbuf);
  msgpack_sbuffer_init(&t->gbuf);
  if (!rn_zone_init(&t->gzone, 1024)) { free_top(t); return rn_err_set(&p->err, RN_ENOMEM, "out of memory"); }
  rn_schema *s = NULL;
  int rc = resolve(p, name, in, spec, t);
  if (!rc) rc = output_schema(p, name, in, spec->rank, &s);
  if (rc) { free_top(t); return rc; }
  rn_rel *r = NULL;
  rc = rn_declare_derived(p, name, RN_REL_TOP, in, s, t, &r);
  if (rc) return rc;
  t->out = r;
  r->persistent = r->stateful = true;
  rc = rn_open_derived_state(p, r, setup_state, t);
  if (rc) {
    in->noutputs--; /* rn_declare_derived made r its last output */
    rn_rel_discard_last(p);
    return rc;
  }
  *out = r;
  return 0;
}

const rn_rel_ops rn_top_ops = { .name = "top", .apply = top_apply, .scan = top_scan_rows, .free = free_top };
