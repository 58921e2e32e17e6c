/* verify.c — checking a state directory against itself (verify.h). */
#include "verify.h"

#include <errno.h>
#include <lmdb.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "envs.h"
#include "evolve_reads.h"
#include "row.h"
#include "runnel.h"
#include "join.h"
#include "key.h"
#include "outbox.h"
#include "pipeline.h"
#include "store.h"
#include "upgrade.h"

typedef struct walk {
  const char *path;
  MDB_env *env;
  FILE *out;
  MDB_txn *txn;
  MDB_dbi meta;
  uint64_t seq;           /* the last group */
  int damages;
  int notes;
  uint64_t databases, entries;
} walk;

static void damaged(walk *w, const char *fmt, const char *name, const char *detail)
{
  fprintf(w->out, "damaged: ");
  fprintf(w->out, fmt, name, detail);
  fputc('\n', w->out);
  w->damages++;
}

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Reads every entry of database dbname; *n gets their number. With ids,
 * collects each entry's id (keyed: the value's first 8 bytes; keyless: the
 * big-endian key) into a malloc'd *ids, and *rows counts rows only: a
 * keyed table's tombstone (a deleted row's entry, kept for its id: table.c's
 * ROWID-1, flags byte without live) is none, but its id is one (the key
 * put back takes it again: no other row may hold it). */
static int walk_db(walk *w, const char *dbname, bool keyless, uint64_t **ids, uint64_t *n, uint64_t *rows)
{
  MDB_dbi dbi;
  MDB_cursor *cur;
  *n = 0;
  if (rows) *rows = 0;
  int rc = mdb_dbi_open(w->txn, dbname, 0, &dbi);
  if (rc == MDB_NOTFOUND) return MDB_NOTFOUND;
  if (!rc) rc = mdb_cursor_open(w->txn, dbi, &cur);
  if (rc) return rc;
  size_t cap = 0;
  MDB_val k, v;
  int mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
  for (; mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    bool tombstone = !keyless && v.mv_size >= 9 && !(((const unsigned char *)v.mv_data)[8] & 1);
    if (rows && !tombstone) (*rows)++;
    if (ids) {
      if (*n == cap) {
        cap = cap ? cap * 2 : 1024;
        uint64_t *more = realloc(*ids, cap * sizeof *more);
        if (!more) { mrc = ENOMEM; break; }
        *ids = more;
      }
      uint64_t id = 0;
      if (keyless && k.mv_size == 8) /* |u64 id (big-endian)| */
        for (int b = 0; b < 8; b++) id = id << 8 | ((const unsigned char *)k.mv_data)[b];
      else if (!keyless && v.mv_size >= 9) memcpy(&id, v.mv_data, 8);
      (*ids)[*n] = id;
    }
    (*n)++;
  }
  mdb_cursor_close(cur);
  return mrc == MDB_NOTFOUND ? 0 : mrc;
}

/* A read transaction an LMDB error poisoned is replaced, so that one
 * damaged database does not hide the others. */
static int renew(walk *w)
{
  mdb_txn_abort(w->txn);
  int rc = rn_store_txn(w->env, MDB_RDONLY, &w->txn);
  if (!rc) rc = mdb_dbi_open(w->txn, RN_DB_META, 0, &w->meta);
  return rc;
}

/* The names listed in the main database, NUL-separated in a malloc'd
 * buffer; *count gets their number. */
static char *database_names(walk *w, size_t *count)
{
  MDB_dbi main_dbi;
  MDB_cursor *cur;
  char *names = NULL;
  size_t len = 0;
  *count = 0;
  if (mdb_dbi_open(w->txn, NULL, 0, &main_dbi) || mdb_cursor_open(w->txn, main_dbi, &cur)) return NULL;
  MDB_val k, v;
  int mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
  for (; mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    char *more = memchr(k.mv_data, '\0', k.mv_size) ? NULL : realloc(names, len + k.mv_size + 1);
    if (!more) continue;
    names = more;
    memcpy(names + len, k.mv_data, k.mv_size);
    names[len + k.mv_size] = '\0';
    len += k.mv_size + 1;
    (*count)++;
  }
  if (mrc != MDB_NOTFOUND) damaged(w, "%s: the list of databases: %s", w->path, rn_store_strerror(mrc));
  mdb_cursor_close(cur);
  return names;
}

/* Every named database listed in the main one, read to its end. */
static int walk_all(walk *w)
{
  size_t count;
  char *names = database_names(w, &count);
  if (!names && count == 0 && w->damages) return renew(w);
  const char *name = names;
  for (size_t i = 0; i < count; i++, name += strlen(name) + 1) {
    uint64_t n;
    int rc = walk_db(w, name, false, NULL, &n, NULL);
    w->databases++;
    w->entries += n;
    if (!rc) continue;
    damaged(w, "database \"%s\": %s", name, rn_store_strerror(rc));
    if ((rc = renew(w)) != 0) { free(names); return rc; }
  }
  free(names);
  return 0;
}

/* A table's rows against its counters |next_id|count|seq|. */
static void check_table(walk *w, const char *name, const uint64_t counters[3], bool keyless)
{
  char dbname[4096], detail[200];
  uint64_t *ids = NULL, n = 0, rows = 0, hashed;
  snprintf(dbname, sizeof dbname, RN_DB_ROWS "%s", name);
  int rc = walk_db(w, dbname, keyless, &ids, &n, &rows);
  if (rc == MDB_NOTFOUND && counters[1] == 0) { free(ids); return; }
  if (rc) {
    damaged(w, "table \"%s\": its rows: %s", name, rn_store_strerror(rc));
    free(ids);
    renew(w); /* the walk of every database said what else fails */
    return;
  }
  if (rows != counters[1]) {
    snprintf(detail, sizeof detail, "%llu rows stored, %llu counted", (unsigned long long)rows,
             (unsigned long long)counters[1]);
    damaged(w, "table \"%s\": %s", name, detail);
  }
  if (n) qsort(ids, n, sizeof *ids, cmp_u64); /* none: ids is NULL, which qsort may not take */
  for (uint64_t i = 0; i < n; i++) {
    if (ids[i] == 0 || ids[i] >= counters[0] || (i > 0 && ids[i] == ids[i - 1])) {
      snprintf(detail, sizeof detail, "row id %llu is %s (next id %llu)", (unsigned long long)ids[i],
               ids[i] == 0 || ids[i] >= counters[0] ? "out of range" : "used twice",
               (unsigned long long)counters[0]);
      damaged(w, "table \"%s\": %s", name, detail);
      break;
    }
  }
  free(ids);
  snprintf(dbname, sizeof dbname, RN_DB_ROW_HASHES "%s", name);
  if (keyless && walk_db(w, dbname, false, NULL, &hashed, NULL) == 0 && hashed != n) {
    snprintf(detail, sizeof detail, "%llu rows, %llu in its hash index", (unsigned long long)n,
             (unsigned long long)hashed);
    damaged(w, "table \"%s\": %s", name, detail);
  }
}

/* ---- operator state: joins (join.h) and aggregates (aggregate.h) ---- */

typedef struct ids {
  uint64_t *v;
  size_t n, cap;
} ids;

static bool ids_add(ids *s, uint64_t id)
{
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 256;
    uint64_t *more = realloc(s->v, cap * sizeof *more);
    if (!more) return false;
    s->v = more;
    s->cap = cap;
  }
  s->v[s->n++] = id;
  return true;
}

static bool ids_has(const ids *s, uint64_t id)
{
  return s->n && bsearch(&id, s->v, s->n, sizeof id, cmp_u64) != NULL;
}

/* Collects from each entry of "<prefix><name>" the u64 at value offset
 * `at` (nonzero ones) and, with left, the big-endian u64 ending the key;
 * entries whose key `skip` takes (may be NULL) are passed over. Values
 * shorter than min are damage. */
/* A "ji:" entry's left length (join.h) stays inside the entry. */
static bool join_entry_fits(const MDB_val *v)
{
  uint32_t llen;
  if (v->mv_size < 12) return false;
  memcpy(&llen, (const char *)v->mv_data + 8, 4);
  return (size_t)(llen & ~RN_JOIN_KEPT) <= v->mv_size - 12;
}

static int collect(walk *w, const char *prefix, const char *name, size_t at, size_t min, bool (*skip)(const MDB_val *k),
                   ids *out, ids *left)
{
  char dbname[4096];
  MDB_dbi dbi;
  MDB_cursor *cur;
  snprintf(dbname, sizeof dbname, "%s%s", prefix, name);
  int rc = mdb_dbi_open(w->txn, dbname, 0, &dbi);
  if (rc == MDB_NOTFOUND) return 0;
  if (!rc) rc = mdb_cursor_open(w->txn, dbi, &cur);
  if (rc) return rc;
  MDB_val k, v;
  int mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
  for (; mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    uint64_t id, lid = 0;
    if (skip && skip(&k)) continue;
    if (v.mv_size < min || (left && k.mv_size < 8)) {
      damaged(w, "database \"%s\": an entry is too short%s", dbname, "");
      break;
    }
    memcpy(&id, (const char *)v.mv_data + at, 8);
    if (strcmp(prefix, RN_DB_JOIN_INDEX) == 0 && !join_entry_fits(&v)) {
      damaged(w, "database \"%s\": an entry's left row runs past its end%s", dbname, "");
      break;
    }
    if (id && !ids_add(out, id)) { mrc = ENOMEM; break; }
    for (int b = 0; left && b < 8; b++) lid = lid << 8 | ((const unsigned char *)k.mv_data)[k.mv_size - 8 + b];
    if (left && !ids_add(left, lid)) { mrc = ENOMEM; break; }
  }
  mdb_cursor_close(cur);
  if (out->n) qsort(out->v, out->n, sizeof *out->v, cmp_u64); /* none: v is NULL (damage on the first entry) */
  if (left && left->n) qsort(left->v, left->n, sizeof *left->v, cmp_u64);
  return mrc == MDB_NOTFOUND ? 0 : mrc;
}

/* Sorted ids: each below next_id and, when unique, used once. */
static void check_ids(walk *w, const char *what, const char *name, const ids *s, uint64_t next_id, bool unique)
{
  for (size_t i = 0; i < s->n; i++) {
    if (s->v[i] < next_id && !(unique && i > 0 && s->v[i] == s->v[i - 1])) continue;
    char detail[200];
    snprintf(detail, sizeof detail, "%s %llu is %s (next id %llu)", what, (unsigned long long)s->v[i],
             s->v[i] >= next_id ? "out of range" : "used twice", (unsigned long long)next_id);
    damaged(w, "relation \"%s\": %s", name, detail);
    return;
  }
}

/* A join: "jr:" gives each result key an id once; "ji:" holds one entry per
 * left row, whose result id (0: none yet) is one of those. */
static void check_join(walk *w, const char *name, const uint64_t counters[3])
{
  ids results = { 0 }, used = { 0 }, lefts = { 0 };
  int rc = collect(w, RN_DB_JOIN_RESULTS, name, 0, 16, NULL, &results, NULL);
  if (!rc) rc = collect(w, RN_DB_JOIN_INDEX, name, 0, 8, NULL, &used, &lefts);
  if (rc) {
    damaged(w, "join \"%s\": its index: %s", name, rn_store_strerror(rc));
    renew(w);
  } else {
    check_ids(w, "result id", name, &results, counters[0], true);
    check_ids(w, "left row id", name, &lefts, UINT64_MAX, true);
    for (size_t i = 0; i < used.n; i++) {
      if (ids_has(&results, used.v[i])) continue;
      char detail[120];
      snprintf(detail, sizeof detail, "a left row's result id %llu has no result key", (unsigned long long)used.v[i]);
      damaged(w, "join \"%s\": %s", name, detail);
      break;
    }
  }
  free(results.v);
  free(used.v);
  free(lefts.v);
}

/* An aggregate: each group |rid|rows|state| has its own result id. */
static void check_aggregate(walk *w, const char *name, const uint64_t counters[3])
{
  ids groups = { 0 };
  int rc = collect(w, RN_DB_AGG_GROUPS, name, 0, 16, rn_aggregate_counter_key, &groups, NULL);
  if (rc) {
    damaged(w, "aggregate \"%s\": its groups: %s", name, rn_store_strerror(rc));
    renew(w);
  } else {
    check_ids(w, "group id", name, &groups, counters[0], true);
  }
  free(groups.v);
}

static uint64_t be64(const unsigned char *at);

/* Collects the big-endian u64 value of each entry of "<prefix><name>" (a
 * distinct's hash index: |hash| -> dup |id BE|). */
static int collect_be_values(walk *w, const char *prefix, const char *name, ids *out)
{
  char dbname[4096];
  MDB_dbi dbi;
  MDB_cursor *cur;
  if ((size_t)snprintf(dbname, sizeof dbname, "%s%s", prefix, name) >= sizeof dbname) return MDB_BAD_VALSIZE;
  int rc = mdb_dbi_open(w->txn, dbname, 0, &dbi);
  if (rc == MDB_NOTFOUND) return 0;
  if (!rc) rc = mdb_cursor_open(w->txn, dbi, &cur);
  if (rc) return rc;
  MDB_val k, v;
  int mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
  for (; mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (v.mv_size != 8) {
      damaged(w, "database \"%s\": an entry is not 8 bytes%s", dbname, "");
      break;
    }
    if (!ids_add(out, be64(v.mv_data))) { mrc = ENOMEM; break; }
  }
  mdb_cursor_close(cur);
  if (out->n) qsort(out->v, out->n, sizeof *out->v, cmp_u64); /* none: v is NULL */
  return mrc == MDB_NOTFOUND ? 0 : mrc;
}

/* What a distinct's rows and hash index say against its counters: every
 * row holds at least one copy, the rows and the index name the same ids. */
static void check_distinct_rows(walk *w, const char *name, const uint64_t counters[3], const ids *rows,
                                size_t with_copies, const ids *hashed)
{
  char detail[200];
  check_ids(w, "row id", name, rows, counters[0], true);
  if (rows->n != counters[1]) {
    snprintf(detail, sizeof detail, "%zu rows stored, %llu counted", rows->n, (unsigned long long)counters[1]);
    damaged(w, "distinct \"%s\": %s", name, detail);
  }
  if (with_copies != rows->n) {
    snprintf(detail, sizeof detail, "%zu rows hold no copy", rows->n - with_copies);
    damaged(w, "distinct \"%s\": %s", name, detail);
  }
  bool same = hashed->n == rows->n;
  for (size_t i = 0; same && i < rows->n; i++) same = hashed->v[i] == rows->v[i];
  if (!same) {
    snprintf(detail, sizeof detail, "%zu rows, %zu in its hash index, not the same ids", rows->n, hashed->n);
    damaged(w, "distinct \"%s\": %s", name, detail);
  }
}

/* A distinct (distinct.c): "dr:" |id BE| -> |copies|row|, "dh:" |hash| ->
 * dup |id BE| (DISTINCT-1, DISTINCT-2). */
static void check_distinct(walk *w, const char *name, const uint64_t counters[3])
{
  ids copies = { 0 }, rows = { 0 }, hashed = { 0 };
  int rc = collect(w, RN_DB_DISTINCT_ROWS, name, 0, 8, NULL, &copies, &rows);
  if (!rc) rc = collect_be_values(w, RN_DB_DISTINCT_HASHES, name, &hashed);
  if (rc) {
    damaged(w, "distinct \"%s\": its rows: %s", name, rn_store_strerror(rc));
    renew(w);
  } else {
    check_distinct_rows(w, name, counters, &rows, copies.n, &hashed);
  }
  free(copies.v);
  free(rows.v);
  free(hashed.v);
}

/* The counters of relation name, checked; false when absent or damaged. */
static bool read_counters(walk *w, const char *name, uint64_t counters[3])
{
  char key[4096];
  int klen = snprintf(key, sizeof key, RN_META_COUNTERS "%s", name);
  MDB_val k = { (size_t)klen, key }, v;
  int rc = mdb_get(w->txn, w->meta, &k, &v);
  if (rc == MDB_NOTFOUND) return false;
  if (rc || v.mv_size != 24) {
    damaged(w, "relation \"%s\": its counters record %s", name, rc ? rn_store_strerror(rc) : "is not 24 bytes");
    return false;
  }
  memcpy(counters, v.mv_data, 24);
  return true;
}

/* Whether relation name has a "ch:" record: it gave events (relation.c). */
static bool gave_events(walk *w, const char *name)
{
  char key[4096];
  MDB_val k = { (size_t)snprintf(key, sizeof key, RN_META_CHANGED "%s", name), key }, v;
  return mdb_get(w->txn, w->meta, &k, &v) == 0;
}

/* The last group relation name gave events in (its "ch:" record); 0: none
 * known. */
static uint64_t last_events(walk *w, const char *name)
{
  char key[4096];
  MDB_val k = { (size_t)snprintf(key, sizeof key, RN_META_CHANGED "%s", name), key }, v;
  uint64_t seq = 0;
  if (mdb_get(w->txn, w->meta, &k, &v) == 0 && v.mv_size == sizeof seq) memcpy(&seq, v.mv_data, sizeof seq);
  return seq;
}

/* A stream's or cdc relation's counters gone back (relation.c's
 * check_event_counters): next id not past the events it gave, or the
 * record older than its last events. Either gives their ids again. */
static void check_event_counters(walk *w, const char *name, const uint64_t counters[3])
{
  char detail[200];
  uint64_t changed = last_events(w, name);
  if (counters[0] && counters[0] <= counters[1])
    snprintf(detail, sizeof detail, "give next id %llu, but it gave %llu events", (unsigned long long)counters[0],
             (unsigned long long)counters[1]);
  else if (changed > counters[2])
    snprintf(detail, sizeof detail, "are as of group %llu, but it gave events in group %llu",
             (unsigned long long)counters[2], (unsigned long long)changed);
  else
    return;
  damaged(w, "relation \"%s\": its counters %s: it would give their ids again", name, detail);
}

/* Whether join name is a stream join that keeps no state (join.c: its
 * right side a source table or a lookup), from its "d:" record
 * (join_read.c: [1, kind, stream, right side, …]): its counters move only
 * when it gives events, as a stream's. */
static bool stream_join_stateless(walk *w, const char *name, msgpack_zone *z)
{
  char key[4096];
  MDB_val k = { (size_t)snprintf(key, sizeof key, RN_META_AGG_DECL "%s", name), key }, v;
  msgpack_object d;
  size_t off = 0;
  if (mdb_get(w->txn, w->meta, &k, &v) || rn_unpack(v.mv_data, v.mv_size, &off, z, &d) != MSGPACK_UNPACK_SUCCESS ||
      d.type != MSGPACK_OBJECT_ARRAY || d.via.array.size < 4)
    return false;
  const msgpack_object *stream = &d.via.array.ptr[2], *right = &d.via.array.ptr[3];
  return stream->type == MSGPACK_OBJECT_BOOLEAN && stream->via.boolean &&
         right->type == MSGPACK_OBJECT_POSITIVE_INTEGER && (right->via.u64 == 0 || right->via.u64 == 2);
}

/* One "r:" entry: it decodes, and what its kind keeps agrees with itself. */
static void check_relation(walk *w, const char *name, const MDB_val *v, msgpack_zone *z)
{
  msgpack_object d;
  size_t off = 0;
  if (rn_msgpack_size(v->mv_data, v->mv_size) != v->mv_size ||
      rn_unpack(v->mv_data, v->mv_size, &off, z, &d) != MSGPACK_UNPACK_SUCCESS ||
      !rn_catalogue_entry_valid(&d)) {
    damaged(w, "relation \"%s\": its catalogue entry is malformed%s", name, "");
    return;
  }
  uint64_t kind = d.via.array.ptr[0].via.u64, counters[3];
  bool keyless = d.via.array.ptr[1].via.array.ptr[1].via.array.size == 0;
  bool have = read_counters(w, name, counters);
  if ((kind == RN_REL_STREAM || kind == RN_REL_CDC) && have && counters[0] == 0)
    damaged(w, "relation \"%s\": its counters give id 0 (ids start at 1)%s", name, "");
  bool events_only = kind == RN_REL_CDC || (kind == RN_REL_JOIN && stream_join_stateless(w, name, z));
  if ((kind == RN_REL_STREAM || events_only) && have) check_event_counters(w, name, counters);
  if ((kind == RN_REL_STREAM || kind == RN_REL_CDC) && !have && gave_events(w, name))
    damaged(w, "relation \"%s\": its counters are missing, but it gave events: it would give their ids again%s",
            name, "");
  if (kind == 0 && have) check_table(w, name, counters, keyless);
  else if (kind == 0) check_table(w, name, (uint64_t[3]){ 1, 0, 0 }, keyless);
  if (kind == 5 && have) check_join(w, name, counters);
  if (kind == 6 && have) check_aggregate(w, name, counters);
  if (kind == 8 && have) check_distinct(w, name, counters);
  if ((kind == 9 || kind == 10) && have && counters[2] == w->seq)
    w->damages += rn_verify_ordered(w->txn, name, kind == 9, (int)d.via.array.ptr[1].via.array.ptr[0].via.array.size,
                                    counters, w->out);
  if (kind >= 4 && kind != RN_REL_LOOKUP && !events_only && have && counters[2] != w->seq) {
    fprintf(w->out, "note: relation \"%s\" holds state as of group %llu, not %llu: rebuilt at the next open\n",
            name, (unsigned long long)counters[2], (unsigned long long)w->seq);
    w->notes++;
  }
}

/* Every "n:" record names a relation of the catalogue; a "ch:" record
 * that names none (a drop before 0.19's fix left it) is a note: it only
 * made a durable sink of a new relation of that name told of groups that
 * changed the dropped one. */
static void check_orphans_of(walk *w, MDB_cursor *cur, const char *prefix, bool damage)
{
  size_t plen = strlen(prefix);
  MDB_val k = { plen, (void *)prefix }, v;
  int mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  for (; mrc == 0 && k.mv_size >= plen && memcmp(k.mv_data, prefix, plen) == 0;
       mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    char rkey[4096];
    if (k.mv_size - plen + 2 >= sizeof rkey) continue;
    memcpy(rkey, RN_META_RELATION, 2);
    memcpy(rkey + 2, (const char *)k.mv_data + plen, k.mv_size - plen);
    MDB_val rk = { k.mv_size - plen + 2, rkey }, rv;
    rkey[rk.mv_size] = '\0';
    if (mdb_get(w->txn, w->meta, &rk, &rv) != MDB_NOTFOUND) continue;
    if (damage) {
      damaged(w, "counters \"%s\" belong to no relation%s", rkey + 2, "");
    } else {
      fprintf(w->out, "note: the record of the last group that changed \"%s\" (meta %s) belongs to no relation\n",
              rkey + 2, prefix);
      w->notes++;
    }
  }
}

static void check_orphans(walk *w, MDB_cursor *cur)
{
  check_orphans_of(w, cur, RN_META_COUNTERS, true);
  check_orphans_of(w, cur, RN_META_CHANGED, false);
}

/* A durable sink's record as the outbox writes it: meta "od:" name or
 * "od#" hash, |u64 seen|u64 delivered|u64 position| (outbox.c). */
typedef struct outbox_mark { uint64_t tag, delivered; } outbox_mark;

static uint64_t be64(const unsigned char *at)
{
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | at[i];
  return v;
}

/* The durable sinks' marks (OUTBOX-3); damage when one is malformed. */
static size_t outbox_marks(walk *w, MDB_cursor *cur, outbox_mark *out, size_t cap)
{
  size_t n = 0;
  MDB_val k = { 2, (void *)"od" }, v;
  for (int mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
       mrc == 0 && k.mv_size >= 3 && memcmp(k.mv_data, "od", 2) == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    const char *key = k.mv_data;
    if (key[2] != ':' && key[2] != '#') continue;
    char name[600], label[1300];
    snprintf(name, sizeof name, "%.*s", (int)(k.mv_size < 500 ? k.mv_size : 500), key);
    if (key[2] == ':') rn_outbox_key_label(name + 3, label, sizeof label); /* as its user knows it (outbox.c) */
    else snprintf(label, sizeof label, "durable sink of a name too long for a key (%s)", name);
    uint64_t r[3];
    if (v.mv_size != sizeof r) { damaged(w, "the mark of %s is not 24 bytes%s", label, ""); continue; }
    memcpy(r, v.mv_data, sizeof r);
    if (r[1] > r[0] || r[0] > w->seq) damaged(w, "the mark of %s is past the last group%s", label, "");
    uint64_t tag = key[2] == ':' ? rn_hash64(key + 3, k.mv_size - 3) : strtoull(name + 3, NULL, 16);
    if (n < cap) out[n++] = (outbox_mark){ tag, r[1] };
  }
  return n;
}

/* The files durable sinks' positions are in: meta "of:" name or "of#"
 * hash, |u64 device|u64 inode|u64 delivered|u64 position| (outbox.c;
 * since 0.38), each beside its sink's mark. One that does not read is
 * taken as not recorded (the renamed file is then looked for by name):
 * damage to report, not to refuse. One without its mark (a runnel before
 * 0.38 dropped the sink's groups) or of another mark (one before 0.38
 * moved it) is never taken: a note. */
static void check_outbox_files(walk *w, MDB_cursor *cur)
{
  MDB_val k = { 2, (void *)"of" }, v, mv;
  for (int mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
       mrc == 0 && k.mv_size >= 3 && memcmp(k.mv_data, "of", 2) == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    const char *key = k.mv_data;
    if (key[2] != ':' && key[2] != '#') continue;
    char name[600], label[1300];
    snprintf(name, sizeof name, "%.*s", (int)(k.mv_size < 500 ? k.mv_size : 500), key);
    if (key[2] == ':') rn_outbox_key_label(name + 3, label, sizeof label);
    else snprintf(label, sizeof label, "durable sink of a name too long for a key (%s)", name);
    uint64_t r[4], m[3];
    if (v.mv_size != sizeof r) { damaged(w, "the file record of %s is not 32 bytes%s", label, ""); continue; }
    memcpy(r, v.mv_data, sizeof r);
    name[1] = 'd';
    MDB_val mk = { strlen(name), name };
    int got = k.mv_size < 500 ? mdb_get(w->txn, w->meta, &mk, &mv) : -1;
    const char *why = got == MDB_NOTFOUND ? "has no mark beside it" : NULL;
    if (got == 0 && mv.mv_size == sizeof m) { /* a mark of another size: outbox_marks says it */
      memcpy(m, mv.mv_data, sizeof m);
      if (m[1] != r[2] || m[2] != r[3]) why = "is of another mark than its sink's";
    }
    if (why) {
      fprintf(w->out, "note: the file record of %s %s (a runnel before 0.38 moved or dropped the mark): not taken\n",
              label, why);
      w->notes++;
    }
  }
}

/* Whether an outbox entry reads whole: a list of changes (after its
 * layout), each one rn_outbox_change takes, each row in it one msgpack
 * list and nothing after it (its columns' types need its relation's
 * schema: a delivery checks them). */
static bool entry_whole(const MDB_val *v, msgpack_zone *z)
{
  msgpack_object o;
  size_t off = 0;
  if (rn_unpack(v->mv_data, v->mv_size, &off, z, &o) != MSGPACK_UNPACK_SUCCESS || o.type != MSGPACK_OBJECT_ARRAY ||
      off != v->mv_size)
    return false;
  uint32_t first = o.via.array.size && o.via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER;
  for (uint32_t i = first; i < o.via.array.size; i++) {
    rn_change ch;
    if (!rn_outbox_change(&o.via.array.ptr[i], &ch)) return false;
    const char *rows[2] = { ch.row, ch.old };
    size_t lens[2] = { ch.row_len, ch.old_len };
    for (int r = 0; r < 2; r++) {
      unsigned char b = rows[r] && lens[r] ? (unsigned char)rows[r][0] : 0;
      if (rows[r] && ((b & 0xf0) != 0x90 && b != 0xdc && b != 0xdd)) return false;
      if (rows[r] && rn_msgpack_size(rows[r], lens[r]) != lens[r]) return false;
    }
  }
  return true;
}

/* The columns log sinks' waiting groups were committed with: meta "ol:"
 * tag layout (hex), msgpack [relation, schema description] (outbox.c (11);
 * since 0.37), each of a sink with a mark (n of them in marks; all when
 * n < cap), each reading as such (a delivery of a group in that layout
 * needs it). */
static void check_outbox_layouts(walk *w, MDB_cursor *cur, const outbox_mark *marks, size_t n, size_t cap)
{
  size_t plen = RN_PREFIX_LEN(RN_META_DURABLE_LAYOUT);
  MDB_val k = { plen, (void *)RN_META_DURABLE_LAYOUT }, v;
  msgpack_zone z;
  if (!rn_zone_init(&z, 1024)) { damaged(w, "%s: out of memory reading the outbox%s", w->path, ""); return; }
  for (int mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
       mrc == 0 && k.mv_size >= plen && memcmp(k.mv_data, RN_META_DURABLE_LAYOUT, plen) == 0;
       mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    char name[80], hex[17] = "";
    snprintf(name, sizeof name, "%.*s", (int)(k.mv_size < 60 ? k.mv_size : 60), (const char *)k.mv_data);
    if (k.mv_size != plen + 32) {
      damaged(w, "the column record %s is not named by a sink and a layout%s", name, "");
      continue;
    }
    memcpy(hex, (const char *)k.mv_data + plen, 16);
    uint64_t tag = strtoull(hex, NULL, 16);
    bool owned = n >= cap;
    for (size_t i = 0; i < n && !owned; i++) owned = marks[i].tag == tag;
    if (!owned) damaged(w, "the column record %s belongs to no durable sink's mark%s", name, "");
    msgpack_object o;
    size_t off = 0;
    if (rn_unpack(v.mv_data, v.mv_size, &off, &z, &o) != MSGPACK_UNPACK_SUCCESS || off != v.mv_size ||
        o.type != MSGPACK_OBJECT_ARRAY || o.via.array.size != 2 || o.via.array.ptr[0].type != MSGPACK_OBJECT_STR)
      damaged(w, "the column record %s does not read as [relation, columns]%s", name, "");
    msgpack_zone_clear(&z);
  }
  rn_zone_destroy(&z);
}

/* Every outbox entry belongs to a durable sink, waits (its seq is past the
 * sink's mark, not past the last group) and reads whole. */
static void check_outbox(walk *w, MDB_cursor *meta_cur)
{
  outbox_mark marks[256];
  size_t n = outbox_marks(w, meta_cur, marks, 256);
  check_outbox_layouts(w, meta_cur, marks, n, 256);
  MDB_dbi dbi;
  if (mdb_dbi_open(w->txn, "outbox", 0, &dbi) != 0) return; /* no durable sink ever */
  MDB_cursor *cur;
  msgpack_zone z;
  if (!rn_zone_init(&z, 4096)) { damaged(w, "%s: out of memory reading the outbox%s", w->path, ""); return; }
  if (mdb_cursor_open(w->txn, dbi, &cur)) {
    rn_zone_destroy(&z);
    damaged(w, "%s: the outbox cannot be read%s", w->path, "");
    return;
  }
  MDB_val k, v;
  for (int mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    char at[64] = "";
    if (k.mv_size != 16) { damaged(w, "an outbox key is not 16 bytes%s%s", "", ""); continue; }
    uint64_t tag = be64(k.mv_data), seq = be64((const unsigned char *)k.mv_data + 8);
    snprintf(at, sizeof at, "%llu", (unsigned long long)seq);
    const outbox_mark *m = NULL;
    for (size_t i = 0; i < n && !m; i++) if (marks[i].tag == tag) m = &marks[i];
    if (!m && n < 256) damaged(w, "the outbox entry of group %s belongs to no durable sink%s", at, "");
    else if (m && (seq <= m->delivered || seq > w->seq))
      damaged(w, "the outbox entry of group %s is outside what its sink waits for%s", at, "");
    else if (!entry_whole(&v, &z))
      damaged(w, "the outbox entry of group %s is not a list of whole changes%s", at, "");
    msgpack_zone_clear(&z);
  }
  rn_zone_destroy(&z);
  mdb_cursor_close(cur);
}

/* Groups waiting for a durable sink that no pipeline may collect
 * (OUTBOX-10): its relation is gone, or groups committed since it was last
 * declared. A note, not damage: declaring it again delivers them. */
static int note_undeclared_sink(void *ctx, const rn_outbox_kept *k)
{
  walk *w = ctx;
  if (!k->groups || (!k->relation_gone && k->seen >= w->seq)) return 0;
  fprintf(w->out, "note: %llu group%s (%llu row%s) since group %llu wait for %s, ", (unsigned long long)k->groups,
          k->groups == 1 ? "" : "s", (unsigned long long)k->rows, k->rows == 1 ? "" : "s",
          (unsigned long long)k->since, k->shown);
  if (k->relation_gone) fprintf(w->out, "whose relation %s is not in the state", k->relation);
  else fprintf(w->out, "not declared since group %llu (the last is %llu)", (unsigned long long)k->seen,
               (unsigned long long)w->seq);
  fprintf(w->out, ": declare it again to deliver them, or drop them (runnel drop-outbox STATE SINK)\n");
  w->notes++;
  return 0;
}

/* Each record of meta under prefix, named by what follows it: fn says
 * what is wrong with its value v (NULL: nothing). */
static void check_records_of(walk *w, MDB_cursor *cur, const char *prefix, const char *what,
                             const char *(*fn)(const walk *w, const MDB_val *v))
{
  size_t plen = strlen(prefix);
  MDB_val k = { plen, (void *)prefix }, v;
  int mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  for (; mrc == 0 && k.mv_size >= plen && memcmp(k.mv_data, prefix, plen) == 0;
       mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    const char *wrong = fn(w, &v);
    if (!wrong) continue;
    char name[600];
    snprintf(name, sizeof name, "%.*s", (int)(k.mv_size - plen > 512 ? 512 : k.mv_size - plen),
             (const char *)k.mv_data + plen);
    fprintf(w->out, "damaged: %s \"%s\": %s\n", what, name, wrong);
    w->damages++;
  }
}

static const char *reads_wrong(const walk *w, const MDB_val *v)
{
  (void)w;
  const char *names;
  size_t len;
  switch (rn_names_read(v, &names, &len)) {
  case RN_NAMES_MALFORMED: return "the list of the relations its functions read is malformed";
  case RN_NAMES_FAILED: return "the list of the relations its functions read fails its check";
  default: return NULL;
  }
}

static const char *store_seen_wrong(const walk *w, const MDB_val *v)
{
  uint64_t seen;
  if (v->mv_size != sizeof seen) return "its last group is not 8 bytes";
  memcpy(&seen, v->mv_data, sizeof seen);
  return seen > w->seq ? "its last group is past the state's" : NULL;
}

static const char *changed_wrong(const walk *w, const MDB_val *v)
{
  uint64_t last;
  if (v->mv_size != sizeof last) return "the record of the last group that changed it is not 8 bytes";
  memcpy(&last, v->mv_data, sizeof last);
  return last > w->seq ? "the record of the last group that changed it is past the last group" : NULL;
}

/* The records runnel reads back the safe way when damaged (a note), or
 * refuses: "rd:", "Ss:", "ch:", "chs", "ev", "sid" (store.h). */
static void check_records(walk *w, MDB_cursor *cur)
{
  check_records_of(w, cur, RN_META_READS, "relation", reads_wrong);
  check_records_of(w, cur, RN_META_STORE_SEEN, "store", store_seen_wrong);
  check_records_of(w, cur, RN_META_CHANGED, "relation", changed_wrong);
  MDB_val k = { RN_PREFIX_LEN(RN_META_CHANGED_SPAN), (void *)RN_META_CHANGED_SPAN }, v;
  uint64_t span[2];
  if (mdb_get(w->txn, w->meta, &k, &v) == 0) {
    if (v.mv_size != sizeof span) damaged(w, "%s: the span of groups its change records know is not 16 bytes%s",
                                          w->path, "");
    else if (memcpy(span, v.mv_data, sizeof span), span[0] > span[1] || span[1] > w->seq)
      damaged(w, "%s: the span of groups its change records know is backwards or past the last group%s", w->path, "");
  }
  k = (MDB_val){ RN_PREFIX_LEN(RN_META_EVOLVED), (void *)RN_META_EVOLVED };
  const char *names;
  size_t len;
  rn_names_state marks = RN_NAMES_CHECKED;
  if (mdb_get(w->txn, w->meta, &k, &v) == 0 && v.mv_size) marks = rn_names_read(&v, &names, &len);
  if (marks == RN_NAMES_MALFORMED || marks == RN_NAMES_FAILED)
    damaged(w, "%s: the record of the relations changed since the last group %s", w->path,
            marks == RN_NAMES_FAILED ? "fails its check" : "is malformed");
  k = (MDB_val){ RN_PREFIX_LEN(RN_META_STATE_ID), (void *)RN_META_STATE_ID };
  if (mdb_get(w->txn, w->meta, &k, &v) == 0) {
    const char *id = v.mv_data;
    bool hex = v.mv_size == 32;
    for (size_t i = 0; hex && i < 32; i++) hex = (id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f');
    if (!hex) damaged(w, "%s: its id is not 32 hex digits%s", w->path, "");
  }
}

static void check_catalogue(walk *w, int *relations)
{
  MDB_val k = { RN_PREFIX_LEN(RN_META_SEQ), (void *)RN_META_SEQ }, v;
  int rc = mdb_get(w->txn, w->meta, &k, &v);
  if (rc == 0 && v.mv_size == 8) memcpy(&w->seq, v.mv_data, 8);
  else if (rc == 0) damaged(w, "%s: the sequence number is not 8 bytes%s", w->path, "");
  MDB_cursor *cur;
  if (mdb_cursor_open(w->txn, w->meta, &cur)) {
    damaged(w, "%s: the catalogue cannot be read%s", w->path, "");
    return;
  }
  msgpack_zone z;
  if (!rn_zone_init(&z, 4096)) {
    mdb_cursor_close(cur);
    damaged(w, "%s: out of memory reading the catalogue%s", w->path, "");
    return;
  }
  k.mv_size = 2;
  k.mv_data = (void *)RN_META_RELATION;
  int mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  for (; mrc == 0 && k.mv_size >= 2 && memcmp(k.mv_data, RN_META_RELATION, RN_PREFIX_LEN(RN_META_RELATION)) == 0;
       mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    char name[4096];
    if (k.mv_size >= sizeof name) continue;
    snprintf(name, sizeof name, "%.*s", (int)k.mv_size - 2, (const char *)k.mv_data + 2);
    check_relation(w, name, &v, &z);
    msgpack_zone_clear(&z);
    (*relations)++;
  }
  rn_zone_destroy(&z);
  check_orphans(w, cur);
  check_outbox(w, cur);
  check_outbox_files(w, cur);
  rn_outbox_sinks_txn(w->txn, w->meta, note_undeclared_sink, w);
  check_records(w, cur);
  mdb_cursor_close(cur);
}

static int verify(const char *path, FILE *out)
{
  rn_err e;
  rn_err_clear(&e);
  walk w = { path, NULL, out, NULL, 0, 0, 0, 0, 0, 0 };
  MDB_env *env = NULL;
  /* every page its trees reach, read once as a file first: LMDB would die of
   * SIGBUS on one past its end, where open's check reads only what can be */
  int rc = rn_store_check_file(path, true, &e) || rn_envs_read(path, &env, &e) ? -1
           : rn_store_txn(env, MDB_RDONLY, &w.txn);
  if (!rc) rc = mdb_dbi_open(w.txn, RN_DB_META, 0, &w.meta);
  if (rc == MDB_NOTFOUND) rn_store_no_catalogue(w.txn, path, &e);
  else if (rc > 0 || (rc < 0 && rc != -1)) rn_err_set(&e, RN_EIO, "%s: %s", path, rn_store_strerror(rc));
  else if (!rc && rn_upgrade_readable(w.txn, w.meta, path, &e)) /* its layout is not this build's to judge */
    rc = -1;
  if (rc) {
    fprintf(out, "runnel: %s\n", e.msg);
    if (w.txn) mdb_txn_abort(w.txn);
    rn_envs_read_done(env);
    return e.code ? e.code : RN_EIO;
  }
  int relations = 0;
  w.env = env;
  if (walk_all(&w) == 0) check_catalogue(&w, &relations);
  else damaged(&w, "%s: the state cannot be read any further%s", path, "");
  if (w.txn) mdb_txn_abort(w.txn);
  rn_envs_read_done(env);
  fprintf(out, "%s: %d relations, %llu databases, %llu entries, last group %llu: %s (%d damaged, %d notes)\n",
          path, relations, (unsigned long long)w.databases, (unsigned long long)w.entries,
          (unsigned long long)w.seq, w.damages ? "DAMAGED" : "whole", w.damages, w.notes);
  return w.damages;
}

/* Its transaction opens every database: one such at a time (envs.h). */
int rn_verify(const char *path, FILE *out)
{
  rn_err e;
  rn_err_clear(&e);
  if (!path || !*path) {
    fprintf(out, "runnel: verify: the path is empty\n");
    return RN_EINVAL;
  }
  if (rn_flush_before_read(path, &e)) {
    fprintf(out, "runnel: %s\n", e.msg);
    return e.code;
  }
  rn_envs_dbis_lock();
  int rc = verify(path, out);
  rn_envs_dbis_unlock();
  return rc;
}
