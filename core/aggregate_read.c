/* aggregate_read.c — an aggregate's rows read from outside the pipeline
 * that declares it (runnel.attach, runnel query): computed from its groups
 * ("ag:", "am:") as aggregate.c's scan computes them, in the reader's read
 * transaction, with what its catalogue entry lacks kept under "d:" name
 * (store.h):
 *
 *     [1, [input column types], [by slots], [[kind, slot]…], window kind,
 *      window size, time int, identity]
 *
 * where identity, for the declaring pipeline only, is the msgpack bytes of
 *
 *     [input name, [by names], [[kind, column name | nil]…], window kind,
 *      size, step, time column name | nil]
 *
 * by names, not slots: a column added to the input moves slots, not what
 * the state counts. When it changed, the state is rebuilt (or, over a
 * stream, the declaration refused). A record without it is read the same.
 * (a slot of -1: none). The reader rebuilds an aggregate over a stand-in
 * input of those types and a stand-in pipeline for its scratch and errors.
 * A runnel.agg aggregate (computed by Lua functions) cannot be read. */
#include "aggregate_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "buf.h"
#include "evolve_log.h"
#include "reader.h"

enum { DECL_FORMAT = 1 };

static void pack_name(msgpack_packer *pk, const rn_schema *s, int slot)
{
  if (slot < 0) { msgpack_pack_nil(pk); return; }
  msgpack_pack_str(pk, s->cols[slot].name_len);
  msgpack_pack_str_body(pk, s->cols[slot].name, s->cols[slot].name_len);
}

/* What the state was built from (the identity drawn above) into b. */
static void pack_identity(const rn_aggregate *a, msgpack_sbuffer *b)
{
  const rn_schema *in = a->in->schema;
  msgpack_packer pk;
  msgpack_packer_init(&pk, b, rn_buf_write);
  msgpack_pack_array(&pk, 7);
  msgpack_pack_str(&pk, strlen(a->in->name));
  msgpack_pack_str_body(&pk, a->in->name, strlen(a->in->name));
  msgpack_pack_array(&pk, (size_t)a->nby);
  for (int i = 0; i < a->nby; i++) pack_name(&pk, in, a->by[i]);
  msgpack_pack_array(&pk, (size_t)a->naggs);
  for (int i = 0; i < a->naggs; i++) {
    msgpack_pack_array(&pk, 2);
    msgpack_pack_int(&pk, a->aggs[i].kind);
    pack_name(&pk, in, a->aggs[i].slot);
  }
  msgpack_pack_int(&pk, a->w.kind);
  msgpack_pack_double(&pk, a->w.size);
  msgpack_pack_double(&pk, a->w.step);
  pack_name(&pk, in, a->w.kind ? a->w.slot : -1);
}

/* Whether the state holds a record for a other than rec (its input's
 * columns moved, were added or dropped: its values are kept under the old
 * positions of the columns it reads). */
static bool record_differs(rn_aggregate *a, MDB_txn *txn, const msgpack_sbuffer *rec)
{
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)rn_decl_key(key, sizeof key, a->out->name), key }, v;
  if (mdb_get(txn, a->out->p->store.meta, &k, &v) != 0) return false;
  return v.mv_size != rec->size || memcmp(v.mv_data, rec->data, rec->size) != 0;
}

/* Whether the record stored for a holds an identity other than id (one
 * without an identity, or unreadable, says nothing: false). */
static bool identity_changed(rn_aggregate *a, MDB_txn *txn, const msgpack_sbuffer *id)
{
  rn_pipeline *p = a->out->p;
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)rn_decl_key(key, sizeof key, a->out->name), key }, v;
  msgpack_object d;
  size_t off = 0;
  if (mdb_get(txn, p->store.meta, &k, &v) != 0 || rn_msgpack_size(v.mv_data, v.mv_size) != v.mv_size ||
      rn_unpack(v.mv_data, v.mv_size, &off, &p->scratch, &d) != MSGPACK_UNPACK_SUCCESS ||
      d.type != MSGPACK_OBJECT_ARRAY || d.via.array.size != 8 || d.via.array.ptr[7].type != MSGPACK_OBJECT_BIN)
    return false;
  const msgpack_object_bin *old = &d.via.array.ptr[7].via.bin;
  return old->size != id->size || memcmp(old->ptr, id->data, id->size) != 0;
}


int rn_agg_decl_record(rn_aggregate *a, MDB_txn *txn, bool capture, bool *changed)
{
  rn_pipeline *p = a->out->p;
  const rn_schema *in = a->in->schema;
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &b, rn_buf_write);
  msgpack_pack_array(&pk, 8);
  msgpack_pack_int(&pk, DECL_FORMAT);
  msgpack_pack_array(&pk, (size_t)in->ncols);
  for (int i = 0; i < in->ncols; i++) msgpack_pack_int(&pk, in->cols[i].type == RN_T_STRUCT ? RN_T_ANY : in->cols[i].type);
  msgpack_pack_array(&pk, (size_t)a->nby);
  for (int i = 0; i < a->nby; i++) msgpack_pack_int(&pk, a->by[i]);
  msgpack_pack_array(&pk, (size_t)a->naggs);
  for (int i = 0; i < a->naggs; i++) {
    msgpack_pack_array(&pk, 2);
    msgpack_pack_int(&pk, a->aggs[i].kind);
    msgpack_pack_int(&pk, a->aggs[i].slot);
  }
  msgpack_pack_int(&pk, a->w.kind);
  msgpack_pack_double(&pk, a->w.size);
  if (a->time_int) msgpack_pack_true(&pk);
  else msgpack_pack_false(&pk);
  msgpack_sbuffer id;
  msgpack_sbuffer_init(&id);
  pack_identity(a, &id);
  msgpack_pack_bin(&pk, id.size);
  msgpack_pack_bin_body(&pk, id.data, id.size);
  *changed = identity_changed(a, txn, &id);
  /* before the record is replaced: what the old one made is what the sinks were told (its rows read with the
   * new one would be the new rows, and the rebuild would tell nothing); so too when only the input's columns
   * moved: min and max keep their values under the old positions, read at the new ones they are not found
   * (and the rebuild would tell every minimum as new) */
  bool moved = !*changed && capture && a->in->tablelike && record_differs(a, txn, &b);
  int rc = (*changed || moved) && capture && !a->out->rebuild_captured ? rn_rebuild_capture(a->out) : 0;
  if (!rc) rc = rn_decl_put(p, txn, a->out->name, &b, NULL);
  msgpack_sbuffer_destroy(&id);
  msgpack_sbuffer_destroy(&b);
  return rc;
}

struct rn_agg_reader {
  rn_pipeline p;     /* a stand-in: its scratch zone and err only */
  rn_rel out, in;
  rn_aggregate a;
};

void rn_agg_reader_free(rn_agg_reader *r)
{
  if (!r) return;
  rn_schema_free(r->in.schema);
  free(r->a.by);
  free(r->a.aggs);
  free(r->a.fseen);
  rn_zone_destroy(&r->p.scratch);
  free(r);
}

static bool is_int(const msgpack_object *o)
{
  return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER;
}


/* The stand-in input: one column per type in t. */
static int stand_in(rn_agg_reader *r, const msgpack_object *t, rn_err *e)
{
  if (!(r->in.schema = rn_schema_new())) return rn_err_set(e, RN_ENOMEM, "out of memory");
  for (uint32_t i = 0; i < t->via.array.size; i++) {
    char name[16];
    int n = snprintf(name, sizeof name, "c%u", i);
    const msgpack_object *ty = &t->via.array.ptr[i];
    if (!is_int(ty) || ty->via.u64 > RN_T_ANY) return rn_decl_malformed(e);
    if (rn_schema_add(r->in.schema, name, (size_t)n, (rn_type)ty->via.u64, true, NULL, e) < 0) return e->code;
  }
  return 0;
}

/* A slot of the stand-in input into *slot (-1 allowed when none is). */
static bool slot_of(const rn_agg_reader *r, const msgpack_object *o, bool none, int *slot)
{
  if (none && o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 == -1) return *slot = -1, true;
  if (!is_int(o) || o->via.u64 >= (uint64_t)r->in.schema->ncols) return false;
  *slot = (int)o->via.u64;
  return true;
}

/* The decl d (its shape checked here) into r's aggregate. */
static int read_decl(rn_agg_reader *r, const msgpack_object *d, rn_err *e)
{
  const msgpack_object *f = d->via.array.ptr;
  if (d->type != MSGPACK_OBJECT_ARRAY || (d->via.array.size != 7 && d->via.array.size != 8) || !is_int(&f[0]) || f[0].via.u64 != DECL_FORMAT ||
      f[1].type != MSGPACK_OBJECT_ARRAY || f[2].type != MSGPACK_OBJECT_ARRAY || f[3].type != MSGPACK_OBJECT_ARRAY ||
      !is_int(&f[4]) || f[4].via.u64 > RN_WINDOW_HOPPING || f[5].type != MSGPACK_OBJECT_FLOAT64 ||
      f[6].type != MSGPACK_OBJECT_BOOLEAN)
    return rn_decl_malformed(e);
  rn_aggregate *a = &r->a;
  a->nby = (int)f[2].via.array.size;
  a->naggs = (int)f[3].via.array.size;
  a->w.kind = (rn_window_kind)f[4].via.u64;
  a->w.size = f[5].via.f64;
  a->time_int = f[6].via.boolean;
  a->by = malloc(sizeof *a->by * (size_t)(a->nby + 1));
  a->aggs = calloc((size_t)a->naggs + 1, sizeof *a->aggs);
  a->fseen = calloc((size_t)a->naggs + 1, sizeof *a->fseen);
  if (!a->by || !a->aggs || !a->fseen) return rn_err_set(e, RN_ENOMEM, "out of memory");
  int rc = stand_in(r, &f[1], e);
  for (int i = 0; i < a->nby && !rc; i++)
    if (!slot_of(r, &f[2].via.array.ptr[i], false, &a->by[i])) rc = rn_decl_malformed(e);
  int first = a->nby + (a->w.kind != RN_WINDOW_NONE) * 2; /* the first aggregate's column */
  if (!rc && r->out.schema->ncols != first + a->naggs) rc = rn_decl_malformed(e);
  for (int i = 0; i < a->naggs && !rc; i++) {
    const msgpack_object *g = &f[3].via.array.ptr[i];
    if (g->type != MSGPACK_OBJECT_ARRAY || g->via.array.size != 2 || !is_int(&g->via.array.ptr[0]) ||
        g->via.array.ptr[0].via.u64 > RN_AGG_USER || !slot_of(r, &g->via.array.ptr[1], true, &a->aggs[i].slot))
      return rn_decl_malformed(e);
    a->aggs[i].kind = (rn_agg_kind)g->via.array.ptr[0].via.u64;
    a->aggs[i].name = r->out.schema->cols[first + i].name;
    if (a->aggs[i].kind == RN_AGG_USER)
      return rn_err_set(e, RN_EINVAL, "column \"%s\" is a runnel.agg: its values are computed by Lua functions in "
                        "the pipeline that declares it (keep them with rel:sink(runnel.store(name)) and read that "
                        "store)", a->aggs[i].name);
  }
  return rc;
}

int rn_agg_reader_open(MDB_txn *txn, MDB_dbi meta, const char *name, const rn_schema *out, rn_agg_reader **reader,
                       rn_err *e)
{
  *reader = NULL;
  rn_agg_reader *r = calloc(1, sizeof *r);
  if (!r || !rn_zone_init(&r->p.scratch, 1024)) {
    free(r);
    return rn_err_set(e, RN_ENOMEM, "out of memory");
  }
  r->out.name = (char *)name;
  r->out.schema = (rn_schema *)out;
  r->out.p = r->in.p = &r->p;
  r->a.out = &r->out;
  r->a.in = &r->in;
  msgpack_object d;
  int rc = rn_decl_record_read(txn, meta, "aggregate", name, &r->p.scratch, NULL, &d, e);
  if (!rc && (rc = read_decl(r, &d, e))) rc = rn_decl_failed(e, "aggregate", name);
  char key[RN_NAME_MAX + 8];
  if (!rc) { /* opened in txn, which the caller commits to keep the handle */
    snprintf(key, sizeof key, "%s%s", RN_DB_AGG_VALUES, name);
    if ((rc = mdb_dbi_open(txn, key, 0, &r->a.values_dbi)))
      rc = rn_err_set(e, rn_store_read_code(rc), "aggregate \"%s\": %s", name, rn_store_strerror(rc));
  }
  if (rc) {
    rn_agg_reader_free(r);
    return e->code;
  }
  msgpack_zone_clear(&r->p.scratch);
  *reader = r;
  return 0;
}

int rn_agg_reader_row(rn_agg_reader *r, MDB_txn *txn, const MDB_val *k, const MDB_val *d,
                      int (*fn)(void *ctx, uint64_t id, const char *row, size_t len), void *ctx, rn_err *e)
{
  rn_aggregate *a = &r->a;
  group_entry en;
  if (reserved(k) || !rn_agg_entry_parse(k, d, &en)) return 0;
  uint64_t rid = en.rid, rows = en.rows;
  if (rows == 0) return 0; /* a tombstone */
  if (en.final) /* a final window's row, as stored */
    return fn(ctx, rid, en.rest + 1, en.rest_len - 1);
  int rc;
  a->reading = txn;
  gkey g = { (char *)rn_scratch_copy(&r->p, en.key, en.klen), en.klen,
             (char *)rn_scratch_copy(&r->p, k->mv_data, k->mv_size), k->mv_size };
  msgpack_object *st = NULL;
  const char *row;
  size_t len;
  msgpack_object ext[a->naggs ? a->naggs : 1];
  for (int i = 0; i < a->naggs; i++) ext[i] = UNKNOWN;
  rn_err_clear(&r->p.err);
  rc = g.k && g.sk ? rn_agg_decode_state(a, &en, &st) : nomem(a);
  if (!rc) rc = rn_agg_result_row(a, &g, rows, st, ext, &row, &len);
  if (!rc) rc = fn(ctx, rid, row, len);
  else *e = r->p.err;
  msgpack_zone_clear(&r->p.scratch);
  return rc;
}

int rn_agg_reader_seek(rn_agg_reader *r, MDB_txn *txn, MDB_dbi groups, const char *key, size_t klen, MDB_val *k,
                       MDB_val *d, rn_err *e)
{
  gkey g = { (char *)key, klen, NULL, 0 };
  bool found;
  rn_err_clear(&r->p.err);
  int rc = rn_agg_group_find(&r->a, txn, groups, 0, &g, d, &found); /* 0: a group of any length may be hashed */
  if (!rc && found) {
    k->mv_data = g.sk;
    k->mv_size = g.slen; /* g.sk: key, or in scratch until the reader's next row */
  }
  if (rc) *e = r->p.err;
  return rc ? rc : found ? 0 : MDB_NOTFOUND;
}
