/* distinct.c — rel:distinct(): the distinct rows of a table-like input, as
 * a keyless table-like relation with the input's columns.
 *
 * Rules (DISTINCT-n in specs):
 * (1) A row is in the output while at least one copy of it is in the input:
 *     copies are counted, so deleting one of two equal rows keeps the row.
 *     Rows are equal when their stored bytes are (as a keyless table's),
 *     -0.0 being 0.0 (rn_row_same); a distinct row holds the one form of
 *     its copies, every zero 0.0, whichever copy brought it in.
 * (2) Each distinct row keeps one id from the copy that brought it in until
 *     the last copy leaves; ids come from the relation's own counter and are
 *     never reused. A rebuild at open (stale or new state) keeps the id of
 *     every row still present.
 * (3) An input UPDATE is the removal of its old row and the addition of its
 *     new one: a DELETE and an INSERT downstream when both change the
 *     output, nothing when old and new are equal.
 *
 * State, "<prefix>" name (store.h):
 *
 *     "dr:"  |u64 id BE| -> |u64 copies|row|
 *     "dh:"  |u64 hash(row)| -> dup |u64 id BE|
 *
 * This file is the whole operator. Adding it took, besides this file and
 * its header: the kind's pinned value (pipeline.h), its two prefixes
 * (store.h), one line in ops.c and one in inspect.c's stored kinds; the
 * graph (relation.c, group.c, scan.c) did not change. Lua: p:_distinct (lpipeline.c) and Relation:distinct. */
#include "evolve_log.h"
#include "distinct.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "key.h"
#include "ops.h"
#include "row.h"
#include "reader.h"
#include "scan.h"
#include "snapshot.h"

typedef struct rn_distinct {
  rn_rel *out;            /* the relation */
  MDB_dbi rows_dbi;       /* "dr:" */
  MDB_dbi hash_dbi;       /* "dh:" */
} rn_distinct;

static int store_fail(rn_distinct *d, int rc)
{
  return rn_store_fail(&d->out->p->err, rc, d->out->name);
}

/* A stored row ("dr:") holds its id and its |u64 copies| head: else it is
 * damage, never read past its end. */
static int stored_row_damaged(rn_distinct *d, const MDB_val *k, const MDB_val *v)
{
  if (k->mv_size == 8 && v->mv_size >= 8) return 0;
  return rn_err_set(&d->out->p->err, RN_ESTORE, "state damaged: %s: distinct \"%s\": stored row %llu is %zu bytes, "
                    "shorter than its head", d->out->p->store.path, d->out->name,
                    (unsigned long long)(k->mv_size == 8 ? rn_be64_get(k->mv_data) : 0), v->mv_size);
}

/* The id and copies of the stored row equal to row (rn_row_same); *id = 0
 * if none. stored (may be NULL): that row as stored (its zeros may have
 * another sign than row's), copied into the scratch zone, its zeros as
 * 0.0 (add_copy). */
static int find(rn_distinct *d, MDB_txn *txn, const char *row, size_t len, uint64_t *id, uint64_t *copies,
                const char **stored)
{
  *id = 0;
  uint64_t h = rn_row_hash(row, len);
  bool nomem = false;
  MDB_val k = { 8, &h }, v;
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn, d->hash_dbi, &cur);
  if (rc) return store_fail(d, rc);
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_KEY); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT_DUP)) {
    MDB_val rk = { 8, v.mv_data }, rv;
    if (v.mv_size == 8 && mdb_get(txn, d->rows_dbi, &rk, &rv) == 0 && rv.mv_size == 8 + len && /* else damaged: not it */
        rn_row_same((const char *)rv.mv_data + 8, len, row, len)) {
      *id = rn_be64_get(v.mv_data);
      memcpy(copies, rv.mv_data, 8);
      if (stored) *stored = rn_scratch_copy(d->out->p, (const char *)rv.mv_data + 8, len);
      nomem = stored && !*stored;
      if (stored && *stored) rn_row_zero_signs((char *)*stored, len); /* a row held before 0.0 was its one form */
      break;
    }
  }
  mdb_cursor_close(cur);
  if (nomem) return rn_err_set(&d->out->p->err, RN_ENOMEM, "out of memory");
  return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_fail(d, rc);
}

/* Stores |copies|row| under id. */
static int put_row(rn_distinct *d, MDB_txn *txn, uint64_t id, uint64_t copies, const char *row, size_t len)
{
  char idk[8];
  rn_be64_put(idk, id);
  MDB_val k = { 8, idk }, v = { 8 + len, NULL };
  int rc = mdb_put(txn, d->rows_dbi, &k, &v, MDB_RESERVE);
  if (rc) return store_fail(d, rc);
  memcpy(v.mv_data, &copies, 8);
  memcpy((char *)v.mv_data + 8, row, len);
  return 0;
}

/* Adds or removes the row id's entries in both databases. */
static int link_row(rn_distinct *d, MDB_txn *txn, uint64_t id, const char *row, size_t len, bool add)
{
  char idk[8];
  rn_be64_put(idk, id);
  uint64_t h = rn_row_hash(row, len);
  MDB_val hk = { 8, &h }, hv = { 8, idk }, rk = { 8, idk };
  int rc = add ? put_row(d, txn, id, 1, row, len) : mdb_del(txn, d->rows_dbi, &rk, NULL);
  if (rc && add) return rc;
  if (!rc) rc = add ? mdb_put(txn, d->hash_dbi, &hk, &hv, 0) : mdb_del(txn, d->hash_dbi, &hk, &hv);
  return rc ? store_fail(d, rc) : 0;
}

/* One more copy of row (1); emits the INSERT of a new distinct row (2)
 * when emit. */
static int add_copy(rn_distinct *d, const char *row, size_t len, bool emit)
{
  rn_rel *r = d->out;
  MDB_txn *txn = r->p->store.wtxn;
  uint64_t id, copies = 0;
  const char *held = NULL;
  int rc = find(d, txn, row, len, &id, &copies, &held);
  if (rc || id) return rc ? rc : put_row(d, txn, id, copies + 1, held, len); /* the row as it came in (2) */
  /* A distinct row stands for every equal copy, so it holds their one
   * form (0.0, one NaN): the -0.0 of a first copy would stay after that
   * copy left and only 0.0 copies remained, and which sign it showed would
   * hang on the order copies came in (an aggregate's group values are 0.0
   * too, and SQL's DISTINCT gives 0.0). */
  char *canon = (char *)rn_scratch_copy(r->p, row, len);
  if (!canon) return rn_err_set(&r->p->err, RN_ENOMEM, "out of memory");
  rn_row_zero_signs(canon, len);
  row = canon;
  id = r->next_id++;
  rc = link_row(d, txn, id, row, len, true);
  if (rc) return rc;
  r->count++;
  rn_change c = { .verb = RN_INSERT, .id = id, .row = row, .row_len = len };
  return emit ? rn_emit(r, &c) : 0;
}

/* One copy of row less (1); emits the DELETE when it was the last. */
static int remove_copy(rn_distinct *d, const char *row, size_t len)
{
  rn_rel *r = d->out;
  MDB_txn *txn = r->p->store.wtxn;
  uint64_t id, copies = 0;
  int rc = find(d, txn, row, len, &id, &copies, &row); /* the row as held: the one its INSERT gave */
  if (rc) return rc;
  if (!id)
    return rn_err_set(&r->p->err, RN_ESTORE, "state damaged: %s: distinct \"%s\": %s deleted a row it never held",
                      r->p->store.path, r->name, r->input->name);
  if (copies > 1) return put_row(d, txn, id, copies - 1, row, len);
  rc = link_row(d, txn, id, row, len, false);
  if (rc) return rc;
  r->count--;
  rn_change c = { .verb = RN_DELETE, .id = id, .old = row, .old_len = len };
  return rn_emit(r, &c);
}

/* The apply (ops.h), by (3). */
static int distinct_apply(rn_rel *r, rn_rel *from, const rn_change *c)
{
  (void)from;
  if (c->old && c->row && rn_row_same(c->old, c->old_len, c->row, c->row_len)) return 0;
  int rc = c->old ? remove_copy(r->ctx, c->old, c->old_len) : 0;
  return !rc && c->row ? add_copy(r->ctx, c->row, c->row_len, true) : rc;
}

typedef struct distinct_scan {
  rn_distinct *d;
  rn_scan_fn fn;
  void *ctx;
} distinct_scan;

static int scan_in(void *ctx, MDB_txn *txn, bool own_scratch)
{
  distinct_scan *s = ctx;
  rn_pipeline *p = s->d->out->p;
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn, s->d->rows_dbi, &cur);
  if (rc) return store_fail(s->d, rc);
  MDB_val k, v;
  for (int mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !rc && mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if ((rc = stored_row_damaged(s->d, &k, &v))) break;
    char *row = (char *)rn_scratch_copy(p, (const char *)v.mv_data + 8, v.mv_size - 8); /* fn may read on */
    if (row) rn_row_zero_signs(row, v.mv_size - 8); /* as find: held before add_copy's rule */
    rc = row ? s->fn(s->ctx, rn_be64_get(k.mv_data), row, v.mv_size - 8)
             : rn_err_set(&p->err, RN_ENOMEM, "out of memory");
    if (own_scratch) msgpack_zone_clear(&p->scratch);
  }
  mdb_cursor_close(cur);
  return rc;
}

/* The scan (ops.h): the distinct rows in id order, from a snapshot. */
static int distinct_scan_rows(rn_rel *r, rn_scan_fn fn, void *ctx)
{
  distinct_scan s = { r->ctx, fn, ctx };
  return rn_snapshot_read(r->p, r->name, NULL, scan_in, &s);
}

/* ---- rebuild: every copy counted again, ids kept (2) ---- */

/* Sets every row's copies to 0 (rebuild) or removes the rows left at 0 (sweep). */
static int reset_or_sweep(rn_distinct *d, MDB_txn *txn, bool sweep)
{
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn, d->rows_dbi, &cur);
  if (rc) return store_fail(d, rc);
  MDB_val k, v;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (stored_row_damaged(d, &k, &v)) break; /* said: the error below */
    uint64_t copies, id = rn_be64_get(k.mv_data);
    memcpy(&copies, v.mv_data, 8);
    size_t len = v.mv_size - 8;
    char *row = (char *)rn_scratch_copy(d->out->p, (const char *)v.mv_data + 8, len); /* not the page itself */
    if (!row) { rc = rn_err_set(&d->out->p->err, RN_ENOMEM, "out of memory"); break; }
    if (sweep && copies == 0) {
      uint64_t h = rn_row_hash(row, len);
      MDB_val hk = { 8, &h }, hv = { 8, k.mv_data };
      if ((rc = mdb_del(txn, d->hash_dbi, &hk, &hv)) || (rc = mdb_cursor_del(cur, 0))) break;
    } else if (sweep) {
      d->out->count++;
    } else if ((rc = put_row(d, txn, id, 0, row, len))) {
      break;
    }
    msgpack_zone_clear(&d->out->p->scratch);
  }
  mdb_cursor_close(cur);
  if (rc == MDB_NOTFOUND) return 0;
  return d->out->p->err.code ? d->out->p->err.code : store_fail(d, rc);
}

static int rebuild_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  (void)id;
  rn_distinct *d = ctx;
  int rc = add_copy(d, row, len, false);
  msgpack_zone_clear(&d->out->p->scratch);
  return rc;
}

/* Records [1, input name] under "d:" name (reader.h); *changed when the
 * state was built from another input (of the same columns). */
static int record_input(rn_distinct *d, MDB_txn *txn, bool *changed)
{
  const char *in = d->out->input->name;
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &b, rn_buf_write);
  msgpack_pack_array(&pk, 2);
  msgpack_pack_int(&pk, 1);
  msgpack_pack_str(&pk, strlen(in));
  msgpack_pack_str_body(&pk, in, strlen(in));
  int rc = rn_decl_put(d->out->p, txn, d->out->name, &b, changed);
  msgpack_sbuffer_destroy(&b);
  return rc;
}

static int setup_state(void *ctx, bool created, bool rebuild_it)
{
  rn_distinct *d = ctx;
  rn_pipeline *p = d->out->p;
  MDB_txn *txn = p->store.wtxn;
  bool changed = false;
  int rc = rn_state_dbi(p, txn, RN_DB_DISTINCT_ROWS, d->out->name, 0, &d->rows_dbi);
  if (!rc) rc = rn_state_dbi(p, txn, RN_DB_DISTINCT_HASHES, d->out->name, MDB_DUPSORT | MDB_DUPFIXED, &d->hash_dbi);
  if (!rc) rc = record_input(d, txn, &changed);
  if (rc || !(rebuild_it || (changed && !created))) return rc;
  rc = rn_rebuild_before(d->out); /* its rows as its sinks were told (evolve_log.h) */
  if (!rc) rc = reset_or_sweep(d, txn, false);
  if (!rc) rc = rn_rel_scan(d->out->input, rebuild_row, d);
  d->out->count = 0;
  if (!rc) rc = reset_or_sweep(d, txn, true);
  return rc ? rc : rn_rebuild_after(d->out);
}

/* ---- declaration ---- */

/* *out: a keyless copy of in's columns. */
static int output_schema(rn_pipeline *p, const rn_rel *in, rn_schema **out)
{
  *out = rn_schema_new();
  if (!*out) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  int rc = rn_schema_copy_columns(*out, in->schema, false, &p->err);
  if (rc) { rn_schema_free(*out); *out = NULL; }
  return rc;
}

int rn_declare_distinct(rn_pipeline *p, const char *name, rn_rel *in, rn_rel **out)
{
  if (rn_check_not_lookup(p, name, "distinct", in)) return p->err.code;
  if (!in->tablelike)
    return rn_err_set(&p->err, RN_EINVAL,
                      "%s: distinct needs a table-like relation (a table, or a relation derived from one); "
                      "%s is a stream", name, in->name);
  rn_schema *s;
  int rc = output_schema(p, in, &s);
  if (rc) return rc;
  rn_distinct *d = calloc(1, sizeof *d);
  if (!d) {
    rn_schema_free(s);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  rn_rel *r = NULL;
  rc = rn_declare_derived(p, name, RN_REL_DISTINCT, in, s, d, &r);
  if (rc) return rc;
  d->out = r;
  r->persistent = r->stateful = true;
  rc = rn_open_derived_state(p, r, setup_state, d);
  if (rc) {
    in->noutputs--; /* rn_declare_derived made r its last output */
    rn_rel_discard_last(p);
    return rc;
  }
  *out = r;
  return 0;
}

static void free_distinct(void *ctx)
{
  free(ctx);
}

const rn_rel_ops rn_distinct_ops = { .name = "distinct", .apply = distinct_apply, .scan = distinct_scan_rows,
                                     .free = free_distinct };
