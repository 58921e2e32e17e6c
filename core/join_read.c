/* join_read.c — a join's rows read from outside the pipeline that declares
 * it (runnel.attach, runnel query): made by the join's own scan
 * (join_scan.c) from the state it holds, in the reader's read transaction,
 * over a stand-in join rebuilt from what its catalogue entry lacks, kept
 * under "d:" name (store.h) by every declaration:
 *
 *     [1, kind, stream, right side, key join, [on slots] | nil,
 *      [projection slots] | nil, Lua joiner, left name, left schema,
 *      right name, right schema]
 *
 * right side: 0 a keyed source table (its rows in "t:" right), 1 a copy
 * ("jc:" name), 2 a lookup (every result is kept in "ji:"). Schemas are
 * the bytes of schema descriptions (schema.c), as the catalogue keeps
 * them: a right table whose schema changed since is seen by a byte
 * comparison (the join is rebuilt when declared). Without on slots (a mapper) the right
 * key is the one the index entry is filed under; a joiner's results are
 * kept in the entries, so neither Lua function is needed. */
#include "join_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "reader.h"
#include "store_sink.h"

enum { DECL_FORMAT = 1, RIGHT_TABLE = 0, RIGHT_COPY = 1, RIGHT_LOOKUP = 2, DECL_FIELDS = 12 };


static void pack_bool(msgpack_packer *pk, bool b)
{
  if (b) msgpack_pack_true(pk);
  else msgpack_pack_false(pk);
}

static void pack_slots(msgpack_packer *pk, const int *slots, int n)
{
  if (!slots) {
    msgpack_pack_nil(pk);
    return;
  }
  msgpack_pack_array(pk, (size_t)n);
  for (int i = 0; i < n; i++) msgpack_pack_int(pk, slots[i]);
}

static void pack_side(msgpack_packer *pk, const rn_rel *r)
{
  msgpack_pack_str(pk, strlen(r->name));
  msgpack_pack_str_body(pk, r->name, strlen(r->name));
  msgpack_sbuffer d;
  msgpack_sbuffer_init(&d);
  msgpack_packer dp;
  msgpack_packer_init(&dp, &d, rn_buf_write);
  rn_schema_describe(r->schema, &dp);
  msgpack_pack_bin(pk, d.size);
  msgpack_pack_bin_body(pk, d.data, d.size);
  msgpack_sbuffer_destroy(&d);
}

int rn_join_decl_record(rn_rel *join, MDB_txn *txn, bool *changed)
{
  rn_join *j = join->ctx;
  rn_pipeline *p = join->p;
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &b, rn_buf_write);
  msgpack_pack_array(&pk, DECL_FIELDS);
  msgpack_pack_int(&pk, DECL_FORMAT);
  msgpack_pack_int(&pk, j->kind);
  pack_bool(&pk, j->stream);
  msgpack_pack_int(&pk, j->right_native ? RIGHT_TABLE : j->lookup ? RIGHT_LOOKUP : RIGHT_COPY);
  pack_bool(&pk, j->key_join);
  pack_slots(&pk, j->non ? j->on : NULL, j->non);
  pack_slots(&pk, j->proj ? j->proj->slots : NULL, j->proj ? j->proj->n : 0);
  pack_bool(&pk, j->fns.joiner != NULL);
  pack_side(&pk, j->left);
  pack_side(&pk, j->right);
  int rc = rn_decl_put(p, txn, join->name, &b, changed);
  msgpack_sbuffer_destroy(&b);
  return rc;
}

/* ---- the reader ---- */

struct rn_join_reader {
  rn_pipeline p;          /* a stand-in: its scratch zone and err only */
  rn_rel out, left, right;
  rn_join j;
  int right_side;         /* RIGHT_TABLE, _COPY or _LOOKUP */
  msgpack_sbuffer decl;   /* the record as read at open */
  msgpack_sbuffer right_desc; /* the right schema's description, as the catalogue keeps it */
};

void rn_join_reader_free(rn_join_reader *r)
{
  if (!r) return;
  rn_join_longfks_free(&r->j);
  free(r->j.right_from);
  free(r->j.on);
  free(r->j.proj);
  msgpack_sbuffer_destroy(&r->j.keybuf);
  msgpack_sbuffer_destroy(&r->j.resultbuf);
  msgpack_sbuffer_destroy(&r->decl);
  msgpack_sbuffer_destroy(&r->right_desc);
  rn_schema_free(r->left.schema);
  rn_schema_free(r->right.schema);
  free(r->left.name);
  free(r->right.name);
  rn_zone_destroy(&r->p.scratch);
  free(r);
}

static bool is_uint(const msgpack_object *o) { return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER; }
static bool is_bool(const msgpack_object *o) { return o->type == MSGPACK_OBJECT_BOOLEAN; }


/* A list of slots below limit (nil: *slots NULL) into a new array. */
static bool read_slots(const msgpack_object *o, int limit, int **slots, int *n)
{
  *slots = NULL;
  *n = 0;
  if (o->type == MSGPACK_OBJECT_NIL) return true;
  if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size == 0) return false;
  *slots = malloc(sizeof **slots * o->via.array.size);
  if (!*slots) return false;
  for (uint32_t i = 0; i < o->via.array.size; i++) {
    const msgpack_object *s = &o->via.array.ptr[i];
    if (!is_uint(s) || s->via.u64 >= (uint64_t)limit) return false;
    (*slots)[i] = (int)s->via.u64;
  }
  *n = (int)o->via.array.size;
  return true;
}

/* One side: its name and schema, from the record's pair of fields. */
static int read_side(rn_join_reader *r, rn_rel *input, const msgpack_object *f, rn_err *e)
{
  msgpack_object d;
  size_t off = 0;
  if (f[0].type != MSGPACK_OBJECT_STR || f[1].type != MSGPACK_OBJECT_BIN ||
      rn_msgpack_size(f[1].via.bin.ptr, f[1].via.bin.size) != f[1].via.bin.size ||
      rn_unpack(f[1].via.bin.ptr, f[1].via.bin.size, &off, &r->p.scratch, &d) != MSGPACK_UNPACK_SUCCESS ||
      !rn_schema_desc_valid(&d, 0))
    return rn_decl_malformed(e);
  input->p = &r->p;
  input->name = strndup(f[0].via.str.ptr, f[0].via.str.size);
  if (!input->name) return rn_err_set(e, RN_ENOMEM, "out of memory");
  input->schema = rn_attach_schema_of(&d, e);
  return input->schema ? 0 : e->code;
}

/* A result a Lua joiner computes, asked of an entry written before entries
 * kept their results (join.h): the state cannot make it. */
static int joiner_gone(void *ctx, rn_rel *join, const char *lrow, size_t llen, const char *rrow, size_t rlen,
                       msgpack_sbuffer *result, int *has_row, rn_err *e)
{
  (void)ctx, (void)lrow, (void)llen, (void)rrow, (void)rlen, (void)result, (void)has_row;
  return rn_err_set(e, RN_EINVAL, "%s: a row written by an older runnel does not hold its result, which the joiner "
                    "(a Lua function in the script) computes: drop the join and declare it again, then read it",
                    join->name);
}

/* The record d (its shape checked here) into r's stand-in join. */
static int read_decl(rn_join_reader *r, const msgpack_object *d, rn_err *e)
{
  const msgpack_object *f = d->via.array.ptr;
  if (d->type != MSGPACK_OBJECT_ARRAY || d->via.array.size != DECL_FIELDS || !is_uint(&f[0]) ||
      f[0].via.u64 != DECL_FORMAT || !is_uint(&f[1]) || f[1].via.u64 > RN_JOIN_OUTER || !is_bool(&f[2]) ||
      !is_uint(&f[3]) || f[3].via.u64 > RIGHT_LOOKUP || !is_bool(&f[4]) || !is_bool(&f[7]))
    return rn_decl_malformed(e);
  int rc = read_side(r, &r->left, &f[8], e);
  if (!rc) rc = read_side(r, &r->right, &f[10], e);
  if (rc) return rc;
  rn_buf_write(&r->right_desc, f[11].via.bin.ptr, f[11].via.bin.size);
  rn_join *j = &r->j;
  j->mapper_column = -1; /* a reader calls no mapper: its keys come from the index (fk_of_index) */
  const rn_schema *ls = r->left.schema, *rs = r->right.schema;
  int nproj = 0, *proj = NULL;
  if (!read_slots(&f[5], ls->ncols, &j->on, &j->non) || (j->on && j->non != rs->nkey) ||
      !read_slots(&f[6], ls->ncols + rs->ncols, &proj, &nproj)) {
    free(proj);
    return rn_decl_malformed(e);
  }
  if (proj && !(j->proj = rn_join_proj_new(proj, nproj, ls->ncols))) rc = rn_err_set(e, RN_ENOMEM, "out of memory");
  free(proj);
  if (rc) return rc;
  if (f[2].via.boolean)
    return rn_err_set(e, RN_EINVAL, "it joins stream \"%s\": its results are events, which go to its sinks as they "
                      "come, and it keeps no rows (keep them with rel:sink(runnel.store(\"%s\")) and read that store)",
                      r->left.name, r->out.name);
  for (int i = 0; i < j->non; i++) if (j->on[i] + 1 > j->on_upto) j->on_upto = j->on[i] + 1;
  j->kind = (rn_join_kind)f[1].via.u64;
  j->key_join = f[4].via.boolean;
  r->right_side = (int)f[3].via.u64;
  j->right_native = r->right_side == RIGHT_TABLE;
  j->lookup = r->right_side == RIGHT_LOOKUP;
  j->fns.joiner = f[7].via.boolean ? joiner_gone : NULL;
  j->keeps_results = j->lookup || j->fns.joiner;
  j->fk_of_index = !j->on;
  j->longfk_lazy = !j->on && !j->lookup; /* a mapper's long keys, found among the right rows (join_scan.c) */
  r->right.kind = j->right_native ? RN_REL_TABLE : j->lookup ? RN_REL_LOOKUP : RN_REL_JOIN;
  if (!j->right_native && rs->nkey == 0) return rn_decl_malformed(e);
  return 0;
}

/* Opens "<prefix>" name (or the right table's rows) in txn. */
static int open_db(MDB_txn *txn, const char *prefix, const char *name, MDB_dbi *dbi, rn_err *e)
{
  char key[RN_NAME_MAX + 8];
  snprintf(key, sizeof key, "%s%s", prefix, name);
  int rc = mdb_dbi_open(txn, key, 0, dbi);
  return rc ? rn_err_set(e, rn_store_read_code(rc), "%s: %s", key, rn_store_strerror(rc)) : 0;
}

/* The right table is gone (p:drop, runnel drop) while the join, not
 * declared then, stayed: not "MDB_NOTFOUND", nor "another schema". */
static int right_dropped(const rn_join_reader *r, rn_err *e)
{
  return rn_err_set(e, RN_EINVAL, "table \"%s\" it reads was dropped since the join was last declared: declare "
                    "both again (the join is rebuilt), then read it, or drop the join", r->right.name);
}

static int open_dbs(rn_join_reader *r, MDB_txn *txn, MDB_dbi meta, const char *name, rn_err *e)
{
  rn_join *j = &r->j;
  int rc = open_db(txn, RN_DB_JOIN_INDEX, name, &j->index_dbi, e);
  if (!rc) rc = open_db(txn, RN_DB_JOIN_RESULTS, name, &j->result_dbi, e);
  if (!rc && r->right_side == RIGHT_COPY) rc = open_db(txn, RN_DB_JOIN_RIGHT, name, &j->right_dbi, e);
  if (!rc && r->right_side == RIGHT_TABLE) {
    char key[RN_NAME_MAX + 8];
    MDB_val k = { (size_t)snprintf(key, sizeof key, "%s%s", RN_META_RELATION, r->right.name), key }, v;
    if (mdb_get(txn, meta, &k, &v) == MDB_NOTFOUND) return right_dropped(r, e);
    rc = open_db(txn, RN_DB_ROWS, r->right.name, &r->right.rows_dbi, e);
  }
  return rc;
}

int rn_join_reader_open(MDB_txn *txn, MDB_dbi meta, const char *name, const rn_schema *out, rn_join_reader **reader,
                        rn_err *e)
{
  *reader = NULL;
  rn_join_reader *r = calloc(1, sizeof *r);
  if (!r || !rn_zone_init(&r->p.scratch, 1024)) {
    free(r);
    return rn_err_set(e, RN_ENOMEM, "out of memory");
  }
  msgpack_sbuffer_init(&r->decl);
  msgpack_sbuffer_init(&r->right_desc);
  msgpack_sbuffer_init(&r->j.keybuf);
  msgpack_sbuffer_init(&r->j.resultbuf);
  r->out = (rn_rel){ .p = &r->p, .name = (char *)name, .kind = RN_REL_JOIN, .schema = (rn_schema *)out,
                     .tablelike = true, .ctx = &r->j };
  r->j.out = &r->out;
  r->j.left = &r->left;
  r->j.right = &r->right;
  msgpack_object d;
  int rc = rn_decl_record_read(txn, meta, "join", name, &r->p.scratch, &r->decl, &d, e);
  if (!rc) {
    rc = read_decl(r, &d, e);
    if (!rc) rc = open_dbs(r, txn, meta, name, e);
    if (rc) rc = rn_decl_failed(e, "join", name);
  }
  if (!rc && rn_oom()) rc = rn_err_set(e, RN_ENOMEM, "out of memory");
  if (rc) {
    rn_join_reader_free(r);
    return e->code;
  }
  msgpack_zone_clear(&r->p.scratch);
  *reader = r;
  return 0;
}

/* A u64 of meta under prefix name (*found false when absent). */
static int meta_u64(MDB_txn *txn, MDB_dbi meta, const char *prefix, const char *name, size_t at, uint64_t *out,
                    bool *found)
{
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)snprintf(key, sizeof key, "%s%s", prefix, name), key }, v;
  int rc = mdb_get(txn, meta, &k, &v);
  *found = rc == 0 && v.mv_size >= at + 8;
  if (*found) memcpy(out, (char *)v.mv_data + at, 8);
  return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Whether table name's catalogue entry ([kind, description]) in txn
 * describes the schema desc describes, byte for byte. */
static int same_schema(MDB_txn *txn, MDB_dbi meta, const char *name, const msgpack_sbuffer *desc, bool *same)
{
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)snprintf(key, sizeof key, "%s%s", RN_META_RELATION, name), key }, v;
  int rc = mdb_get(txn, meta, &k, &v);
  *same = rc == 0 && v.mv_size == desc->size + 2 && memcmp((char *)v.mv_data + 2, desc->data, desc->size) == 0;
  return rc == MDB_NOTFOUND ? 0 : rc;
}

int rn_join_right_changed(MDB_txn *txn, MDB_dbi meta, const char *name, bool *changed)
{
  *changed = false;
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)rn_decl_key(key, sizeof key, name), key }, v;
  int rc = mdb_get(txn, meta, &k, &v);
  if (rc) return rc == MDB_NOTFOUND ? 0 : rc;
  msgpack_zone z;
  if (!rn_zone_init(&z, 1024)) return ENOMEM;
  msgpack_object d;
  size_t off = 0;
  const msgpack_object *f = NULL;
  if (rn_msgpack_size(v.mv_data, v.mv_size) == v.mv_size &&
      rn_unpack(v.mv_data, v.mv_size, &off, &z, &d) == MSGPACK_UNPACK_SUCCESS && d.type == MSGPACK_OBJECT_ARRAY &&
      d.via.array.size == DECL_FIELDS && (f = d.via.array.ptr, is_uint(&f[3])) && f[3].via.u64 == RIGHT_TABLE &&
      f[10].type == MSGPACK_OBJECT_STR && f[10].via.str.size <= RN_NAME_MAX && f[11].type == MSGPACK_OBJECT_BIN) {
    char right[RN_NAME_MAX + 1];
    snprintf(right, sizeof right, "%.*s", (int)f[10].via.str.size, f[10].via.str.ptr);
    msgpack_sbuffer desc = { .size = f[11].via.bin.size, .data = (char *)f[11].via.bin.ptr };
    bool same = true;
    rc = same_schema(txn, meta, right, &desc, &same);
    *changed = !rc && !same;
  }
  rn_zone_destroy(&z);
  return rc;
}

/* In txn, the state holds what the reader was opened on, and the join's
 * state is as current as the right table it reads beside it: a join its
 * pipeline stopped declaring (or did not declare again since its right
 * table's schema changed) would mix old results with new right rows. */
static int check_current(rn_join_reader *r, MDB_txn *txn, MDB_dbi meta, rn_err *e)
{
  const char *name = r->out.name;
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)rn_decl_key(key, sizeof key, name), key }, v;
  int rc = mdb_get(txn, meta, &k, &v);
  if (rc && rc != MDB_NOTFOUND) return rn_err_set(e, rn_store_read_code(rc), "join \"%s\": %s", name, rn_store_strerror(rc));
  if (rc || v.mv_size != r->decl.size || memcmp(v.mv_data, r->decl.data, v.mv_size) != 0)
    return rn_err_set(e, RN_EINVAL, "join \"%s\" was declared again (or dropped) since it was attached: attach it "
                      "again", name);
  if (!r->j.right_native) return 0;
  uint64_t seq = 0, last = 0;
  bool has_seq, has_last, same = true;
  rc = meta_u64(txn, meta, RN_META_SEQ, "", 0, &seq, &has_seq);
  if (!rc) rc = meta_u64(txn, meta, RN_META_COUNTERS, name, 16, &last, &has_last);
  if (!rc && !r->j.right_from) rc = same_schema(txn, meta, r->right.name, &r->right_desc, &same); /* else read as it
                                                                                                     * was declared */
  if (rc) return rn_err_set(e, rn_store_read_code(rc), "join \"%s\": %s", name, rn_store_strerror(rc));
  MDB_val rk = { (size_t)snprintf(key, sizeof key, "%s%s", RN_META_RELATION, r->right.name), key }, rv;
  if (!same && mdb_get(txn, meta, &rk, &rv) == MDB_NOTFOUND) { /* dropped since it was attached */
    right_dropped(r, e);
    return rn_decl_failed(e, "join", name);
  }
  if (!same)
    return rn_err_set(e, RN_EINVAL, "join \"%s\": table \"%s\" has another schema than when the join was last "
                      "declared: declare the join again (it is rebuilt), then read it", name, r->right.name);
  if (has_seq && has_last && last != seq)
    return rn_err_set(e, RN_EINVAL, "join \"%s\" holds its results as of group %llu and the state is at group "
                      "%llu (its pipeline no longer declares it), while table \"%s\" it reads beside them is "
                      "current: declare the join again to bring it up to date, or drop it", name,
                      (unsigned long long)last, (unsigned long long)seq, r->right.name);
  return 0;
}

int rn_join_reader_each(rn_join_reader *r, MDB_txn *txn, MDB_dbi meta, rn_scan_fn fn, void *ctx, rn_err *e)
{
  int rc = check_current(r, txn, meta, e);
  if (rc) return rc;
  rn_err_clear(&r->p.err);
  rc = rn_join_scan_txn(&r->j, txn, fn, ctx);
  rn_join_longfks_free(&r->j); /* the right rows of this read transaction */
  msgpack_zone_clear(&r->p.scratch);
  if (rc && r->p.err.code) {
    *e = r->p.err;
    char prefix[RN_NAME_MAX + 16];
    snprintf(prefix, sizeof prefix, "join \"%s\"", r->out.name);
    if (!strstr(e->msg, r->out.name)) rn_err_prefix(e, prefix);
  }
  return rc;
}

/* ---- a right table whose columns changed (rn_join_reader_right_now) ---- */

int rn_join_right_as_declared(rn_join *j, const char **row, size_t *len)
{
  const rn_schema *rs = j->right->schema;
  msgpack_zone *z = zone_of(j);
  const msgpack_object *now = rn_row_unpack(*row, *len, j->right_now_ncols, z);
  if (!now) return rn_err_set(err_of(j), RN_ESTORE, "%s: a row of \"%s\" could not be decoded", j->out->name,
                              j->right->name);
  msgpack_object *vals = rn_zone_malloc(z, sizeof *vals * (size_t)(rs->ncols ? rs->ncols : 1));
  if (!vals) return nomem(j);
  for (int i = 0; i < rs->ncols; i++) {
    vals[i].type = MSGPACK_OBJECT_NIL;
    if (j->right_from[i] >= 0) vals[i] = now[j->right_from[i]];
  }
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  rn_row_pack(rs, vals, &b);
  *row = b.data ? rn_scratch_copy(j->out->p, b.data, b.size) : NULL;
  *len = b.size;
  msgpack_sbuffer_destroy(&b);
  return *row ? 0 : nomem(j);
}

const rn_schema *rn_join_reader_side(const rn_join_reader *r, bool right, const char **name)
{
  const rn_rel *s = right ? &r->right : &r->left;
  if (name) *name = s->name;
  return s->schema;
}

bool rn_join_reader_right_is_table(const rn_join_reader *r)
{
  return r->right_side == RIGHT_TABLE;
}

int rn_join_reader_right_now(rn_join_reader *r, const int *from, int now_ncols)
{
  int n = r->right.schema->ncols;
  int *a = malloc(sizeof *a * (size_t)(n ? n : 1));
  if (!a) return RN_ENOMEM;
  memcpy(a, from, sizeof *a * (size_t)n);
  free(r->j.right_from);
  r->j.right_from = a;
  r->j.right_now_ncols = now_ncols;
  return 0;
}

/* The default layout's slot (left columns, then right ones) result column
 * slot of j holds, or -1 (a joiner's result). */
static int origin_of(const rn_join *j, int slot)
{
  if (j->fns.joiner) return -1;
  if (j->proj) return slot < j->proj->n ? j->proj->slots[slot] : -1;
  return slot < j->left->schema->ncols + j->right->schema->ncols ? slot : -1;
}

int rn_join_reader_origin(const rn_join_reader *r, int slot)
{
  return origin_of(&r->j, slot);
}

int rn_join_origin(const rn_rel *join, int slot)
{
  return join->kind == RN_REL_JOIN && join->ctx ? origin_of(join->ctx, slot) : -1;
}
