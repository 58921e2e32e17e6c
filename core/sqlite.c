/* sqlite.c — a relation kept in a real SQLite table.
 *
 * The table is created if absent: quoted identifiers for any column name,
 * the relation's key as primary key (a keyless relation gets "runnel_id",
 * the row id). Types: int and bool INTEGER, float REAL, string TEXT, bytes
 * BLOB, lists, maps, structs and any as JSON TEXT.
 *
 * Each runnel group becomes one SQLite transaction of its net effect per
 * key: first the deletes of keys gone at the end of the group, then
 * INSERT … ON CONFLICT DO UPDATE of the final rows, so a group that moves a
 * row between keys never loses one. Statements are prepared once. The
 * transaction is opened when every sink has seen the group and committed
 * only once runnel committed it: a runnel group that rolls back leaves
 * SQLite untouched, and if SQLite fails, the runnel group rolls back. */
#include "sqlite.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "key.h"
#include "json.h"
#include "ndjson.h"
#include "row.h"

typedef struct op {
  uint64_t id;
  const char *row;        /* the final row (upsert) or the row whose key goes (delete) */
  size_t len;
  char *key;              /* encoded key, for "is this key still there" */
  size_t klen;
} op;

/* One connection per database file per pipeline, shared by its sinks, so
 * a group's writes to one file are one SQLite transaction. */
typedef struct rn_sqlite_conn {
  char *path;
  sqlite3 *db;
  int refs;
  bool open_txn;          /* this group's transaction is open */
  struct rn_sqlite_conn *next;
} rn_sqlite_conn;

static rn_sqlite_conn *conn_get(rn_pipeline *p, const char *path, rn_err *e)
{
  for (rn_sqlite_conn *c = p->sqlite_conns; c; c = c->next)
    if (strcmp(c->path, path) == 0) { c->refs++; return c; }
  rn_sqlite_conn *c = calloc(1, sizeof *c);
  if (!c || !(c->path = strdup(path))) {
    free(c);
    rn_err_set(e, RN_ENOMEM, "out of memory");
    return NULL;
  }
  if (sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
    rn_err_set(e, RN_EIO, "sqlite: %s: %s", path, c->db ? sqlite3_errmsg(c->db) : "out of memory");
    sqlite3_close(c->db);
    free(c->path);
    free(c);
    return NULL;
  }
  sqlite3_busy_timeout(c->db, 5000); /* another process may be reading it */
  c->refs = 1;
  c->next = p->sqlite_conns;
  p->sqlite_conns = c;
  return c;
}

static void conn_put(rn_pipeline *p, rn_sqlite_conn *c)
{
  if (--c->refs > 0) return;
  for (rn_sqlite_conn **at = (rn_sqlite_conn **)&p->sqlite_conns; *at; at = &(*at)->next)
    if (*at == c) { *at = c->next; break; }
  if (c->open_txn) sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
  sqlite3_close(c->db);
  free(c->path);
  free(c);
}

typedef struct ssink {
  rn_pipeline *p;
  rn_sqlite_conn *conn;
  sqlite3 *db;            /* conn->db */
  sqlite3_stmt *upsert, *del;
  rn_rel *rel;
  bool keyless;           /* keyed by runnel_id */
  op *dels, *ups;
  size_t ndels, nups, cap_dels, cap_ups;
  msgpack_zone zone;      /* the group's row and key copies */
} ssink;

static void quote(msgpack_sbuffer *b, const char *name)
{
  msgpack_sbuffer_write(b, "\"", 1);
  for (const char *c = name; *c; c++) {
    if (*c == '"') msgpack_sbuffer_write(b, "\"", 1);
    msgpack_sbuffer_write(b, c, 1);
  }
  msgpack_sbuffer_write(b, "\"", 1);
}

static void add(msgpack_sbuffer *b, const char *s) { msgpack_sbuffer_write(b, s, strlen(s)); }

static const char *sql_type(rn_type t)
{
  switch (t) {
  case RN_T_INT: case RN_T_BOOL: return "INTEGER";
  case RN_T_FLOAT: return "REAL";
  case RN_T_BYTES: return "BLOB";
  default: return "TEXT";
  }
}

static int fail(rn_err *e, sqlite3 *db, const char *rel, const char *what)
{
  return rn_err_set(e, RN_EIO, "%s: sqlite: %s: %s", rel, what, db ? sqlite3_errmsg(db) : "out of memory");
}

/* CREATE TABLE IF NOT EXISTS, and the two statements. */
static int prepare(ssink *s, const char *table, rn_err *e)
{
  const rn_schema *sc = s->rel->schema;
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  add(&b, "CREATE TABLE IF NOT EXISTS ");
  quote(&b, table);
  add(&b, " (");
  if (s->keyless) add(&b, "\"runnel_id\" INTEGER PRIMARY KEY, ");
  for (int i = 0; i < sc->ncols; i++) {
    if (i) add(&b, ", ");
    quote(&b, sc->cols[i].name);
    add(&b, " ");
    add(&b, sql_type(sc->cols[i].type));
  }
  if (!s->keyless) {
    add(&b, ", PRIMARY KEY (");
    for (int i = 0; i < sc->nkey; i++) {
      if (i) add(&b, ", ");
      quote(&b, sc->cols[sc->key_slots[i]].name);
    }
    add(&b, ")");
  }
  add(&b, ")");
  msgpack_sbuffer_write(&b, "", 1);
  int rc = sqlite3_exec(s->db, b.data, NULL, NULL, NULL);
  /* INSERT INTO t (keys…, cols…) VALUES (?…) ON CONFLICT (keys) DO UPDATE SET c = excluded.c */
  msgpack_sbuffer_clear(&b);
  add(&b, "INSERT INTO ");
  quote(&b, table);
  add(&b, " (");
  if (s->keyless) add(&b, "\"runnel_id\", ");
  for (int i = 0; i < sc->ncols; i++) {
    if (i) add(&b, ", ");
    quote(&b, sc->cols[i].name);
  }
  add(&b, ") VALUES (");
  for (int i = 0; i < sc->ncols + s->keyless; i++) add(&b, i ? ", ?" : "?");
  add(&b, ") ON CONFLICT (");
  if (s->keyless) add(&b, "\"runnel_id\"");
  for (int i = 0; !s->keyless && i < sc->nkey; i++) {
    if (i) add(&b, ", ");
    quote(&b, sc->cols[sc->key_slots[i]].name);
  }
  int nonkey = 0;
  for (int i = 0; i < sc->ncols; i++) nonkey += s->keyless || !sc->cols[i].is_key;
  add(&b, nonkey ? ") DO UPDATE SET " : ") DO NOTHING");
  for (int i = 0, n = 0; i < sc->ncols; i++) {
    if (!s->keyless && sc->cols[i].is_key) continue;
    if (n++) add(&b, ", ");
    quote(&b, sc->cols[i].name);
    add(&b, " = excluded.");
    quote(&b, sc->cols[i].name);
  }
  msgpack_sbuffer_write(&b, "", 1);
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v3(s->db, b.data, -1, SQLITE_PREPARE_PERSISTENT, &s->upsert, NULL);
  /* DELETE FROM t WHERE k1 = ? AND … */
  msgpack_sbuffer_clear(&b);
  add(&b, "DELETE FROM ");
  quote(&b, table);
  add(&b, " WHERE ");
  if (s->keyless) add(&b, "\"runnel_id\" = ?");
  for (int i = 0; !s->keyless && i < sc->nkey; i++) {
    if (i) add(&b, " AND ");
    quote(&b, sc->cols[sc->key_slots[i]].name);
    add(&b, " = ?");
  }
  msgpack_sbuffer_write(&b, "", 1);
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v3(s->db, b.data, -1, SQLITE_PREPARE_PERSISTENT, &s->del, NULL);
  msgpack_sbuffer_destroy(&b);
  return rc == SQLITE_OK ? 0 : fail(e, s->db, s->rel->name, "preparing the table");
}

static int bind_value(ssink *s, sqlite3_stmt *st, int at, const msgpack_object *v, const rn_column *c)
{
  switch (v->type) {
  case MSGPACK_OBJECT_NIL: return sqlite3_bind_null(st, at);
  case MSGPACK_OBJECT_BOOLEAN: return sqlite3_bind_int(st, at, v->via.boolean);
  case MSGPACK_OBJECT_POSITIVE_INTEGER: return sqlite3_bind_int64(st, at, (sqlite3_int64)v->via.u64);
  case MSGPACK_OBJECT_NEGATIVE_INTEGER: return sqlite3_bind_int64(st, at, v->via.i64);
  case MSGPACK_OBJECT_FLOAT32: case MSGPACK_OBJECT_FLOAT64: return sqlite3_bind_double(st, at, v->via.f64);
  case MSGPACK_OBJECT_STR:
    return sqlite3_bind_text(st, at, v->via.str.size ? v->via.str.ptr : "", (int)v->via.str.size, SQLITE_TRANSIENT);
  case MSGPACK_OBJECT_BIN:
    return sqlite3_bind_blob(st, at, v->via.bin.size ? v->via.bin.ptr : "", (int)v->via.bin.size, SQLITE_TRANSIENT);
  default: { /* lists, maps, structs: JSON text */
    msgpack_sbuffer j;
    msgpack_sbuffer_init(&j);
    rn_json_value(&j, v, c);
    int rc = sqlite3_bind_text(st, at, j.data ? j.data : "", (int)j.size, SQLITE_TRANSIENT);
    msgpack_sbuffer_destroy(&j);
    (void)s; /* s may be NULL (the lookup source binds keys) */
    return rc;
  }
  }
}

static int push_op(ssink *s, op **arr, size_t *n, size_t *cap, uint64_t id, const char *row, size_t len, rn_err *e)
{
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 64;
    op *a = realloc(*arr, c * sizeof *a);
    if (!a) return rn_err_set(e, RN_ENOMEM, "out of memory");
    *arr = a;
    *cap = c;
  }
  op *o = &(*arr)[(*n)++];
  o->id = id;
  o->len = len;
  o->row = msgpack_zone_malloc_no_align(&s->zone, len);
  if (!o->row) return rn_err_set(e, RN_ENOMEM, "out of memory");
  memcpy((char *)o->row, row, len);
  msgpack_sbuffer kb;
  msgpack_sbuffer_init(&kb);
  if (s->keyless) {
    msgpack_object idv = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = id };
    rn_key_append(&kb, &idv);
  } else {
    const msgpack_object *v = rn_row_unpack(o->row, len, s->rel->schema->ncols, &s->zone);
    if (v) rn_key_encode(s->rel->schema, v, &kb);
  }
  o->klen = kb.size;
  o->key = msgpack_zone_malloc_no_align(&s->zone, kb.size ? kb.size : 1);
  if (o->key) memcpy(o->key, kb.data, kb.size);
  msgpack_sbuffer_destroy(&kb);
  return o->key ? 0 : rn_err_set(e, RN_ENOMEM, "out of memory");
}

/* Gathers the group's net changes (the sink consolidates): a key that goes
 * is a delete, a final row an upsert. */
static int ssink_change(void *ctx, rn_rel *rel, const rn_change *c, const rn_sink_info *info, rn_err *e)
{
  (void)rel;
  ssink *s = ctx;
  int rc = 0;
  if (c->old) rc = push_op(s, &s->dels, &s->ndels, &s->cap_dels, info->id, c->old, c->old_len, e);
  if (!rc && c->row) rc = push_op(s, &s->ups, &s->nups, &s->cap_ups, info->id, c->row, c->row_len, e);
  return rc;
}

static bool upserted(const ssink *s, const op *d)
{
  for (size_t i = 0; i < s->nups; i++)
    if (s->ups[i].klen == d->klen && memcmp(s->ups[i].key, d->key, d->klen) == 0) return true;
  return false;
}

static int run(ssink *s, sqlite3_stmt *st, const op *o, bool key_only, rn_err *e)
{
  const rn_schema *sc = s->rel->schema;
  const msgpack_object *v = rn_row_unpack(o->row, o->len, sc->ncols, &s->zone);
  if (!v) return rn_err_set(e, RN_ESTORE, "%s: sqlite: a row could not be decoded", s->rel->name);
  sqlite3_reset(st);
  int at = 1, rc = SQLITE_OK;
  if (s->keyless) rc = sqlite3_bind_int64(st, at++, (sqlite3_int64)o->id);
  if (key_only && !s->keyless)
    for (int i = 0; i < sc->nkey && rc == SQLITE_OK; i++) rc = bind_value(s, st, at++, &v[sc->key_slots[i]], &sc->cols[sc->key_slots[i]]);
  if (!key_only)
    for (int i = 0; i < sc->ncols && rc == SQLITE_OK; i++) rc = bind_value(s, st, at++, &v[i], &sc->cols[i]);
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  return rc == SQLITE_DONE ? 0 : fail(e, s->db, s->rel->name, key_only ? "deleting" : "writing");
}

static void clear_group(ssink *s)
{
  s->ndels = s->nups = 0;
  msgpack_zone_clear(&s->zone);
}

/* Every sink has seen the group: write its net effect in one SQLite
 * transaction, committed in ssink_done once runnel commits. */
static int ssink_commit(void *ctx, uint64_t seq, rn_err *e)
{
  (void)seq;
  ssink *s = ctx;
  if (s->ndels == 0 && s->nups == 0) return 0;
  if (!s->conn->open_txn) {
    if (sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) return fail(e, s->db, s->rel->name, "BEGIN");
    s->conn->open_txn = true;
  }
  int rc = 0;
  for (size_t i = 0; i < s->ndels && !rc; i++)
    if (!upserted(s, &s->dels[i])) rc = run(s, s->del, &s->dels[i], true, e);
  for (size_t i = 0; i < s->nups && !rc; i++) rc = run(s, s->upsert, &s->ups[i], false, e);
  return rc;
}

static void ssink_done(void *ctx, bool committed)
{
  ssink *s = ctx;
  if (s->conn->open_txn) { /* the first sink of this file to hear it ends the transaction */
    if (sqlite3_exec(s->db, committed ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL) != SQLITE_OK && committed)
      fprintf(stderr, "runnel: %s: sqlite: COMMIT failed after runnel committed: %s\n", s->rel->name, sqlite3_errmsg(s->db));
    s->conn->open_txn = false;
  }
  clear_group(s);
}

static void free_ssink(void *ctx)
{
  ssink *s = ctx;
  sqlite3_finalize(s->upsert);
  sqlite3_finalize(s->del);
  if (s->conn) conn_put(s->p, s->conn);
  free(s->dels);
  free(s->ups);
  msgpack_zone_destroy(&s->zone);
  free(s);
}

int rn_sqlite_sink(rn_pipeline *p, rn_rel *rel, const char *path, const char *table)
{
  ssink *s = calloc(1, sizeof *s);
  if (!s || !msgpack_zone_init(&s->zone, 4096)) {
    free(s);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  s->p = p;
  s->rel = rel;
  s->keyless = rel->schema->nkey == 0;
  if (!(s->conn = conn_get(p, path, &p->err)) || (s->db = s->conn->db, prepare(s, table, &p->err))) {
    free_ssink(s);
    return p->err.code;
  }
  int rc = rn_sink_add(p, rel, true, ssink_change, ssink_commit, s, free_ssink);
  if (!rc) rn_sink_set_done(p, ssink_done);
  return rc;
}

/* ---- the lookup source: SELECT cols FROM table WHERE key = ? ---- */

typedef struct ssource {
  sqlite3 *db;
  sqlite3_stmt *select;
} ssource;

static void free_ssource(void *ctx)
{
  ssource *s = ctx;
  sqlite3_finalize(s->select);
  sqlite3_close(s->db);
  free(s);
}

static int ssource_fetch(void *ctx, rn_rel *lk, const msgpack_object *key, int nkey, msgpack_sbuffer *row,
                         int *found, rn_err *e)
{
  ssource *s = ctx;
  const rn_schema *ls = lk->schema;
  rn_pipeline *p = lk->p;
  sqlite3_reset(s->select);
  for (int i = 0; i < nkey; i++) bind_value(NULL, s->select, i + 1, &key[i], NULL);
  int rc = sqlite3_step(s->select);
  *found = rc == SQLITE_ROW;
  if (rc == SQLITE_DONE) return 0;
  if (rc != SQLITE_ROW) return fail(e, s->db, lk->name, "looking up");
  msgpack_object *v = msgpack_zone_malloc(&p->scratch, sizeof *v * (size_t)ls->ncols);
  uint8_t *given = msgpack_zone_malloc(&p->scratch, (size_t)ls->ncols);
  if (!v || !given) return rn_err_set(e, RN_ENOMEM, "out of memory");
  for (int i = 0; i < ls->ncols; i++) {
    given[i] = 1;
    switch (sqlite3_column_type(s->select, i)) {
    case SQLITE_NULL: v[i].type = MSGPACK_OBJECT_NIL; break;
    case SQLITE_INTEGER: {
      sqlite3_int64 x = sqlite3_column_int64(s->select, i);
      if (ls->cols[i].type == RN_T_BOOL) { v[i].type = MSGPACK_OBJECT_BOOLEAN; v[i].via.boolean = x != 0; }
      else if (x >= 0) { v[i].type = MSGPACK_OBJECT_POSITIVE_INTEGER; v[i].via.u64 = (uint64_t)x; }
      else { v[i].type = MSGPACK_OBJECT_NEGATIVE_INTEGER; v[i].via.i64 = x; }
      break;
    }
    case SQLITE_FLOAT: v[i].type = MSGPACK_OBJECT_FLOAT64; v[i].via.f64 = sqlite3_column_double(s->select, i); break;
    default: { /* text and blobs, copied: the statement's memory moves on */
      int n = sqlite3_column_bytes(s->select, i);
      const void *d = sqlite3_column_type(s->select, i) == SQLITE_BLOB ? sqlite3_column_blob(s->select, i)
                                                                       : (const void *)sqlite3_column_text(s->select, i);
      char *copy = msgpack_zone_malloc_no_align(&p->scratch, (size_t)(n ? n : 1));
      if (!copy) return rn_err_set(e, RN_ENOMEM, "out of memory");
      if (n) memcpy(copy, d, (size_t)n);
      v[i].type = sqlite3_column_type(s->select, i) == SQLITE_BLOB ? MSGPACK_OBJECT_BIN : MSGPACK_OBJECT_STR;
      v[i].via.str.ptr = copy;
      v[i].via.str.size = (uint32_t)n;
      if ((ls->cols[i].type == RN_T_LIST || ls->cols[i].type == RN_T_MAP || ls->cols[i].type == RN_T_ANY ||
           ls->cols[i].type == RN_T_STRUCT) && rn_json_parse(copy, (size_t)n, &v[i], &p->scratch, e))
        return e->code;
    }
    }
  }
  rc = rn_row_normalize(ls, lk->name, RN_ROW_FULL, v, given, &p->scratch, e);
  if (!rc) rn_row_pack(ls, v, row);
  sqlite3_reset(s->select);
  return rc;
}

int rn_sqlite_source(const char *path, const char *table, const rn_schema *ls, const char *rel,
                     rn_lookup_fetch *fetch, void **ctx, rn_free_fn *free_ctx, rn_err *e)
{
  ssource *s = calloc(1, sizeof *s);
  if (!s) return rn_err_set(e, RN_ENOMEM, "out of memory");
  if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    rn_err_set(e, RN_EIO, "%s: sqlite_source: %s: %s", rel, path, s->db ? sqlite3_errmsg(s->db) : "out of memory");
    free_ssource(s);
    return e->code;
  }
  sqlite3_busy_timeout(s->db, 5000);
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  add(&b, "SELECT ");
  for (int i = 0; i < ls->ncols; i++) {
    if (i) add(&b, ", ");
    quote(&b, ls->cols[i].name);
  }
  add(&b, " FROM ");
  quote(&b, table);
  add(&b, " WHERE ");
  for (int i = 0; i < ls->nkey; i++) {
    if (i) add(&b, " AND ");
    quote(&b, ls->cols[ls->key_slots[i]].name);
    add(&b, " = ?");
  }
  msgpack_sbuffer_write(&b, "", 1);
  int rc = sqlite3_prepare_v3(s->db, b.data, -1, SQLITE_PREPARE_PERSISTENT, &s->select, NULL);
  msgpack_sbuffer_destroy(&b);
  if (rc != SQLITE_OK) {
    rn_err_set(e, RN_EINVAL, "%s: sqlite_source: %s: %s", rel, path, sqlite3_errmsg(s->db));
    free_ssource(s);
    return e->code;
  }
  *fetch = ssource_fetch;
  *ctx = s;
  *free_ctx = free_ssource;
  return 0;
}
