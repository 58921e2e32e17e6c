/* verify_order.c — runnel verify's checks of a top's and an index's state
 * (verify.h): every entry sits at the key its row gives, every row id is
 * held once, ranks run 1..k (k <= n) per group, a group's other rows sort
 * after its full top, and the rows held match the relation's count. The
 * input's own rows are not re-read (a join's or an aggregate's are not
 * stored as rows): what is checked is what the state says about itself. */
#include "verify.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "index.h"
#include "key.h"
#include "longorder.h"
#include "row.h"
#include "store.h"
#include "top.h"

/* What one check walks with. */
typedef struct ocheck {
  MDB_txn *txn;
  FILE *out;
  const char *name;
  int damages;
  int ncols;              /* the input's columns */
  int nby, by[RN_TOP_COLS];
  uint64_t n;             /* a top's rows per group */
  rn_order order;
  msgpack_zone zone;
  msgpack_sbuffer key;
  msgpack_sbuffer prev;   /* the key before, in the database walked (empty: none) */
  msgpack_sbuffer group;  /* a group's values (check_tops, check_rest) */
  msgpack_sbuffer other;  /* another entry's (check_rest) */
  uint64_t *ids;          /* every row id held, to find one held twice */
  size_t nids, cap;
} ocheck;

static void damaged(ocheck *c, const char *what, const char *detail)
{
  fprintf(c->out, "damaged: %s \"%s\": %s\n", what, c->name, detail);
  c->damages++;
}

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static bool keep_id(ocheck *c, uint64_t id)
{
  if (c->nids == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 256;
    uint64_t *more = realloc(c->ids, cap * sizeof *more);
    if (!more) return false;
    c->ids = more;
    c->cap = cap;
  }
  c->ids[c->nids++] = id;
  return true;
}

/* The key row (of id) belongs at, in c->key; *glen: its group's length.
 * -1 if row is no row of the input. */
static int expected_key(ocheck *c, const char *row, size_t len, uint64_t id, size_t *glen)
{
  msgpack_zone_clear(&c->zone);
  const msgpack_object *vals = rn_row_unpack(row, len, c->ncols, &c->zone);
  if (!vals) return -1;
  c->key.size = 0;
  for (int i = 0; i < c->nby; i++)
    if (rn_order_value_append(&c->key, &vals[c->by[i]]) != 0) return -1;
  *glen = c->key.size;
  int bad;
  if (rn_order_append(&c->order, vals, &c->key, &bad) != 0) return -1;
  char idk[8];
  rn_be64_put(idk, id);
  rn_buf_write(&c->key, idk, 8);
  return 0;
}

/* The row id of entry k -> v (longorder.h). */
static uint64_t entry_id(const MDB_val *k, const MDB_val *v, size_t skip)
{
  uint64_t id;
  size_t row_len;
  return rn_longorder_entry(k, v, skip, &id, &row_len) ? id : rn_be64_get((const char *)k->mv_data + k->mv_size - 8);
}

/* The entry k -> row (a rank of 8 bytes first when ranked) at its key (a
 * long one: in its bucket, after the entry before: longorder.h); false
 * (said) when not. */
static bool entry_in_place(ocheck *c, const char *db, const MDB_val *k, const MDB_val *v, size_t skip,
                           size_t *glen)
{
  char detail[200];
  if (k->mv_size < 8 || v->mv_size < skip) {
    snprintf(detail, sizeof detail, "an entry of \"%s\" is too short", db);
    damaged(c, "order", detail);
    return false;
  }
  uint64_t id;
  size_t row_len = v->mv_size - skip;
  bool lng = rn_longorder_entry(k, v, skip, &id, &row_len);
  if (!lng) id = rn_be64_get((const char *)k->mv_data + k->mv_size - 8);
  int bad = expected_key(c, (const char *)v->mv_data + skip, row_len, id, glen);
  if (!bad && lng)
    bad = c->key.size - 8 <= RN_LONGORDER_INLINE || memcmp(c->key.data, k->mv_data, RN_LONGORDER_INLINE) != 0 ||
          (c->prev.size && memcmp(c->prev.data, c->key.data, c->prev.size < c->key.size ? c->prev.size
                                                                                           : c->key.size) >= 0);
  else if (!bad)
    bad = c->key.size != k->mv_size || memcmp(c->key.data, k->mv_data, k->mv_size) != 0;
  c->prev.size = 0;
  rn_buf_write(&c->prev, c->key.data, c->key.size);
  if (bad) {
    snprintf(detail, sizeof detail, "row id %llu of \"%s\" is not at the key its row gives",
             (unsigned long long)id, db);
    damaged(c, "order", detail);
    return false;
  }
  return keep_id(c, id) || (damaged(c, "order", "out of memory"), false);
}

static int open_db_named(ocheck *c, const char *prefix, const char *name, MDB_dbi *dbi)
{
  char dbname[4200];
  snprintf(dbname, sizeof dbname, "%s%s", prefix, name);
  return mdb_dbi_open(c->txn, dbname, 0, dbi);
}

static int open_db(ocheck *c, const char *prefix, MDB_dbi *dbi)
{
  return open_db_named(c, prefix, c->name, dbi);
}

/* The stored declaration ("tp:" "decl"), or NULL (said). */
static const MDB_val *read_decl(ocheck *c, MDB_val *v)
{
  MDB_dbi dbi;
  static char decl_key[] = "decl";
  MDB_val k = { 4, decl_key };
  if (open_db(c, RN_DB_TOP_DECL, &dbi) == 0 && mdb_get(c->txn, dbi, &k, v) == 0) return v;
  damaged(c, "order", "its declaration is missing");
  return NULL;
}

/* A u64 array of at most RN_TOP_COLS slots below ncols into out; -1 if not. */
static int slots_of(const msgpack_object *a, int ncols, int *out)
{
  if (a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size > RN_TOP_COLS) return -1;
  for (uint32_t i = 0; i < a->via.array.size; i++) {
    const msgpack_object *s = &a->via.array.ptr[i];
    if (s->type != MSGPACK_OBJECT_POSITIVE_INTEGER || s->via.u64 >= (uint64_t)ncols) return -1;
    out[i] = (int)s->via.u64;
  }
  return (int)a->via.array.size;
}

/* A top's declaration [n, [by slots], [order slots], [desc flags], format] (top.c). */
static int top_decl(ocheck *c, const MDB_val *v)
{
  msgpack_object d;
  size_t off = 0;
  if (rn_msgpack_size(v->mv_data, v->mv_size) != v->mv_size ||
      rn_unpack(v->mv_data, v->mv_size, &off, &c->zone, &d) != MSGPACK_UNPACK_SUCCESS ||
      d.type != MSGPACK_OBJECT_ARRAY || d.via.array.size != 5 ||
      d.via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER || d.via.array.ptr[0].via.u64 == 0)
    return -1;
  const msgpack_object *a = d.via.array.ptr;
  if (a[4].type != MSGPACK_OBJECT_POSITIVE_INTEGER || a[4].via.u64 != RN_ORDER_FORMAT) return -1;
  c->n = a[0].via.u64;
  c->nby = slots_of(&a[1], c->ncols, c->by);
  c->order.n = slots_of(&a[2], c->ncols, c->order.slots);
  if (c->nby < 0 || c->order.n < 1 || a[3].type != MSGPACK_OBJECT_ARRAY || a[3].via.array.size != (uint32_t)c->order.n)
    return -1;
  for (int i = 0; i < c->order.n; i++) {
    if (a[3].via.array.ptr[i].type != MSGPACK_OBJECT_BOOLEAN) return -1;
    c->order.desc[i] = a[3].via.array.ptr[i].via.boolean;
  }
  return 0;
}

/* Whether the "tt:" entry k -> v holds a row of the group whose values'
 * encoding is g (glen bytes): a short group's key starts with it, a long
 * group's row has them (top.c (4)). */
static bool top_in_group(ocheck *c, const MDB_val *k, const MDB_val *v, const char *g, size_t glen)
{
  if (glen <= RN_LONGORDER_INLINE) return k->mv_size >= glen && (!glen || memcmp(k->mv_data, g, glen) == 0);
  uint64_t id;
  size_t len;
  if (!rn_longorder_entry(k, v, 8, &id, &len)) return false;
  msgpack_zone_clear(&c->zone);
  const msgpack_object *vals = rn_row_unpack((const char *)v->mv_data + 8, len, c->ncols, &c->zone);
  if (!vals) return false;
  c->other.size = 0;
  for (int i = 0; i < c->nby; i++)
    if (rn_order_value_append(&c->other, &vals[c->by[i]]) != 0) return false;
  return c->other.size == glen && memcmp(c->other.data, g, glen) == 0;
}

/* "tt:": in each group (in key order) ranks 1, 2, … up to at most n. */
static int check_tops(ocheck *c, MDB_dbi dbi, uint64_t *held)
{
  MDB_cursor *cur;
  int rc = mdb_cursor_open(c->txn, dbi, &cur);
  if (rc) return rc;
  char detail[200];
  size_t glen;
  bool any = false;
  uint64_t want = 1;
  MDB_val k, v;
  *held = 0;
  c->prev.size = 0;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    ++*held;
    if (!entry_in_place(c, "tt:", &k, &v, 8, &glen)) continue;
    /* the group's values are c->key's first glen bytes (a long group's
     * more than its key holds) */
    if (!any || c->group.size != glen || (glen && memcmp(c->group.data, c->key.data, glen) != 0)) { /* no group: no bytes */
      c->group.size = 0;
      rn_buf_write(&c->group, c->key.data, glen);
      any = true;
      want = 1;
    }
    uint64_t rank;
    memcpy(&rank, v.mv_data, 8);
    if (rank != want || rank > c->n) {
      snprintf(detail, sizeof detail, "row id %llu has rank %llu where %llu was due (n = %llu)",
               (unsigned long long)entry_id(&k, &v, 8), (unsigned long long)rank,
               (unsigned long long)want, (unsigned long long)c->n);
      damaged(c, "top", detail);
    }
    want = rank + 1;
  }
  mdb_cursor_close(cur);
  return rc == MDB_NOTFOUND ? 0 : rc;
}

/* "tx:": each row sorts after a full top of its group in "tt:". */
static int check_rest(ocheck *c, MDB_dbi rest, MDB_dbi tops)
{
  MDB_cursor *cur, *tcur;
  int rc = mdb_cursor_open(c->txn, rest, &cur);
  if (!rc && (rc = mdb_cursor_open(c->txn, tops, &tcur))) mdb_cursor_close(cur);
  if (rc) return rc;
  char detail[200];
  size_t glen;
  MDB_val k, v;
  c->prev.size = 0;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (!entry_in_place(c, "tx:", &k, &v, 0, &glen)) continue;
    c->group.size = 0;
    rn_buf_write(&c->group, c->key.data, glen); /* its group's values */
    MDB_val tk = k, tv;
    int trc = mdb_cursor_get(tcur, &tk, &tv, MDB_SET_RANGE);
    bool after = trc == MDB_NOTFOUND || (trc == 0 && !top_in_group(c, &tk, &tv, c->group.data, glen));
    trc = trc == 0 ? mdb_cursor_get(tcur, &tk, &tv, MDB_PREV) : mdb_cursor_get(tcur, &tk, &tv, MDB_LAST);
    uint64_t last_rank = 0;
    if (trc == 0 && top_in_group(c, &tk, &tv, c->group.data, glen) && tv.mv_size >= 8)
      memcpy(&last_rank, tv.mv_data, 8);
    if (after && last_rank == c->n) continue;
    snprintf(detail, sizeof detail, "row id %llu is out of the top while %s",
             (unsigned long long)entry_id(&k, &v, 0),
             after ? "its group's top is not full" : "it sorts before a row of the top");
    damaged(c, "top", detail);
  }
  mdb_cursor_close(tcur);
  mdb_cursor_close(cur);
  return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Every entry of dbi at its key (an index's "ix:"); *held: how many. */
static int check_entries(ocheck *c, MDB_dbi dbi, uint64_t *held)
{
  MDB_cursor *cur;
  int rc = mdb_cursor_open(c->txn, dbi, &cur);
  if (rc) return rc;
  size_t glen;
  MDB_val k, v;
  *held = 0;
  c->prev.size = 0;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    ++*held;
    entry_in_place(c, "ix:", &k, &v, 0, &glen);
  }
  mdb_cursor_close(cur);
  return rc == MDB_NOTFOUND ? 0 : rc;
}

/* No row id held twice (in "tt:" and "tx:" together). */
static void check_ids(ocheck *c)
{
  if (c->nids) qsort(c->ids, c->nids, sizeof *c->ids, cmp_u64); /* none: ids is NULL, which qsort may not take */
  for (size_t i = 0; i < c->nids; i++) {
    if (!(i > 0 && c->ids[i] == c->ids[i - 1])) continue;
    char detail[120];
    snprintf(detail, sizeof detail, "row id %llu is %s", (unsigned long long)c->ids[i],
             "held twice");
    damaged(c, "order", detail);
    return;
  }
}

/* The input's name ("tp:" "input") into name; false when not recorded. */
static bool input_name(ocheck *c, char *name, size_t len)
{
  MDB_dbi dbi;
  static char input_key[] = "input";
  MDB_val k = { 5, input_key }, v;
  if (open_db(c, RN_DB_TOP_DECL, &dbi) != 0 || mdb_get(c->txn, dbi, &k, &v) != 0 || v.mv_size >= len) return false;
  memcpy(name, v.mv_data, v.mv_size);
  name[v.mv_size] = '\0';
  return true;
}

/* Whether input is a table and whether it is keyless, from its catalogue
 * entry |kind|[columns, key]|; false for another kind or none. */
static bool input_table(ocheck *c, const char *input, bool *keyless)
{
  MDB_dbi meta;
  char key[4200];
  int klen = snprintf(key, sizeof key, RN_META_RELATION "%s", input);
  MDB_val k = { (size_t)klen, key }, v;
  if (mdb_dbi_open(c->txn, RN_DB_META, 0, &meta) != 0 || mdb_get(c->txn, meta, &k, &v) != 0) return false;
  msgpack_object d;
  size_t off = 0;
  if (rn_msgpack_size(v.mv_data, v.mv_size) != v.mv_size ||
      rn_unpack(v.mv_data, v.mv_size, &off, &c->zone, &d) != MSGPACK_UNPACK_SUCCESS || !rn_catalogue_entry_valid(&d))
    return false;
  *keyless = d.via.array.ptr[1].via.array.ptr[1].via.array.size == 0;
  return d.via.array.ptr[0].via.u64 == RN_REL_TABLE;
}

/* The row ids of table input ("t:"; keyed: the value's first 8 bytes,
 * tombstones skipped; keyless: the big-endian key), sorted, into *out. */
static int table_ids(ocheck *c, const char *input, bool keyless, uint64_t **out, size_t *n)
{
  MDB_dbi dbi;
  MDB_cursor *cur;
  size_t cap = 0;
  *out = NULL;
  *n = 0;
  int rc = open_db_named(c, RN_DB_ROWS, input, &dbi);
  if (rc == MDB_NOTFOUND) return 0;
  if (rc || (rc = mdb_cursor_open(c->txn, dbi, &cur))) return rc;
  MDB_val k, v;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    /* a keyed table's tombstone, a deleted row's (flags byte 8, bit 0 clear: rn_attach_table_row) */
    if (!keyless && v.mv_size >= 9 && !(((const unsigned char *)v.mv_data)[8] & 1)) continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 256;
      uint64_t *more = realloc(*out, cap * sizeof *more);
      if (!more) { rc = ENOMEM; break; }
      *out = more;
    }
    uint64_t id = 0;
    if (keyless && k.mv_size == 8) id = rn_be64_get(k.mv_data);
    else if (!keyless && v.mv_size >= 8) memcpy(&id, v.mv_data, 8);
    (*out)[(*n)++] = id;
  }
  mdb_cursor_close(cur);
  if (*n) qsort(*out, *n, sizeof **out, cmp_u64); /* an empty table: *out is NULL */
  return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Over a table: every input row held exactly once (the ids held are
 * sorted and unique by now), and no other. */
static void check_input_rows(ocheck *c)
{
  char input[4096], detail[300];
  bool keyless;
  if (!input_name(c, input, sizeof input) || !input_table(c, input, &keyless)) return;
  uint64_t *rows;
  size_t n, i = 0, j = 0;
  int rc = table_ids(c, input, keyless, &rows, &n);
  if (rc) { damaged(c, "order", rn_store_strerror(rc)); free(rows); return; }
  while (i < n || j < c->nids) {
    if (i < n && j < c->nids && rows[i] == c->ids[j]) { i++; j++; continue; }
    bool missing = j == c->nids || (i < n && rows[i] < c->ids[j]);
    snprintf(detail, sizeof detail, missing ? "row id %llu of %s is not held" : "row id %llu is no row of %s",
             (unsigned long long)(missing ? rows[i] : c->ids[j]), input);
    damaged(c, "order", detail);
    break;
  }
  free(rows);
}

static void count_matches(ocheck *c, uint64_t held, uint64_t counted)
{
  if (held == counted) return;
  char detail[120];
  snprintf(detail, sizeof detail, "%llu rows held, %llu counted", (unsigned long long)held,
           (unsigned long long)counted);
  damaged(c, "order", detail);
}

static void check_top(ocheck *c, const uint64_t counters[3])
{
  MDB_val d;
  MDB_dbi tops, rest;
  uint64_t held = 0;
  int rc = 0;
  if (!read_decl(c, &d)) return;
  if (top_decl(c, &d) != 0) { damaged(c, "top", "its declaration is malformed"); return; }
  if ((rc = open_db(c, RN_DB_TOP_ROWS, &tops)) || (rc = open_db(c, RN_DB_TOP_REST, &rest)) ||
      (rc = check_tops(c, tops, &held)) || (rc = check_rest(c, rest, tops))) {
    damaged(c, "top", rn_store_strerror(rc));
    return;
  }
  count_matches(c, held, counters[1]);
  check_ids(c);
  check_input_rows(c);
}

static void check_index(ocheck *c, const uint64_t counters[3])
{
  MDB_val d;
  MDB_dbi rows;
  uint64_t held = 0;
  if (!read_decl(c, &d)) return;
  if (rn_index_decl_decode(d.mv_data, d.mv_size, c->ncols, &c->order) != 0) {
    damaged(c, "index", "its declaration is malformed");
    return;
  }
  int rc = open_db(c, RN_DB_INDEX, &rows);
  if (!rc) rc = check_entries(c, rows, &held);
  if (rc) { damaged(c, "index", rn_store_strerror(rc)); return; }
  count_matches(c, held, counters[1]);
  check_ids(c);
  check_input_rows(c);
}

int rn_verify_ordered(MDB_txn *txn, const char *name, bool top, int ncols, const uint64_t counters[3], FILE *out)
{
  ocheck c = { .txn = txn, .out = out, .name = name, .ncols = top ? ncols - 1 : ncols };
  if (!rn_zone_init(&c.zone, 4096)) { fprintf(out, "damaged: %s: out of memory\n", name); return 1; }
  msgpack_sbuffer_init(&c.key);
  msgpack_sbuffer_init(&c.prev);
  msgpack_sbuffer_init(&c.group);
  msgpack_sbuffer_init(&c.other);
  if (top) check_top(&c, counters);
  else check_index(&c, counters);
  msgpack_sbuffer_destroy(&c.key);
  msgpack_sbuffer_destroy(&c.prev);
  msgpack_sbuffer_destroy(&c.group);
  msgpack_sbuffer_destroy(&c.other);
  rn_zone_destroy(&c.zone);
  free(c.ids);
  return c.damages;
}
