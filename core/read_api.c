/* read_api.c — reading from a C host: rn_get and row cursors (runnel.h),
 * rows handed out as msgpack maps keyed by external names.
 *
 * A table's rows are read as its pipeline reads them (table.c). Every other
 * relation's are read by the reader runnel.attach and runnel query use
 * (reader.h: joins, tops, selects, aggregates, distincts, indexes; filters,
 * maps, streams, cdc relations and lookups refused saying why), in
 *
 * - the open group's write transaction, inside a group (or from one of its
 *   callbacks): the group's own changes so far, as rel:rows() sees them in
 *   Lua. The write-back layer's entries are written into it first (wb.h):
 *   the reader reads with LMDB's own calls;
 * - outside a group, the transaction carrying committed groups (sync =
 *   false) when there is one: every committed group, without ending the
 *   carry; with the write-back layer on, the carried groups are committed
 *   first instead (rn_flush), and read as below;
 * - else a read transaction of its own: whole groups only.
 *
 * A derived relation's cursor makes its rows at open (O(rows) memory). A
 * cursor opened inside a group ends with the group (its rows were the
 * group's), whether it committed or not. */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "key.h"
#include "pipeline.h"
#include "reader.h"
#include "row.h"
#include "wb.h"

struct rn_cursor {
  rn_pipeline *p;         /* NULL once the pipeline closed */
  rn_cursor *next, *prev; /* p->read_cursors */
  rn_rel *rel;
  rn_table_cursor *rows;  /* a table's cursor (table.c), read as it goes */
  msgpack_sbuffer made;   /* a derived relation's rows, made at open: |u64 id|u64 len|map| … */
  size_t at;              /* … the next one's offset */
  bool in_group;          /* opened inside group `group`: the cursor ends with it */
  uint64_t group;
  msgpack_sbuffer map;    /* a table's current row as a map */
  msgpack_zone zone;      /* decoding rows */
};

/* Checks shared by the reads: a relation of p. */
static int check_read(rn_pipeline *p, rn_rel *rel, const char *what)
{
  rn_err_clear(&p->err);
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's use of its parent's LMDB */
  if (!rel) return rn_err_set(&p->err, RN_EINVAL, "%s: the relation is NULL (did rn_relation find it?)", what);
  if (rel->p != p) return rn_err_set(&p->err, RN_EINVAL, "%s: %s: the relation belongs to another pipeline",
                                     rel->name, what);
  return 0;
}

/* No change of p is running: its scratch zone and out-of-memory flag are
 * the read's (from a callback they are the change's). */
static bool reads_alone(const rn_pipeline *p)
{
  return p->state == RN_IDLE || p->state == RN_OPEN;
}

/* ---- derived relations: a reader over a view of the state ---- */

typedef struct view {
  MDB_txn *txn;           /* where the reader reads */
  MDB_txn *own;           /* a read transaction begun for it, or NULL */
  rn_reader *r;
} view;

static void view_close(view *v)
{
  rn_reader_free(v->r);
  if (v->own) mdb_txn_abort(v->own);
  *v = (view){ 0 };
}

/* The write-back layer's entries into the write transaction (they stay,
 * clean). A full map inside an open group grows it, the group's changes
 * applied again (group.c (5)); if that fails too the group is rolled back,
 * its transaction being unusable. From a callback, the error returns, and
 * the store notes it (store.h's wb_failed): whatever the callback returns,
 * the group it runs in then grows the map and runs again (a subscriber is
 * told it rolled back first), or, between groups, the carried ones are
 * applied again at the next change or flush (rn_group_check_store). */
static int write_back_out(rn_pipeline *p, const char *name)
{
  for (;;) {
    int mrc = rn_wb_flush(&p->store);
    if (!mrc) return 0;
    int rc = rn_store_fail(&p->err, mrc, name);
    if (p->state != RN_OPEN) return rc;
    if (rc != RN_EFULL || rn_group_regrow(p) != 0) return rn_group_fail(p, p->err.code, p->err.msg);
  }
}

int rn_state_entries(rn_pipeline *p, rn_entries_fn fn, void *ctx)
{
  int rc = 0;
  if (p->store.wtxn && p->store.wb)
    rc = p->state == RN_IDLE ? rn_group_write_back_idle(p) : write_back_out(p, "stats");
  MDB_txn *txn;
  if (!rc) rc = rn_store_reader(&p->store, &txn, &p->err);
  if (rc) return rc;
  for (int i = 0; i < p->nrels; i++) fn(ctx, p->rels[i]->name, rn_store_entries(txn, p->rels[i]->name));
  rn_store_reader_done(&p->store);
  return 0;
}

/* Opens a reader of rel over the view the file comment describes; what
 * ("rn_get", "rn_cursor_open") prefixes a refusal. Closed by view_close
 * (nothing to close on failure). */
static int view_open(rn_pipeline *p, rn_rel *rel, const char *what, view *v)
{
  *v = (view){ 0 };
  int rc = 0;
  if (p->store.wtxn && p->state == RN_IDLE && p->store.wb) rc = rn_flush(p);
  else if (p->store.wtxn) rc = write_back_out(p, rel->name);
  if (rc) return rc;
  v->txn = p->store.wtxn;
  if (!v->txn) {
    int mrc = mdb_txn_begin(p->store.env, NULL, MDB_RDONLY, &v->own);
    if (mrc) return rn_store_fail(&p->err, mrc, rel->name);
    v->txn = v->own;
  }
  if ((rc = rn_reader_open(v->txn, p->store.meta, p->store.path, rel->name, &v->r, &p->err))) {
    rn_err_prefix(&p->err, what);
    view_close(v);
  }
  return rc;
}

/* A key that is not a map is refused saying what a key is (rn_map_slots
 * would speak of a change). */
static int key_not_map(rn_pipeline *p, rn_rel *rel, const msgpack_object *m)
{
  if (m->type == MSGPACK_OBJECT_MAP) return 0;
  return rn_err_set(&p->err, RN_EINVAL, "%s: rn_get: the key is a msgpack map of the key columns by name (as "
                    "{\"%s\": …}), got %s", rel->name, rel->schema->nkey ? rel->schema->cols[rel->schema->key_slots[0]].name : "id",
                    rn_value_kind_sent(m));
}

/* The key map m as the reader's key (key.h), in p->keybuf. */
static int derived_key(rn_pipeline *p, rn_rel *rel, const rn_reader *r, const msgpack_object *m)
{
  const rn_schema *s = rn_reader_schema(r);
  if (!s->nkey)
    return rn_err_set(&p->err, RN_EINVAL, "%s: rn_get: a keyless %s has no key to read by (rn_cursor_open reads "
                      "its rows)", rel->name, rn_reader_kind(r));
  rn_rel keyed = { .p = p, .name = rel->name, .schema = (rn_schema *)s }; /* for the map's column names */
  msgpack_object *vals = NULL;
  uint8_t *given = NULL;
  int rc = rn_map_slots(p, &keyed, m, &vals, &given);
  if (!rc) rc = rn_row_normalize(s, rel->name, RN_ROW_KEY, vals, given, &p->scratch, &p->err);
  msgpack_sbuffer_clear(&p->keybuf);
  char col[300];
  if (!rc && rn_key_encode(s, vals, &p->keybuf) != 0)
    rc = rn_err_set(&p->err, RN_EINVAL, "%s: rn_get: %s: NaN is no key", rel->name,
                    rn_key_nan_column(s, vals, col, sizeof col));
  return rc;
}

typedef struct got {
  rn_pipeline *p;
  const rn_reader *r;
  int found;
  uint64_t id;
} got;

/* The row found, as a map in p->getbuf. */
static int got_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  got *g = ctx;
  msgpack_sbuffer_clear(&g->p->getbuf);
  if (rn_row_to_map(rn_reader_schema(g->r), row, len, &g->p->scratch, &g->p->getbuf))
    return rn_err_set(&g->p->err, RN_ESTORE, "rn_get: a row of \"%s\" could not be decoded", rn_reader_kind(g->r));
  g->found = 1;
  g->id = id;
  return 0;
}

/* rn_get of a relation that is not a table: *found, *id and p->getbuf. */
static int derived_get(rn_pipeline *p, rn_rel *rel, const void *key, size_t key_len, int *found, uint64_t *id)
{
  /* The key may be the last rn_get's row, in getbuf, which the durability
   * hooks of the view's flush may read into: it is copied first. */
  char *own = malloc(key_len ? key_len : 1);
  if (!own) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  memcpy(own, key, key_len);
  view v;
  int rc = view_open(p, rel, "rn_get", &v); /* first: a flush or a regrow may use the scratch zone */
  if (rc) {
    free(own);
    return rc;
  }
  msgpack_object m;
  size_t off = 0;
  if (rn_unpack(own, key_len, &off, &p->scratch, &m) != MSGPACK_UNPACK_SUCCESS)
    rc = rn_err_set(&p->err, RN_EINVAL, "%s: rn_get: the key is not one msgpack value", rel->name);
  if (!rc) rc = key_not_map(p, rel, &m);
  if (!rc) rc = derived_key(p, rel, v.r, &m);
  got g = { p, v.r, 0, 0 };
  if (!rc) rc = rn_reader_get(v.r, v.txn, p->keybuf.data, p->keybuf.size, got_row, &g, &p->err);
  view_close(&v);
  free(own); /* after the read: the decoded key's strings point into it */
  *found = g.found;
  *id = g.id;
  return rc;
}

/* ---- rn_get ---- */

/* A table's row under key, as a map in p->getbuf. */
static int table_get(rn_pipeline *p, rn_rel *rel, const void *key, size_t key_len, int *found, uint64_t *id)
{
  msgpack_object m;
  size_t off = 0;
  if (rn_unpack(key, key_len, &off, &p->scratch, &m) != MSGPACK_UNPACK_SUCCESS)
    return rn_err_set(&p->err, RN_EINVAL, "%s: rn_get: the key is not one msgpack value", rel->name);
  msgpack_object *vals = NULL;
  uint8_t *given = NULL;
  const char *data = NULL;
  size_t len = 0;
  int rc = key_not_map(p, rel, &m);
  if (!rc) rc = rn_map_slots(p, rel, &m, &vals, &given);
  if (!rc) rc = rn_table_get(rel, vals, given, found, id, &data, &len);
  msgpack_sbuffer_clear(&p->getbuf);
  if (!rc && *found && rn_row_to_map(rel->schema, data, len, &p->scratch, &p->getbuf)) /* its buffer, or the row */
    rc = rn_oom() ? rn_err_set(&p->err, RN_ENOMEM, "out of memory")
                  : rn_err_set(&p->err, RN_ESTORE, "%s: rn_get: a stored row could not be decoded", rel->name);
  return rc;
}

/* The map rn_get hands out lives in p->getbuf until the next call. */
RN_API int rn_get(rn_pipeline *p, rn_rel *rel, const void *key, size_t key_len, const void **row, size_t *row_len,
                  uint64_t *id)
{
  if (!p) return RN_EINVAL;
  int rc = check_read(p, rel, "rn_get");
  if (rc) return rc;
  if (!key || !row || !row_len) return rn_err_set(&p->err, RN_EINVAL, "%s: rn_get: key, row and row_len are required",
                                                  rel->name);
  *row = NULL;
  *row_len = 0;
  if (rn_msgpack_size(key, key_len) != key_len)
    return rn_err_set(&p->err, RN_EINVAL, "%s: rn_get: the key is not one msgpack value", rel->name);
  if (reads_alone(p)) rn_oom_clear();
  int found = 0;
  uint64_t rid = 0;
  rc = rel->kind == RN_REL_TABLE ? table_get(p, rel, key, key_len, &found, &rid)
                                 : derived_get(p, rel, key, key_len, &found, &rid);
  if (reads_alone(p)) msgpack_zone_clear(&p->scratch);
  if (!rc && rn_oom()) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (rc || !found) return rc;
  *row = p->getbuf.data;
  *row_len = p->getbuf.size;
  if (id) *id = rid;
  return 0;
}

/* ---- cursors ---- */

typedef struct making {
  rn_cursor *c;
  const rn_schema *s;
  rn_err *e;
} making;

/* A derived row into c->made: |u64 id|u64 len|map|. */
static int make_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  making *mk = ctx;
  msgpack_sbuffer *b = &mk->c->made;
  size_t at = b->size;
  uint64_t n = 0;
  rn_buf_write(b, (const char *)&id, 8);
  rn_buf_write(b, (const char *)&n, 8);
  int rc = rn_row_to_map(mk->s, row, len, &mk->c->zone, b);
  msgpack_zone_clear(&mk->c->zone);
  if (rn_oom()) return rn_err_set(mk->e, RN_ENOMEM, "out of memory");
  if (rc) return rn_err_set(mk->e, RN_ESTORE, "%s: a row could not be decoded", mk->c->rel->name);
  n = b->size - at - 16;
  memcpy(b->data + at + 8, &n, 8);
  return 0;
}

/* A derived relation's rows, in the reader's order (reader.h), made now. */
static int derived_rows(rn_pipeline *p, rn_cursor *c)
{
  view v;
  int rc = view_open(p, c->rel, "rn_cursor_open", &v);
  if (rc) return rc;
  making mk = { c, rn_reader_schema(v.r), &p->err };
  rc = rn_reader_each(v.r, v.txn, make_row, &mk, &p->err);
  view_close(&v);
  return rc;
}

RN_API int rn_cursor_open(rn_pipeline *p, rn_rel *rel, rn_cursor **out)
{
  if (!p) return RN_EINVAL;
  int rc = check_read(p, rel, "rn_cursor_open");
  if (rc) return rc;
  if (!out) return rn_err_set(&p->err, RN_EINVAL, "%s: rn_cursor_open: out is NULL", rel->name);
  *out = NULL;
  rn_cursor *c = calloc(1, sizeof *c);
  if (!c || !rn_zone_init(&c->zone, 1024)) {
    free(c);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  c->p = p;
  c->rel = rel;
  msgpack_sbuffer_init(&c->map);
  msgpack_sbuffer_init(&c->made);
  c->next = p->read_cursors;
  if (p->read_cursors) p->read_cursors->prev = c;
  p->read_cursors = c;
  if (reads_alone(p)) rn_oom_clear();
  rc = rel->kind == RN_REL_TABLE ? rn_table_cursor_open(rel, &c->rows) : derived_rows(p, c);
  if (!rc && rn_oom()) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  c->in_group = p->state != RN_IDLE; /* after the reads: a map that grew began the group again */
  c->group = p->group_serial;
  if (rc) {
    rn_cursor_close(c);
    return rc;
  }
  *out = c;
  return 0;
}

/* The next of a derived relation's rows made at open. */
static int next_made(rn_cursor *c, const void **row, size_t *row_len, uint64_t *id, int *done)
{
  if (c->at >= c->made.size) {
    *done = 1;
    return 0;
  }
  uint64_t n;
  memcpy(id, c->made.data + c->at, 8);
  memcpy(&n, c->made.data + c->at + 8, 8);
  *row = c->made.data + c->at + 16;
  *row_len = (size_t)n;
  c->at += 16 + (size_t)n;
  return 0;
}

RN_API int rn_cursor_next(rn_cursor *c, const void **row, size_t *row_len, uint64_t *id, int *done)
{
  if (!c) return RN_EINVAL;
  if (!row || !row_len || !id || !done) /* the pipeline, if open, says so */
    return c->p ? rn_err_set(&c->p->err, RN_EINVAL, "%s: rn_cursor_next: row, row_len, id and done are required",
                             c->rel->name)
                : RN_EINVAL;
  *row = NULL;
  *row_len = 0;
  *done = 0;
  if (!c->p) return RN_EMISUSE; /* its pipeline was closed: no message, there is nowhere to keep one */
  rn_pipeline *p = c->p;
  rn_err_clear(&p->err);
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's use of its parent's LMDB */
  if (reads_alone(p)) rn_oom_clear(); /* the step's own: an earlier read's failure is not this one's */
  if (c->in_group && (p->state == RN_IDLE || p->group_serial != c->group)) /* committed or rolled back */
    return rn_err_set(&p->err, RN_EMISUSE, "%s: rn_cursor_next: the group this cursor was opened in has ended "
                      "(its rows were that group's: open another)", c->rel->name);
  if (!c->rows) return next_made(c, row, row_len, id, done);
  if (rn_table_cursor_grown(c->rows)) /* its read transaction ended before the map was remapped */
    return rn_err_set(&p->err, RN_EMISUSE, "%s: rn_cursor_next: the cursor was opened before the state grew (its "
                      "map was enlarged, which ends the reads open between groups): open it again", c->rel->name);
  const char *data;
  size_t len;
  int rc = rn_table_cursor_next(c->rows, id, &data, &len, done);
  if (rc || *done) return rc;
  msgpack_sbuffer_clear(&c->map);
  rc = rn_row_to_map(c->rel->schema, data, len, &c->zone, &c->map);
  msgpack_zone_clear(&c->zone);
  if (rn_oom()) return rn_err_set(&c->p->err, RN_ENOMEM, "out of memory");
  if (rc) return rn_err_set(&c->p->err, RN_ESTORE, "%s: a stored row could not be decoded", c->rel->name);
  *row = c->map.data;
  *row_len = c->map.size;
  return 0;
}

RN_API void rn_cursor_close(rn_cursor *c)
{
  if (!c) return;
  if (c->p) {
    if (c->prev) c->prev->next = c->next;
    else c->p->read_cursors = c->next;
    if (c->next) c->next->prev = c->prev;
  }
  rn_table_cursor_close(c->rows);
  msgpack_sbuffer_destroy(&c->map);
  msgpack_sbuffer_destroy(&c->made);
  rn_zone_destroy(&c->zone);
  free(c);
}

void rn_read_cursors_orphan(rn_pipeline *p)
{
  for (rn_cursor *c = p->read_cursors; c; c = c->next) c->p = NULL;
  p->read_cursors = NULL;
}
