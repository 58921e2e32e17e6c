/* reader.c — relations read from outside the pipeline that declares them
 * (reader.h): each kind's rows made from what the state holds (layouts in
 * store.h and the operators' files), ordered as reader.h says. */
#include "reader.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "buf.h"
#include "derive.h"
#include "evolve.h"
#include "join.h"
#include "key.h"
#include "longorder.h"
#include "row.h"
#include "rowsort.h"
#include "verify.h"

#define READ_DEPTH 32     /* a select of a select of …: deeper is a damaged catalogue */

enum { SELECT_FORMAT = 1 };

typedef enum how { READ_TABLE, READ_DISTINCT, READ_AGGREGATE, READ_INDEX, READ_JOIN, READ_TOP, READ_SELECT } how;

struct rn_reader {
  how how;
  int kind;               /* the catalogue's rn_relkind */
  char *name;
  rn_schema *schema;      /* from the catalogue (a top: its input's key added) */
  MDB_dbi meta, dbi;      /* dbi: "t:", "dr:", "ag:", "ix:" or "tt:" name */
  rn_agg_reader *agg;     /* READ_AGGREGATE */
  rn_join_reader *join;   /* READ_JOIN */
  rn_reader *input;       /* READ_SELECT: what it selects from … */
  int *slots, nslots, upto; /* … the input slot of each column, 1 + the largest */
  msgpack_zone zone;      /* decoding rows, per row */
  msgpack_sbuffer made;   /* a row being made (a top's, a select's) */
};

static int no_memory(rn_err *e) { return rn_err_set(e, RN_ENOMEM, "out of memory"); }

void rn_reader_free(rn_reader *r)
{
  if (!r) return;
  rn_agg_reader_free(r->agg);
  rn_join_reader_free(r->join);
  rn_reader_free(r->input);
  rn_schema_free(r->schema);
  free(r->slots);
  free(r->name);
  msgpack_sbuffer_destroy(&r->made);
  rn_zone_destroy(&r->zone);
  free(r);
}

const rn_schema *rn_reader_schema(const rn_reader *r) { return r->schema; }

struct rn_join_reader *rn_reader_join(rn_reader *r) { return r->how == READ_JOIN ? r->join : NULL; }

const char *rn_reader_kind(const rn_reader *r)
{
  return r->how == READ_SELECT ? "select" : rn_relkind_name(r->kind);
}

/* ---- opening ---- */

/* The value of meta key prefix name, decoded into z (*d). */
static int meta_record(MDB_txn *txn, MDB_dbi meta, const char *prefix, const char *name, msgpack_zone *z,
                       msgpack_object *d, rn_err *e)
{
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)snprintf(key, sizeof key, "%s%s", prefix, name), key }, v;
  int rc = mdb_get(txn, meta, &k, &v);
  if (rc == MDB_NOTFOUND) return rn_err_set(e, RN_ENOTFOUND, "no relation \"%s\" there", name);
  if (rc) return rn_err_set(e, rn_store_read_code(rc), "%s: %s", name, rn_store_strerror(rc));
  size_t off = 0;
  msgpack_unpack_return urc = rn_msgpack_size(v.mv_data, v.mv_size) != v.mv_size ? MSGPACK_UNPACK_PARSE_ERROR
                                                                                 : rn_unpack(v.mv_data, v.mv_size, &off, z, d);
  if (urc == MSGPACK_UNPACK_NOMEM_ERROR) return no_memory(e); /* not the record's fault */
  if (urc != MSGPACK_UNPACK_SUCCESS || off != v.mv_size)
    return rn_err_set(e, RN_ESTORE, "a record of \"%s\" is malformed", name);
  return 0;
}

/* Why the state cannot give kind's rows, and what to do. */
static int refuse(const char *name, int kind, rn_err *e)
{
  switch (kind) {
  case RN_REL_FILTER:
    return rn_err_set(e, RN_EINVAL, "\"%s\" is a filter: a Lua function in the script that declares it chooses its "
                      "rows, and the state does not hold them (read its input, or keep its rows with "
                      "rel:sink(runnel.store(\"%s\")) and read that store)", name, name);
  case RN_REL_MAP:
    return rn_err_set(e, RN_EINVAL, "\"%s\" is a map: a Lua function in the script that declares it computes its "
                      "rows, and the state does not hold them (keep them with rel:sink(runnel.store(\"%s\")) and "
                      "read that store; a select{} is read from its input once its pipeline ran with runnel %s)",
                      name, name, RN_VERSION);
  case RN_REL_STREAM:
  case RN_REL_CDC:
    return rn_err_set(e, RN_EINVAL, "\"%s\" is a %s: its events go to its sinks as they come, and the state keeps "
                      "none (keep them with rel:sink(runnel.store(\"%s\")) and read that store)", name,
                      rn_relkind_name(kind), name);
  case RN_REL_LOOKUP:
    return rn_err_set(e, RN_EINVAL, "\"%s\" is a lookup: its rows are fetched from its source when a join asks for "
                      "them, and the state keeps none (read the source)", name);
  default:
    return rn_err_set(e, RN_EINVAL, "\"%s\" is a %s, which this runnel cannot read", name, rn_relkind_name(kind));
  }
}

static int open_db(MDB_txn *txn, const char *prefix, const char *name, MDB_dbi *dbi, rn_err *e)
{
  char key[RN_NAME_MAX + 8];
  snprintf(key, sizeof key, "%s%s", prefix, name);
  int rc = mdb_dbi_open(txn, key, 0, dbi);
  return rc ? rn_err_set(e, rn_store_read_code(rc), "%s: %s", key, rn_store_strerror(rc)) : 0;
}

static int open_reader(MDB_txn *txn, MDB_dbi meta, const char *path, const char *name, int depth, rn_reader **out,
                       rn_err *e);

/* A select: its record, and a reader of its input. */
static int open_select(rn_reader *r, MDB_txn *txn, const char *path, int depth, rn_err *e)
{
  msgpack_object d;
  int rc = meta_record(txn, r->meta, RN_META_AGG_DECL, r->name, &r->zone, &d, e);
  if (rc == RN_ENOTFOUND) return refuse(r->name, RN_REL_MAP, e); /* a Lua map, or a select of an older runnel */
  if (rc) return rc;
  const msgpack_object *f = d.via.array.ptr;
  if (d.type != MSGPACK_OBJECT_ARRAY || d.via.array.size != 3 || f[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
      f[0].via.u64 != SELECT_FORMAT || f[1].type != MSGPACK_OBJECT_STR || f[2].type != MSGPACK_OBJECT_ARRAY ||
      f[2].via.array.size != (uint32_t)r->schema->ncols || f[1].via.str.size > RN_NAME_MAX)
    return rn_err_set(e, RN_ESTORE, "state damaged: select \"%s\": its declaration record is malformed", r->name);
  char input[RN_NAME_MAX + 1];
  snprintf(input, sizeof input, "%.*s", (int)f[1].via.str.size, f[1].via.str.ptr);
  if ((rc = open_reader(txn, r->meta, path, input, depth + 1, &r->input, e))) {
    char prefix[2 * RN_NAME_MAX + 40];
    snprintf(prefix, sizeof prefix, "\"%s\" is a select of \"%s\"", r->name, input);
    rn_err_prefix(e, prefix);
    return rc;
  }
  r->nslots = r->schema->ncols;
  if (!(r->slots = malloc(sizeof *r->slots * (size_t)(r->nslots + 1)))) return no_memory(e);
  for (int i = 0; i < r->nslots; i++) {
    const msgpack_object *s = &f[2].via.array.ptr[i];
    if (s->type != MSGPACK_OBJECT_POSITIVE_INTEGER || s->via.u64 >= (uint64_t)rn_reader_schema(r->input)->ncols)
      return rn_err_set(e, RN_ESTORE, "state damaged: select \"%s\": its declaration record is malformed", r->name);
    r->slots[i] = (int)s->via.u64;
    if (r->slots[i] + 1 > r->upto) r->upto = r->slots[i] + 1;
  }
  return 0;
}

/* The key of a relation whose rows are its input's, each at most once (a
 * top's, an index's): its input's, named by "input" in its declaration
 * ("tp:"), when the input is keyed and its columns are the relation's
 * first ones (extra: the columns the relation adds, a top's rank). Else
 * it stays keyless. */
static int input_key(rn_reader *r, MDB_txn *txn, int extra, rn_err *e)
{
  MDB_dbi decl;
  int rc = open_db(txn, RN_DB_TOP_DECL, r->name, &decl, e);
  if (rc) return rc;
  static char field[] = "input";
  MDB_val k = { 5, field }, v;
  if (mdb_get(txn, decl, &k, &v) != 0 || v.mv_size > RN_NAME_MAX) return 0; /* keyless: rows() reads it */
  char input[RN_NAME_MAX + 1];
  snprintf(input, sizeof input, "%.*s", (int)v.mv_size, (const char *)v.mv_data);
  msgpack_object d;
  rn_err ignored = { .code = RN_OK };
  /* An input that cannot be read leaves it keyless; memory that ran out
   * reading it is an error (a keyless reader refuses rn_get, saying so). */
  if (meta_record(txn, r->meta, RN_META_RELATION, input, &r->zone, &d, &ignored) || !rn_catalogue_entry_valid(&d))
    return ignored.code == RN_ENOMEM ? no_memory(e) : 0;
  rn_schema *in = rn_attach_schema_of(&d.via.array.ptr[1], &ignored);
  if (!in) return ignored.code == RN_ENOMEM ? no_memory(e) : 0;
  bool same = in->nkey > 0 && in->ncols == r->schema->ncols - extra;
  for (int i = 0; same && i < in->ncols; i++) same = strcmp(in->cols[i].name, r->schema->cols[i].name) == 0;
  if (same) rc = rn_schema_set_key(r->schema, in->key_slots, in->nkey, r->name, e);
  rn_schema_free(in);
  return rc;
}

/* A top: its rows ("tt:") and its input's key, which is the top's too. */
static int open_top(rn_reader *r, MDB_txn *txn, rn_err *e)
{
  int rc = open_db(txn, RN_DB_TOP_ROWS, r->name, &r->dbi, e);
  return rc ? rc : input_key(r, txn, 1, e);
}

/* An index: its rows in its order ("ix:") and its input's key. */
static int open_index(rn_reader *r, MDB_txn *txn, rn_err *e)
{
  int rc = open_db(txn, RN_DB_INDEX, r->name, &r->dbi, e);
  return rc ? rc : input_key(r, txn, 0, e);
}

/* The reader of kind's rows, once its schema is read. */
static int open_kind(rn_reader *r, MDB_txn *txn, const char *path, int depth, rn_err *e)
{
  switch (r->kind) {
  case RN_REL_TABLE:
    r->how = READ_TABLE;
    return open_db(txn, RN_DB_ROWS, r->name, &r->dbi, e);
  case RN_REL_DISTINCT:
    r->how = READ_DISTINCT;
    return open_db(txn, RN_DB_DISTINCT_ROWS, r->name, &r->dbi, e);
  case RN_REL_INDEX:
    r->how = READ_INDEX;
    return open_index(r, txn, e);
  case RN_REL_AGGREGATE: {
    r->how = READ_AGGREGATE;
    int rc = open_db(txn, RN_DB_AGG_GROUPS, r->name, &r->dbi, e);
    return rc ? rc : rn_agg_reader_open(txn, r->meta, r->name, r->schema, &r->agg, e);
  }
  case RN_REL_JOIN:
    r->how = READ_JOIN;
    return rn_join_reader_open(txn, r->meta, r->name, r->schema, &r->join, e);
  case RN_REL_TOP:
    r->how = READ_TOP;
    return open_top(r, txn, e);
  case RN_REL_MAP:
    r->how = READ_SELECT;
    return open_select(r, txn, path, depth, e);
  default:
    return refuse(r->name, r->kind, e);
  }
}

static int open_reader(MDB_txn *txn, MDB_dbi meta, const char *path, const char *name, int depth, rn_reader **out,
                       rn_err *e)
{
  *out = NULL;
  if (depth > READ_DEPTH)
    return rn_err_set(e, RN_ESTORE, "state damaged: %s: selects read each other more than %d deep", path, READ_DEPTH);
  rn_reader *r = calloc(1, sizeof *r);
  if (!r || !rn_zone_init(&r->zone, 1024)) {
    free(r);
    return no_memory(e);
  }
  msgpack_sbuffer_init(&r->made);
  r->meta = meta;
  msgpack_object d;
  int rc = (r->name = strdup(name)) ? 0 : no_memory(e);
  if (!rc) rc = meta_record(txn, meta, RN_META_RELATION, name, &r->zone, &d, e);
  if (!rc && !rn_catalogue_entry_valid(&d))
    rc = rn_err_set(e, RN_ESTORE, "state damaged: %s: the catalogue entry of relation \"%s\" is malformed", path,
                    name);
  if (!rc) {
    r->kind = (int)d.via.array.ptr[0].via.u64;
    if (!(r->schema = rn_attach_schema_of(&d.via.array.ptr[1], e))) rc = e->code;
  }
  if (!rc) rc = open_kind(r, txn, path, depth, e);
  msgpack_zone_clear(&r->zone);
  if (rc) {
    rn_reader_free(r);
    return rc;
  }
  *out = r;
  return 0;
}

int rn_reader_open(MDB_txn *txn, MDB_dbi meta, const char *path, const char *name, rn_reader **out, rn_err *e)
{
  return open_reader(txn, meta, path, name, 0, out, e);
}

/* ---- rows, in the order they are stored ---- */

/* A top's stored |u64 rank|row| as the row with its rank as last column. */
static int ranked(rn_reader *r, const MDB_val *v, const char **row, size_t *len, rn_err *e)
{
  int in_ncols = r->schema->ncols - 1;
  size_t starts[1];
  const char *d = (const char *)v->mv_data + 8;
  size_t dlen = v->mv_size - 8;
  uint64_t rank;
  if (v->mv_size < 9 || rn_row_spans(d, dlen, in_ncols, 0, starts) != 0)
    return rn_err_set(e, RN_ESTORE, "state damaged: top \"%s\": a row does not decode", r->name);
  memcpy(&rank, v->mv_data, 8);
  msgpack_sbuffer_clear(&r->made);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &r->made, rn_buf_write);
  msgpack_pack_array(&pk, (size_t)in_ncols + 1);
  rn_buf_write(&r->made, d + starts[0], dlen - starts[0]);
  msgpack_pack_uint64(&pk, rank);
  *row = r->made.data;
  *len = r->made.size;
  return 0;
}

/* Rows of one database, as stored: a table's, a distinct's, an index's, an
 * aggregate's (computed from its groups), a top's (ranked). */
static int walk_db(rn_reader *r, MDB_txn *txn, rn_attach_each_fn fn, void *ctx, rn_err *e)
{
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn, r->dbi, &cur);
  if (rc) return rn_err_set(e, rn_store_read_code(rc), "%s: %s", r->name, rn_store_strerror(rc));
  MDB_val k, v;
  int mrc, frc = 0;
  int table = r->how == READ_DISTINCT ? RN_ATTACH_DISTINCT : r->schema->nkey ? RN_ATTACH_KEYED : RN_ATTACH_KEYLESS;
  msgpack_sbuffer form; /* a row as read (rn_attach_row_form) */
  msgpack_sbuffer_init(&form);
  for (mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); mrc == 0 && !frc; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    uint64_t id = 0;
    const char *row = v.mv_data;
    size_t len = v.mv_size;
    if (r->how == READ_AGGREGATE) {
      frc = rn_agg_reader_row(r->agg, txn, &k, &v, fn, ctx, e);
      continue;
    }
    if (r->how == READ_INDEX || r->how == READ_TOP) {
      if (k.mv_size < 8) continue;
      size_t skip = r->how == READ_TOP ? 8 : 0, rlen;
      if (rn_longorder_entry(&k, &v, skip, &id, &rlen)) len = v.mv_size = skip + rlen; /* its id after its row */
      else id = rn_be64_get((const char *)k.mv_data + k.mv_size - 8);
      if (r->how == READ_TOP && (frc = ranked(r, &v, &row, &len, e))) break;
    } else {
      int entry = rn_attach_table_row(table, &k, &v, &id);
      if (entry == RN_ENTRY_DAMAGED) {
        frc = rn_attach_damaged(rn_relkind_name(r->kind), r->name, e);
        break;
      }
      if (entry == RN_ENTRY_GONE) continue; /* a tombstone */
      if (rn_attach_row_form(table, &v, &form)) {
        frc = rn_err_set(e, RN_ENOMEM, "out of memory");
        break;
      }
      row = v.mv_data;
      len = v.mv_size;
    }
    frc = fn(ctx, id, row, len);
  }
  msgpack_sbuffer_destroy(&form);
  mdb_cursor_close(cur);
  if (frc) return frc;
  return mrc == MDB_NOTFOUND ? 0 : rn_err_set(e, rn_store_read_code(mrc), "%s: %s", r->name, rn_store_strerror(mrc));
}

typedef struct projecting {
  rn_reader *r;
  rn_attach_each_fn fn;
  void *ctx;
  rn_err *e;
} projecting;

/* A row of a select's input as the select's row. */
static int project(void *ctx, uint64_t id, const char *row, size_t len)
{
  projecting *pj = ctx;
  rn_reader *r = pj->r;
  size_t starts[r->upto + 1];
  if (rn_row_spans(row, len, rn_reader_schema(r->input)->ncols, r->upto, starts) != 0)
    return rn_err_set(pj->e, RN_ESTORE, "%s: a row of \"%s\" does not decode", r->name, r->input->name);
  msgpack_sbuffer_clear(&r->made);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &r->made, rn_buf_write);
  msgpack_pack_array(&pk, (size_t)r->nslots);
  for (int i = 0; i < r->nslots; i++)
    rn_buf_write(&r->made, row + starts[r->slots[i]], starts[r->slots[i] + 1] - starts[r->slots[i]]);
  return pj->fn(pj->ctx, id, r->made.data, r->made.size);
}

/* Rows in the order the state gives them: a join's unordered. */
static int rows_as_made(rn_reader *r, MDB_txn *txn, rn_attach_each_fn fn, void *ctx, rn_err *e)
{
  switch (r->how) {
  case READ_JOIN:
    return rn_join_reader_each(r->join, txn, r->meta, fn, ctx, e);
  case READ_SELECT: {
    projecting pj = { r, fn, ctx, e };
    return rn_reader_each(r->input, txn, project, &pj, e);
  }
  default:
    return walk_db(r, txn, fn, ctx, e);
  }
}

/* The key of row under r's schema, appended to b. */
static int key_of(rn_reader *r, const char *row, size_t len, msgpack_sbuffer *b, rn_err *e)
{
  const msgpack_object *vals = rn_row_unpack(row, len, r->schema->ncols, &r->zone);
  int rc = vals && rn_key_encode(r->schema, vals, b) == 0 ? 0
         : rn_oom() ? rn_err_set(e, RN_ENOMEM, "out of memory") /* its zone or buffer, not the row */
                    : rn_err_set(e, RN_ESTORE, "%s: a row does not decode to a key", r->name);
  msgpack_zone_clear(&r->zone);
  return rc;
}

/* Every row of r, made, then handed to fn in key order (id order when r
 * has no key: rowsort.h). */
static int sorted(rn_reader *r, MDB_txn *txn, rn_attach_each_fn fn, void *ctx, rn_err *e)
{
  rn_rowsort s;
  int rc = rn_rowsort_init(&s, r->schema, r->name, e);
  if (!rc) rc = rows_as_made(r, txn, rn_rowsort_add, &s, e);
  if (!rc) rc = rn_rowsort_each(&s, fn, ctx);
  rn_rowsort_free(&s);
  return rc;
}

/* Whether rows come from the state in r's order already. */
static bool stored_in_order(const rn_reader *r)
{
  return r->how != READ_JOIN && r->how != READ_SELECT;
}

int rn_reader_each(rn_reader *r, MDB_txn *txn, rn_attach_each_fn fn, void *ctx, rn_err *e)
{
  if (stored_in_order(r) || (r->how == READ_SELECT && !r->schema->nkey)) return rows_as_made(r, txn, fn, ctx, e);
  return sorted(r, txn, fn, ctx, e);
}

typedef struct matching {
  rn_reader *r;
  const char *key;
  size_t klen;
  rn_attach_each_fn fn;
  void *ctx;
  rn_err *e;
  msgpack_sbuffer k;
} matching;

enum { FOUND = 1 };        /* match's stop: a key is on one row at most */

static int match(void *ctx, uint64_t id, const char *row, size_t len)
{
  matching *m = ctx;
  msgpack_sbuffer_clear(&m->k);
  int rc = key_of(m->r, row, len, &m->k, m->e);
  if (rc || m->k.size != m->klen || memcmp(m->k.data, m->key, m->klen) != 0) return rc;
  rc = m->fn(m->ctx, id, row, len);
  return rc ? rc : FOUND;
}

/* An aggregate's group is stored under its key ("ag:", the by columns then
 * a window's start, encoded as the key is; hashed when long): one seek. */
static int seek_group(rn_reader *r, MDB_txn *txn, matching *m)
{
  MDB_val k, v;
  int rc = rn_agg_reader_seek(r->agg, txn, r->dbi, m->key, m->klen, &k, &v, m->e);
  if (rc == MDB_NOTFOUND) return 0;
  if (rc) return m->e->code ? m->e->code : rn_err_set(m->e, RN_ESTORE, "%s: a group could not be read", r->name);
  return rn_agg_reader_row(r->agg, txn, &k, &v, match, m, m->e);
}

int rn_reader_get(rn_reader *r, MDB_txn *txn, const char *key, size_t klen, rn_attach_each_fn fn, void *ctx,
                  rn_err *e)
{
  if (!r->schema->nkey)
    return rn_err_set(e, RN_EINVAL, "attach %s: get: a keyless %s has no key to read by (rows() reads it)", r->name,
                      rn_reader_kind(r));
  matching m = { r, key, klen, fn, ctx, e, { 0 } };
  msgpack_sbuffer_init(&m.k);
  int rc = r->how == READ_AGGREGATE ? seek_group(r, txn, &m) : rows_as_made(r, txn, match, &m, e);
  msgpack_sbuffer_destroy(&m.k);
  return rc == FOUND ? 0 : rc;
}

/* ---- the select's record ---- */

/* The slots select r's record was (its old columns, rn_select_told), when
 * it is over the same input; a record that does not read so keeps none. */
static int told_slots(rn_rel *r, const MDB_val *was)
{
  msgpack_zone z;
  if (!rn_zone_init(&z, 1024)) return rn_err_set(&r->p->err, RN_ENOMEM, "out of memory");
  msgpack_object d;
  size_t off = 0;
  int rc = 0;
  if (rn_msgpack_size(was->mv_data, was->mv_size) == was->mv_size &&
      rn_unpack(was->mv_data, was->mv_size, &off, &z, &d) == MSGPACK_UNPACK_SUCCESS && d.type == MSGPACK_OBJECT_ARRAY &&
      d.via.array.size == 3 && d.via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
      d.via.array.ptr[0].via.u64 == SELECT_FORMAT && d.via.array.ptr[1].type == MSGPACK_OBJECT_STR &&
      d.via.array.ptr[1].via.str.size == strlen(r->input->name) &&
      memcmp(d.via.array.ptr[1].via.str.ptr, r->input->name, d.via.array.ptr[1].via.str.size) == 0 &&
      d.via.array.ptr[2].type == MSGPACK_OBJECT_ARRAY && d.via.array.ptr[2].via.array.size > 0 &&
      d.via.array.ptr[2].via.array.size <= 1024) {
    const msgpack_object_array *a = &d.via.array.ptr[2].via.array;
    int n = (int)a->size, slots[n];
    bool ok = true;
    for (int i = 0; i < n; i++) {
      ok &= a->ptr[i].type == MSGPACK_OBJECT_POSITIVE_INTEGER && a->ptr[i].via.u64 < 65536;
      slots[i] = ok ? (int)a->ptr[i].via.u64 : 0;
    }
    if (ok) rc = rn_select_told(r, slots, n);
  }
  rn_zone_destroy(&z);
  return rc;
}

int rn_select_decl_record(rn_rel *r, MDB_txn *txn)
{
  rn_pipeline *p = r->p;
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)rn_decl_key(key, sizeof key, r->name), key };
  int n = 0;
  const int *slots = r->kind == RN_REL_MAP ? rn_select_slots(r, &n) : NULL;
  if (!slots) {
    int rc = mdb_del(txn, p->store.meta, &k, NULL);
    return rc && rc != MDB_NOTFOUND ? rn_store_fail(&p->err, rc, r->name) : 0;
  }
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &b, rn_buf_write);
  msgpack_pack_array(&pk, 3);
  msgpack_pack_int(&pk, SELECT_FORMAT);
  msgpack_pack_str(&pk, strlen(r->input->name));
  msgpack_pack_str_body(&pk, r->input->name, strlen(r->input->name));
  msgpack_pack_array(&pk, (size_t)n);
  for (int i = 0; i < n; i++) msgpack_pack_int(&pk, slots[i]);
  MDB_val v = { b.size, b.data }, was;
  int rc = b.data ? mdb_get(txn, p->store.meta, &k, &was) : ENOMEM;
  bool changed = rc == 0 && (was.mv_size != v.mv_size || memcmp(was.mv_data, v.mv_data, v.mv_size) != 0);
  if (changed && (rc = told_slots(r, &was))) {
    msgpack_sbuffer_destroy(&b);
    return rc;
  }
  if (rc == MDB_NOTFOUND) rc = 0;
  if (!rc) rc = mdb_put(txn, p->store.meta, &k, &v, 0);
  msgpack_sbuffer_destroy(&b);
  if (rc) return rn_store_fail(&p->err, rc, r->name);
  return changed ? rn_evolve_select_changed(p, r, txn) : 0;
}

int rn_decl_key(char *key, size_t size, const char *name)
{
  return snprintf(key, size, "%s%s", RN_META_AGG_DECL, name);
}

/* A record starts with its array header and format number: of another
 * format, it says nothing about whether the declaration changed. */
static bool same_format(const MDB_val *stored, const msgpack_sbuffer *now)
{
  return stored->mv_size >= 2 && now->size >= 2 && memcmp(stored->mv_data, now->data, 2) == 0;
}

int rn_decl_put(rn_pipeline *p, MDB_txn *txn, const char *name, const msgpack_sbuffer *record, bool *changed)
{
  if (changed) *changed = false;
  if (!record->data) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)rn_decl_key(key, sizeof key, name), key }, v;
  int rc = changed ? mdb_get(txn, p->store.meta, &k, &v) : MDB_NOTFOUND;
  if (rc == 0)
    *changed = same_format(&v, record) && (v.mv_size != record->size || memcmp(v.mv_data, record->data, v.mv_size) != 0);
  v = (MDB_val){ record->size, record->data };
  if (rc == 0 || rc == MDB_NOTFOUND) rc = mdb_put(txn, p->store.meta, &k, &v, 0);
  return rc ? rn_store_fail(&p->err, rc, name) : 0;
}

int rn_decl_malformed(rn_err *e)
{
  return rn_err_set(e, RN_ESTORE, "its declaration record is malformed");
}

int rn_decl_failed(rn_err *e, const char *what, const char *name)
{
  char prefix[RN_NAME_MAX + 40];
  snprintf(prefix, sizeof prefix, "%s%s \"%s\"", e->code == RN_ESTORE ? "state damaged: " : "", what, name);
  rn_err_prefix(e, prefix);
  return e->code;
}

int rn_decl_record_read(MDB_txn *txn, MDB_dbi meta, const char *what, const char *name, msgpack_zone *z,
                        msgpack_sbuffer *raw, msgpack_object *d, rn_err *e)
{
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)rn_decl_key(key, sizeof key, name), key }, v;
  int rc = mdb_get(txn, meta, &k, &v);
  if (rc == MDB_NOTFOUND)
    return rn_err_set(e, RN_EINVAL, "%s \"%s\" was last declared by an older runnel: run its pipeline once with "
                      "this one, then read it", what, name);
  if (rc) return rn_err_set(e, rn_store_read_code(rc), "%s \"%s\": %s", what, name, rn_store_strerror(rc));
  size_t off = 0;
  if (rn_msgpack_size(v.mv_data, v.mv_size) != v.mv_size ||
      rn_unpack(v.mv_data, v.mv_size, &off, z, d) != MSGPACK_UNPACK_SUCCESS) {
    rn_decl_malformed(e);
    return rn_decl_failed(e, what, name);
  }
  if (raw) rn_buf_write(raw, v.mv_data, v.mv_size);
  return 0;
}
