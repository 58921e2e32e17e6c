/* evolve.c — a relation declared again with another declaration (evolve.h).
 *
 * A source table's change is planned column by column from the two
 * descriptions (schema.c's |[columns]|[key slots]|), then, when the rows'
 * shape changes, every stored row is rewritten at once in the declaring
 * transaction. At once rather than lazily: a lazy rewrite would make every
 * read of the table know every past layout, while a rewrite costs one pass
 * at deploy time (about a second per million small rows) and leaves the
 * hot path as it was.
 *
 * Invariants:
 * (1) Row ids and keys never change: a key column cannot be renamed into
 *     another slot of the key order, retyped or dropped (refused), so the
 *     encoded keys of rows_dbi stay valid and only the row part is rewritten.
 * (2) All or nothing: the rewrite and the new catalogue entry are written
 *     in the transaction that declares the table; a refusal aborts it.
 * (3) A refusal names the column, its stored and declared type, and for a
 *     conversion that some rows block, their count and the first one's key. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evolve.h"
#include "evolve_reads.h"
#include "json.h"
#include "key.h"
#include "ops.h"
#include "row.h"

typedef struct rn_rename {
  char *rel, *from, *to;  /* owned */
} rn_rename;

/* A column as a description holds it: |name|type|nullable|default|fields|. */
typedef struct dcol {
  const msgpack_object *o;  /* the whole column array */
  msgpack_object_str name, type;
  bool nullable;
} dcol;

/* The catalogue entry [kind, [[columns], [key slots]]] read into parts. */
typedef struct desc {
  int64_t kind;
  uint32_t ncols, nkey;
  const msgpack_object *cols, *key;  /* arrays */
} desc;

enum { CONV_COPY, CONV_TO_FLOAT, CONV_NEW };

/* How each declared column is filled from the stored row. */
typedef struct plan {
  int *src;               /* per declared slot: the stored slot, or -1 (new column) */
  uint8_t *conv;          /* per declared slot: CONV_… */
  bool *null_check;       /* per declared slot: a null stored there blocks (made non-null) */
  bool rewrite;           /* the rows change shape: every row is rewritten */
  char line[2048];        /* what changed, for the note */
  size_t len;
} plan;

static void note(plan *pl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(plan *pl, const char *fmt, ...)
{
  if (pl->len + 2 >= sizeof pl->line) return;
  if (pl->len) pl->len += (size_t)snprintf(pl->line + pl->len, sizeof pl->line - pl->len, "; ");
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(pl->line + pl->len, sizeof pl->line - pl->len, fmt, ap);
  va_end(ap);
  if (n > 0) pl->len += (size_t)n;
  if (pl->len >= sizeof pl->line) pl->len = sizeof pl->line - 1;
}

static bool read_desc(const char *data, size_t len, msgpack_zone *z, desc *d)
{
  msgpack_object o;
  size_t off = 0;
  if (rn_msgpack_size(data, len) != len || rn_unpack(data, len, &off, z, &o) != MSGPACK_UNPACK_SUCCESS ||
      o.type != MSGPACK_OBJECT_ARRAY || o.via.array.size != 2 || !rn_schema_desc_valid(&o.via.array.ptr[1], 0))
    return false;
  d->kind = o.via.array.ptr[0].via.i64;
  d->cols = &o.via.array.ptr[1].via.array.ptr[0];
  d->key = &o.via.array.ptr[1].via.array.ptr[1];
  d->ncols = d->cols->via.array.size;
  d->nkey = d->key->via.array.size;
  return true;
}

static dcol col_of(const desc *d, uint32_t i)
{
  const msgpack_object *f = d->cols->via.array.ptr[i].via.array.ptr;
  return (dcol){ &d->cols->via.array.ptr[i], f[0].via.str, f[1].via.str, f[2].via.boolean };
}

static bool str_is(msgpack_object_str s, const char *t, size_t len)
{
  return s.size == len && memcmp(s.ptr, t, len) == 0;
}

static int stored_slot(const desc *d, const char *name, size_t len)
{
  for (uint32_t i = 0; i < d->ncols; i++)
    if (str_is(col_of(d, i).name, name, len)) return (int)i;
  return -1;
}

static bool stored_is_key(const desc *d, int slot)
{
  for (uint32_t k = 0; k < d->nkey; k++)
    if ((int)d->key->via.array.ptr[k].via.u64 == slot) return true;
  return false;
}

/* Whether a pending rename of r's takes the stored column name to another
 * declared column: the state holds name and not the new one (else it was
 * applied before). The declared column of that name is then a new one. */
static bool renamed_away(const rn_pipeline *p, const rn_rel *r, const desc *d, const char *name)
{
  for (int i = 0; i < p->nrenames; i++) {
    const rn_rename *rn = &p->renames[i];
    if (strcmp(rn->rel, r->name) == 0 && strcmp(rn->from, name) == 0 && strcmp(rn->to, name) != 0 &&
        rn_schema_slot(r->schema, rn->to, strlen(rn->to)) >= 0 && stored_slot(d, rn->to, strlen(rn->to)) < 0)
      return true;
  }
  return false;
}

/* The stored column a declared one continues: same name (unless a pending
 * rename takes it to another declared column), else the stored source of
 * a pending rename to it. */
static int match_column(rn_pipeline *p, const rn_rel *r, const desc *d, const rn_column *c, bool *renamed)
{
  *renamed = false;
  int slot = stored_slot(d, c->name, c->name_len);
  if (slot >= 0 && !renamed_away(p, r, d, c->name)) return slot; /* else {"town", was = "city"}, {"city"}: new */
  for (int i = 0; i < p->nrenames; i++) {
    const rn_rename *rn = &p->renames[i];
    if (strcmp(rn->rel, r->name) != 0 || strcmp(rn->to, c->name) != 0) continue;
    slot = stored_slot(d, rn->from, strlen(rn->from));
    if (slot >= 0) {
      *renamed = true;
      return slot;
    }
  }
  return -1;
}

/* "id int, name string" for a key, into buf. */
static void key_text(const desc *d, char *buf, size_t len)
{
  size_t off = 0;
  buf[0] = '\0';
  if (!d->nkey) snprintf(buf, len, "none: keyless");
  for (uint32_t k = 0; k < d->nkey && off + 1 < len; k++) {
    dcol c = col_of(d, (uint32_t)d->key->via.array.ptr[k].via.u64);
    off += (size_t)snprintf(buf + off, len - off, "%s%.*s %.*s", k ? ", " : "", (int)c.name.size, c.name.ptr,
                            (int)c.type.size, c.type.ptr);
  }
}

/* (1): the declared key is the stored one, column for column and type for type. */
static int check_key(rn_pipeline *p, const rn_rel *r, const desc *old, const desc *now, const int *src)
{
  bool same = old->nkey == now->nkey;
  for (uint32_t k = 0; same && k < now->nkey; k++) {
    int slot = (int)now->key->via.array.ptr[k].via.u64;
    dcol o = col_of(old, (uint32_t)(src[slot] < 0 ? 0 : src[slot])), n = col_of(now, (uint32_t)slot);
    same = src[slot] == (int)old->key->via.array.ptr[k].via.u64 && o.type.size == n.type.size &&
           memcmp(o.type.ptr, n.type.ptr, n.type.size) == 0;
  }
  if (same) return 0;
  char was[512], is[512];
  key_text(old, was, sizeof was);
  key_text(now, is, sizeof is);
  return rn_err_set(&p->err, RN_ESCHEMA,
                    "relation \"%s\": the key cannot change: stored (%s), declared (%s); keep the stored key, "
                    "or drop the table (p:drop(\"%s\")) to start it again", r->name, was, is, r->name);
}

/* Plans one declared column continuing stored column s (types checked). */
static int plan_kept(rn_pipeline *p, const rn_rel *r, plan *pl, int slot, dcol o, dcol n)
{
  const char *nm = r->schema->cols[slot].name;
  bool same_type = o.type.size == n.type.size && memcmp(o.type.ptr, n.type.ptr, n.type.size) == 0;
  const msgpack_object *of = &o.o->via.array.ptr[4], *nf = &n.o->via.array.ptr[4];
  if (same_type && !msgpack_object_equal(*of, *nf))
    return rn_err_set(&p->err, RN_ESCHEMA,
                      "relation \"%s\": column \"%s\": stored as a struct with other fields than the declared one; "
                      "a struct's fields cannot change (declare it as any, or add a new column)", r->name, nm);
  if (same_type) pl->conv[slot] = CONV_COPY;
  else if (str_is(n.type, "any", 3)) pl->conv[slot] = CONV_COPY; /* the stored value is kept as it is */
  else if (str_is(o.type, "int", 3) && str_is(n.type, "float", 5)) pl->conv[slot] = CONV_TO_FLOAT, pl->rewrite = true;
  else
    return rn_err_set(&p->err, RN_ESCHEMA,
                      "relation \"%s\": column \"%s\": stored as %.*s, declared %.*s; only int to float and any "
                      "type to any are applied (they convert every value exactly)",
                      r->name, nm, (int)o.type.size, o.type.ptr, (int)n.type.size, n.type.ptr);
  if (!same_type)
    note(pl, "widened \"%s\" from %.*s to %.*s", nm, (int)o.type.size, o.type.ptr, (int)n.type.size, n.type.ptr);
  if (o.nullable && !n.nullable) pl->null_check[slot] = true, note(pl, "made \"%s\" not null", nm);
  if (!o.nullable && n.nullable) note(pl, "made \"%s\" nullable", nm);
  if (!msgpack_object_equal(o.o->via.array.ptr[3], n.o->via.array.ptr[3])) note(pl, "changed the default of \"%s\"", nm);
  return 0;
}

/* A new column: null or its default in every stored row. */
static int plan_new(rn_pipeline *p, const rn_rel *r, plan *pl, int slot)
{
  const rn_column *c = &r->schema->cols[slot];
  if (!c->nullable && !c->has_default)
    return rn_err_set(&p->err, RN_ESCHEMA,
                      "relation \"%s\": new column \"%s\" %s is not null and has no default: the stored rows would "
                      "have no value (give it a default, or null = true)", r->name, c->name, rn_type_name(c->type));
  pl->conv[slot] = CONV_NEW;
  pl->rewrite = true;
  char dv[128] = "null";
  if (c->has_default) rn_object_text(dv, sizeof dv, &c->defval); /* floats shortest: 1.5, not 1.500000 */
  note(pl, "added \"%s\" %s = %s", c->name, rn_type_name(c->type), dv);
  return 0;
}

/* "id, lvl, score": the stored columns, into buf. */
static void columns_text(const desc *d, char *buf, size_t len)
{
  size_t off = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < d->ncols && off + 1 < len; i++) {
    dcol c = col_of(d, i);
    off += (size_t)snprintf(buf + off, len - off, "%s%.*s", i ? ", " : "", (int)c.name.size, c.name.ptr);
  }
}

/* The pending rename of r's from `from` to a declared column, or NULL. */
static const rn_rename *rename_from(const rn_pipeline *p, const rn_rel *r, const char *from)
{
  for (int i = 0; i < p->nrenames; i++) {
    const rn_rename *rn = &p->renames[i];
    if (strcmp(rn->rel, r->name) == 0 && strcmp(rn->from, from) == 0 && strcmp(rn->to, from) != 0 &&
        rn_schema_slot(r->schema, rn->to, strlen(rn->to)) >= 0)
      return rn;
  }
  return NULL;
}

/* Renames of r's that come back to where they start (a was b, b was a: a
 * swap) are refused: the state holds every name of the cycle before the
 * renames and after them, so a cycle applied could not be told from one
 * applied before, and the next open would apply it again. */
static int check_rename_cycles(rn_pipeline *p, const rn_rel *r)
{
  for (int i = 0; i < p->nrenames; i++) {
    const rn_rename *first = &p->renames[i], *rn = first;
    if (strcmp(first->rel, r->name) != 0) continue;
    char names[1024];
    size_t off = (size_t)snprintf(names, sizeof names, "\"%s\"", first->from);
    for (int steps = 0; steps < p->nrenames && (rn = rename_from(p, r, rn->to)); steps++) {
      if (rn == first)
        return rn_err_set(&p->err, RN_ESCHEMA,
                          "relation \"%s\": columns %s are renamed in a cycle (was): the state holds those names "
                          "before the renames and after, so they cannot be told apart from renames applied "
                          "before; rename through a name the state does not hold, one open each", r->name, names);
      if (off < sizeof names) off += (size_t)snprintf(names + off, sizeof names - off, " and \"%s\"", rn->from);
    }
  }
  return 0;
}

/* A pending rename of r's to a declared column must name a stored one,
 * unless the state holds the new name already (applied before): applied
 * as a new column, it dropped the stored one's values. */
static int check_renames(rn_pipeline *p, const rn_rel *r, const desc *old)
{
  int rc = check_rename_cycles(p, r);
  if (rc) return rc;
  for (int i = 0; i < p->nrenames; i++) {
    const rn_rename *rn = &p->renames[i];
    if (strcmp(rn->rel, r->name) != 0 || rn_schema_slot(r->schema, rn->to, strlen(rn->to)) < 0 ||
        stored_slot(old, rn->to, strlen(rn->to)) >= 0 || stored_slot(old, rn->from, strlen(rn->from)) >= 0)
      continue;
    char held[1024];
    columns_text(old, held, sizeof held);
    return rn_err_set(&p->err, RN_ESCHEMA,
                      "relation \"%s\": column \"%s\" is renamed from \"%s\", but the state holds no column \"%s\" "
                      "(it holds %s): name a stored column, or drop the rename", r->name, rn->to, rn->from, rn->from,
                      held);
  }
  return 0;
}

/* Plans every declared column, then the stored ones dropped. */
static int make_plan(rn_pipeline *p, rn_rel *r, const desc *old, const desc *now, plan *pl)
{
  int n = r->schema->ncols, rc = check_renames(p, r, old);
  for (int j = 0; j < n && !rc; j++) {
    bool renamed;
    int s = match_column(p, r, old, &r->schema->cols[j], &renamed);
    pl->src[j] = s;
    if (s < 0) { rc = plan_new(p, r, pl, j); continue; }
    for (int k = 0; k < j && !rc; k++) /* one stored column renamed to two: it would be copied */
      if (pl->src[k] == s)
        rc = rn_err_set(&p->err, RN_ESCHEMA, "relation \"%s\": columns \"%s\" and \"%s\" both continue the stored "
                        "column \"%.*s\" (a rename names one new column)", r->name, r->schema->cols[k].name,
                        r->schema->cols[j].name, (int)col_of(old, (uint32_t)s).name.size, col_of(old, (uint32_t)s).name.ptr);
    if (rc) break;
    if (renamed) {
      dcol o = col_of(old, (uint32_t)s);
      note(pl, "renamed \"%.*s\" to \"%s\"", (int)o.name.size, o.name.ptr, r->schema->cols[j].name);
    }
    if (s != j) pl->rewrite = true;
    rc = plan_kept(p, r, pl, j, col_of(old, (uint32_t)s), col_of(now, (uint32_t)j));
  }
  if (!rc) rc = check_key(p, r, old, now, pl->src);
  for (uint32_t s = 0; s < old->ncols && !rc; s++) {
    bool kept = false;
    for (int j = 0; j < n; j++) kept |= pl->src[j] == (int)s;
    if (kept) continue;
    dcol o = col_of(old, s);
    if (stored_is_key(old, (int)s)) return check_key(p, r, old, now, pl->src);
    note(pl, "dropped \"%.*s\"", (int)o.name.size, o.name.ptr);
    pl->rewrite = true;
  }
  bool moved = false;
  for (int j = 0, last = -1; j < n && !rc; j++) {
    if (pl->src[j] < 0) continue;
    moved |= pl->src[j] < last;
    last = pl->src[j];
  }
  if (!rc && moved) note(pl, "reordered the columns");
  return rc;
}

/* ---- rewriting the rows ---- */

typedef struct rewrite {
  rn_pipeline *p;
  rn_rel *r;
  const plan *pl;
  int old_ncols;
  msgpack_zone *z;
  msgpack_sbuffer out;    /* the new row */
  msgpack_object *vals;   /* the new row's values by declared slot */
  uint64_t blocked;       /* rows a conversion refuses */
  int blocked_slot;       /* the first such row's column */
  char first[256];        /* and its key */
  uint64_t rows;          /* rows rewritten */
  MDB_txn *txn;           /* the declaring transaction */
  MDB_dbi hashes;         /* keyless: the hash index, rebuilt */
} rewrite;

static void block(rewrite *w, int slot, uint64_t id)
{
  if (!w->blocked++) {
    w->blocked_slot = slot;
    if (w->r->schema->nkey) rn_key_format(w->r->schema, w->vals, w->first, sizeof w->first);
    else snprintf(w->first, sizeof w->first, "row id %llu", (unsigned long long)id);
  }
}

/* Packs the declared row of one stored row into w->out. */
static int convert_row(rewrite *w, uint64_t id, const char *row, size_t len)
{
  const msgpack_object *old = rn_row_unpack(row, len, w->old_ncols, w->z);
  if (!old) return rn_err_set(&w->p->err, RN_ESTORE, "state damaged: %s: a row of \"%s\" (id %llu) is malformed",
                              w->p->store.path, w->r->name, (unsigned long long)id);
  const rn_schema *s = w->r->schema;
  int bad = -1;
  for (int j = 0; j < s->ncols; j++) {
    msgpack_object *v = &w->vals[j];
    if (w->pl->conv[j] == CONV_NEW) {
      if (s->cols[j].has_default) *v = s->cols[j].defval;
      else v->type = MSGPACK_OBJECT_NIL;
      continue;
    }
    *v = old[w->pl->src[j]];
    if (w->pl->null_check[j] && v->type == MSGPACK_OBJECT_NIL && bad < 0) bad = j;
    if (w->pl->conv[j] == CONV_TO_FLOAT && v->type != MSGPACK_OBJECT_NIL) {
      if (!rn_int_is_float(v) && bad < 0) bad = j;
      double d = v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (double)v->via.u64 : (double)v->via.i64;
      v->type = MSGPACK_OBJECT_FLOAT64;
      v->via.f64 = d;
    }
  }
  if (bad >= 0) block(w, bad, id);
  w->out.size = 0;
  rn_row_pack(s, w->vals, &w->out);
  return 0;
}

/* The new value of one stored entry into out, or *skip (a tombstone, or a
 * row a conversion refuses). */
typedef int (*entry_fn)(rewrite *w, const MDB_val *k, const MDB_val *v, msgpack_sbuffer *out, bool *skip);

/* Keyed: |u64 id|u8 flags|[u32 klen|key]|row| — the row part is replaced. */
static int keyed_entry(rewrite *w, const MDB_val *k, const MDB_val *v, msgpack_sbuffer *out, bool *skip)
{
  (void)k;
  const char *d = v->mv_data;
  uint64_t id;
  memcpy(&id, d, 8);
  *skip = !(d[8] & 1); /* a tombstone keeps the id, holds no row */
  if (*skip) return 0;
  size_t off = 9;
  if (d[8] & 2) {
    uint32_t klen;
    memcpy(&klen, d + 9, 4);
    off += 4 + klen;
  }
  int rc = convert_row(w, id, d + off, v->mv_size - off);
  *skip = rc || w->blocked;
  if (*skip) return rc;
  rn_buf_write(out, d, off);
  rn_buf_write(out, w->out.data, w->out.size);
  return 0;
}

/* Keyless: |u64 id BE| -> |row|, and the row's entry in the hash index. */
static int keyless_entry(rewrite *w, const MDB_val *k, const MDB_val *v, msgpack_sbuffer *out, bool *skip)
{
  int rc = convert_row(w, rn_be64_get(k->mv_data), v->mv_data, v->mv_size);
  *skip = rc || w->blocked;
  if (*skip) return rc;
  rn_buf_write(out, w->out.data, w->out.size);
  uint64_t h = rn_row_hash(w->out.data, w->out.size);
  MDB_val hk = { 8, &h }, hv = { 8, k->mv_data };
  rc = mdb_put(w->txn, w->hashes, &hk, &hv, 0);
  return rc ? rn_store_fail(&w->p->err, rc, w->r->name) : 0;
}

/* Puts a batch |u32 klen|key|u32 vlen|value| … into dbi. */
static int put_batch(rewrite *w, MDB_dbi dbi, const msgpack_sbuffer *batch)
{
  for (size_t off = 0; off < batch->size;) {
    uint32_t klen, vlen;
    memcpy(&klen, batch->data + off, 4);
    memcpy(&vlen, batch->data + off + 4 + klen, 4);
    MDB_val k = { klen, batch->data + off + 4 }, v = { vlen, batch->data + off + 8 + klen };
    int rc = mdb_put(w->txn, dbi, &k, &v, 0);
    if (rc) return rn_store_fail(&w->p->err, rc, w->r->name);
    off += 8 + klen + vlen;
    w->rows++;
  }
  return 0;
}

/* Rewrites every entry of dbi through fn, a batch of entries at a time:
 * read by cursor, then written by mdb_put with the cursor closed (LMDB
 * loses entries a cursor rewrites in place with another size), then the
 * cursor placed again after the last key (keys never change, (1)). Memory
 * is bounded by the batch. */
static int rewrite_db(rewrite *w, MDB_dbi dbi, entry_fn fn)
{
  enum { BATCH = 1024 };
  msgpack_sbuffer batch, val;
  msgpack_sbuffer_init(&batch);
  msgpack_sbuffer_init(&val);
  char *last = NULL;
  size_t last_len = 0;
  int rc = 0, mrc = 0;
  while (!rc && mrc != MDB_NOTFOUND) {
    MDB_cursor *cur;
    if ((rc = mdb_cursor_open(w->txn, dbi, &cur))) { rc = rn_store_fail(&w->p->err, rc, w->r->name); break; }
    MDB_val k = { last_len, last }, v;
    mrc = mdb_cursor_get(cur, &k, &v, last ? MDB_SET_KEY : MDB_FIRST);
    if (last && !mrc) mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    batch.size = 0;
    for (int n = 0; n < BATCH && !mrc && !rc; n++, mrc = n < BATCH ? mdb_cursor_get(cur, &k, &v, MDB_NEXT) : 0) {
      bool skip = false;
      val.size = 0;
      rc = fn(w, &k, &v, &val, &skip);
      uint32_t klen = (uint32_t)k.mv_size, vlen = (uint32_t)val.size;
      free(last);
      last_len = k.mv_size;
      if (!(last = malloc(last_len ? last_len : 1))) rc = rn_err_set(&w->p->err, RN_ENOMEM, "out of memory");
      else memcpy(last, k.mv_data, last_len);
      msgpack_zone_clear(w->z);
      if (rc || skip) continue;
      rn_buf_write(&batch, (const char *)&klen, 4);
      rn_buf_write(&batch, k.mv_data, k.mv_size);
      rn_buf_write(&batch, (const char *)&vlen, 4);
      rn_buf_write(&batch, val.data, val.size);
    }
    mdb_cursor_close(cur);
    if (!rc && mrc && mrc != MDB_NOTFOUND) rc = rn_store_fail(&w->p->err, mrc, w->r->name);
    if (!rc && rn_oom()) rc = rn_err_set(&w->p->err, RN_ENOMEM, "out of memory");
    if (!rc && !w->blocked) rc = put_batch(w, dbi, &batch);
  }
  free(last);
  msgpack_sbuffer_destroy(&batch);
  msgpack_sbuffer_destroy(&val);
  return rc;
}

static int blocked_error(rewrite *w, const desc *old)
{
  const rn_column *c = &w->r->schema->cols[w->blocked_slot];
  dcol o = col_of(old, (uint32_t)w->pl->src[w->blocked_slot]);
  bool one = w->blocked == 1;
  const char *why = one ? "holds null" : "hold null";
  if (w->pl->conv[w->blocked_slot] == CONV_TO_FLOAT)
    why = w->pl->null_check[w->blocked_slot] ? (one ? "holds null or an integer no float holds exactly"
                                                    : "hold null or integers no float holds exactly")
                                             : (one ? "holds an integer no float holds exactly"
                                                    : "hold integers no float holds exactly");
  return rn_err_set(&w->p->err, RN_ESCHEMA,
                    "relation \"%s\": column \"%s\": stored as %.*s%s, declared %s%s: %llu row%s %s (first: %s)",
                    w->r->name, c->name, (int)o.type.size, o.type.ptr, o.nullable ? " null" : "",
                    rn_type_name(c->type), c->nullable ? " null" : " not null", (unsigned long long)w->blocked,
                    w->blocked == 1 ? "" : "s", why, w->first);
}

/* Rewrites every stored row of table r by plan (2: in txn). */
static int rewrite_rows(rn_pipeline *p, rn_rel *r, MDB_txn *txn, const desc *old, const plan *pl)
{
  MDB_dbi rows, hashes = 0;
  int rc = rn_state_dbi(p, txn, RN_DB_ROWS, r->name, 0, &rows);
  if (!rc && !old->nkey) rc = rn_state_dbi(p, txn, RN_DB_ROW_HASHES, r->name, MDB_DUPSORT | MDB_DUPFIXED, &hashes);
  if (rc) return rc;
  msgpack_zone z;
  rewrite w = { .p = p, .r = r, .pl = pl, .old_ncols = (int)old->ncols, .z = &z, .txn = txn, .hashes = hashes };
  w.vals = calloc((size_t)r->schema->ncols, sizeof *w.vals);
  if (!w.vals || !rn_zone_init(&z, 4096)) {
    free(w.vals);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  msgpack_sbuffer_init(&w.out);
  if (!old->nkey && (rc = mdb_drop(txn, hashes, 0))) rc = rn_store_fail(&p->err, rc, r->name);
  if (!rc) rc = rewrite_db(&w, rows, old->nkey ? keyed_entry : keyless_entry);
  if (!rc && w.blocked) rc = blocked_error(&w, old);
  if (!rc && rn_oom()) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  msgpack_sbuffer_destroy(&w.out);
  rn_zone_destroy(&z);
  free(w.vals);
  return rc;
}

/* ---- the notes ---- */

static int add_note(rn_pipeline *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int add_note(rn_pipeline *p, const char *fmt, ...)
{
  char raw[3072], line[3072];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  rn_err_escape_into(line, sizeof line, raw, strlen(raw)); /* a name's newline: the note stays one line */
  char *copy = strdup(line);
  if (!copy || rn_push_ptr((void ***)&p->notes, &p->nnotes, &p->notecap, copy)) {
    free(copy);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  return 0;
}

int rn_evolve_note(rn_pipeline *p, const char *fmt, ...)
{
  char line[3072];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  return add_note(p, "%s", line);
}

int rn_notes(const rn_pipeline *p, const char *const **lines)
{
  *lines = (const char *const *)p->notes;
  return p->nnotes;
}

/* ---- by kind ---- */

/* ---- the evolved marks ----
 *
 * meta "ev" (store.h) names the relations that changed since the last
 * group: a table rewritten, a derived relation declared again, a function
 * changed. It is written in the transaction that makes the change, so a
 * crash before the relations over it are declared again does not lose it,
 * and deleted by the next group (group.c): every stateful relation not
 * declared by then missed that group and is rebuilt anyway.
 *
 *     meta "ev"   |name|\0|name|\0|…|check\0|   (its check: evolve_reads.h; without
 *                 it: 0.22's; empty, from runnel 0.16: every one)
 *
 * A relation declared later reads the marks and its inputs' (rn_evolve_opened):
 * marked, or reading one that is (directly or through others), it is
 * evolved; a stateful one over an evolved input is rebuilt from its inputs,
 * and one over a stream, which cannot be replayed, is kept and said so. */

static bool marked(const rn_pipeline *p, const char *name)
{
  if (p->evolved_unread) return true;
  for (size_t off = 0; off < p->evolved_len; off += strlen(p->evolved_marks + off) + 1)
    if (strcmp(p->evolved_marks + off, name) == 0) return true;
  return false;
}

int rn_evolve_load(rn_pipeline *p, const MDB_val *v)
{
  p->evolved_kept = true;
  if (!v->mv_size) { /* 0.16's: all */
    p->evolved_all = true;
    return 0;
  }
  const char *names;
  size_t len;
  rn_names_state state = rn_names_read(v, &names, &len);
  if (state == RN_NAMES_MALFORMED || state == RN_NAMES_FAILED) { /* cut, a \0 or a letter flipped: a name read wrong */
    p->evolved_unread = true; /* would be neither rebuilt nor rebuilt over, unsaid; every relation counts as marked */
    return add_note(p, "state damaged: %s: the record of the relations changed since the last group %s (%zu bytes): "
                    "every relation declared counts as changed (stateful ones are rebuilt from their inputs)",
                    p->store.path, state == RN_NAMES_FAILED ? "fails its check" : "is malformed", v->mv_size);
  }
  if (!(p->evolved_marks = malloc(len))) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  memcpy(p->evolved_marks, names, len);
  p->evolved_len = p->evolved_cap = len;
  return 0;
}

/* Marks relation name changed, in txn (the marks, as p holds them, are
 * written whole: a few names) and in p (rn_evolve_forget takes it back). */
static int keep_evolved(rn_pipeline *p, MDB_txn *txn, const char *name)
{
  if (p->evolved_unread) { /* the damaged record stays as it is (every relation marked) until the next group */
    p->evolved_kept = true;
    return 0;
  }
  size_t len = strlen(name) + 1;
  if (!p->evolved_all && !marked(p, name)) {
    if (p->evolved_len + len > p->evolved_cap) {
      size_t cap = (p->evolved_len + len) * 2;
      char *a = realloc(p->evolved_marks, cap);
      if (!a) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
      p->evolved_marks = a;
      p->evolved_cap = cap;
    }
    memcpy(p->evolved_marks + p->evolved_len, name, len);
    p->evolved_len += len;
  }
  MDB_val k = { RN_PREFIX_LEN(RN_META_EVOLVED), (void *)RN_META_EVOLVED }, all = { 0, NULL };
  int rc = p->evolved_all ? mdb_put(txn, p->store.meta, &k, &all, 0) /* empty: every one, as 0.16 wrote */
                          : rn_names_put(txn, p->store.meta, &k, p->evolved_marks, p->evolved_len);
  if (rc) return rn_store_fail(&p->err, rc, RN_META_EVOLVED);
  p->evolved_kept = true;
  return 0;
}

/* r changed: the stateful relations over it are rebuilt. */
static int evolved(rn_pipeline *p, rn_rel *r, MDB_txn *txn)
{
  r->evolved = true;
  r->evolved_by = r->name;
  return keep_evolved(p, txn, r->name);
}

/* Forgets what keep_added kept of r. */
static void forget_moved(rn_rel *r)
{
  for (int i = 0; r->stored_names && i < r->nstored; i++) free(r->stored_names[i]);
  free(r->added_slots), free(r->now_slots), free(r->stored_names);
  r->added_slots = NULL, r->nadded = 0, r->now_slots = NULL, r->stored_names = NULL, r->nstored = 0;
}

/* The columns pl adds to table r, kept in r->added_slots: a map over r
 * made its rows, as its sinks were told them, with none of them
 * (evolve_log.c, scan_as_told). And, when any column moved, was renamed,
 * dropped or added, where each of its stored columns (old) is now and
 * its name then, in r->now_slots and r->stored_names: a select over r
 * reads its old columns there, and a map's function reading an old name
 * is given its value as its sinks were told (lua/lcallback.c). */
static int keep_added(rn_pipeline *p, rn_rel *r, const plan *pl, const desc *old)
{
  forget_moved(r);
  int n = 0, nstored = (int)old->ncols;
  bool moved = nstored != r->schema->ncols;
  for (int j = 0; j < r->schema->ncols; j++) {
    n += pl->src[j] < 0;
    moved |= pl->src[j] != j;
    if (pl->src[j] >= 0) {
      msgpack_object_str was = col_of(old, (uint32_t)pl->src[j]).name;
      moved |= !str_is(was, r->schema->cols[j].name, strlen(r->schema->cols[j].name));
    }
  }
  if (moved) {
    if (!(r->now_slots = malloc(sizeof *r->now_slots * (size_t)(nstored ? nstored : 1))) ||
        !(r->stored_names = calloc((size_t)(nstored ? nstored : 1), sizeof *r->stored_names))) {
      forget_moved(r);
      return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
    }
    r->nstored = nstored;
    for (int i = 0; i < nstored; i++) {
      msgpack_object_str was = col_of(old, (uint32_t)i).name;
      r->now_slots[i] = -1;
      if (!(r->stored_names[i] = strndup(was.ptr, was.size))) {
        forget_moved(r);
        return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
      }
    }
    for (int j = 0; j < r->schema->ncols; j++)
      if (pl->src[j] >= 0 && pl->src[j] < nstored) r->now_slots[pl->src[j]] = j;
  }
  if (!n) return 0;
  if (!(r->added_slots = malloc(sizeof *r->added_slots * (size_t)n))) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  for (int j = 0; j < r->schema->ncols; j++)
    if (pl->src[j] < 0) r->added_slots[r->nadded++] = j;
  return 0;
}

static int evolve_table(rn_pipeline *p, rn_rel *r, MDB_txn *txn, const desc *old, const desc *now)
{
  int n = r->schema->ncols;
  plan *pl = calloc(1, sizeof *pl);
  if (pl) {
    pl->src = calloc((size_t)n, sizeof *pl->src);
    pl->conv = calloc((size_t)n, 1);
    pl->null_check = calloc((size_t)n, sizeof *pl->null_check);
  }
  int rc = pl && pl->src && pl->conv && pl->null_check ? 0 : rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (!rc) rc = make_plan(p, r, old, now, pl);
  bool check = false;
  for (int j = 0; pl && pl->null_check && j < n; j++) check |= pl->null_check[j];
  if (!rc && (pl->rewrite || check)) rc = rewrite_rows(p, r, txn, old, pl);
  if (!rc && pl->len) rc = add_note(p, "%s: %s", r->name, pl->line);
  if (!rc && pl->rewrite) rc = evolved(p, r, txn); /* derived state may hold its old rows */
  if (!rc) rc = keep_added(p, r, pl, old);
  if (pl) free(pl->src), free(pl->conv), free(pl->null_check);
  free(pl);
  return rc;
}

int rn_evolve_code_changed(rn_pipeline *p, MDB_txn *txn, const char *name)
{
  int rc = keep_evolved(p, txn, name); /* r is declared next: rn_evolve_opened reads the mark */
  return rc ? rc : add_note(p, "%s: its function changed", name);
}

static bool replayable(const rn_rel *r)
{
  return r->kind == RN_REL_JOIN || !r->input || r->input->tablelike;
}

/* The stream r's events come from (r is stateful, not replayable). */
static const rn_rel *stream_of(const rn_rel *r)
{
  const rn_rel *s = r->input;
  while (s->input && s->kind != RN_REL_STREAM) s = s->input;
  return s;
}

/* The evolved input of r, if any (the left first). */
static const rn_rel *evolved_input(const rn_rel *r)
{
  if (r->input && r->input->evolved) return r->input;
  if (r->right && r->right->evolved) return r->right;
  return rn_reads_evolved(r); /* a relation its functions read (evolve_reads.h) */
}

/* In txn: the largest "eg:" stamp given, read from the stamps themselves
 * ("egn" damaged: counting again from 1 could give a relation the stamp
 * it had, and an attach would not see its rows changed). */
static int last_stamp_given(rn_pipeline *p, const rn_rel *r, MDB_txn *txn, uint64_t *n)
{
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn, p->store.meta, &cur);
  if (rc) return rn_store_fail(&p->err, rc, r->name);
  size_t plen = RN_PREFIX_LEN(RN_META_CHANGED_AT);
  MDB_val k = { plen, (void *)RN_META_CHANGED_AT }, v;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0 && k.mv_size >= plen &&
       memcmp(k.mv_data, RN_META_CHANGED_AT, plen) == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    uint64_t at;
    if (v.mv_size == sizeof at && (memcpy(&at, v.mv_data, sizeof at), at > *n)) *n = at;
  }
  mdb_cursor_close(cur);
  return rc && rc != MDB_NOTFOUND ? rn_store_fail(&p->err, rc, r->name) : 0;
}

/* r's rows changed wholesale: a new "eg:" stamp (store.h) in txn. */
static int stamp_changed(rn_pipeline *p, const rn_rel *r, MDB_txn *txn)
{
  MDB_val k = { RN_PREFIX_LEN(RN_META_CHANGED_N), (void *)RN_META_CHANGED_N }, v;
  uint64_t n = 0;
  int rc = mdb_get(txn, p->store.meta, &k, &v);
  if (rc == 0 && v.mv_size == sizeof n) memcpy(&n, v.mv_data, sizeof n);
  else if (rc == 0) rc = last_stamp_given(p, r, txn, &n); /* damaged */
  else if (rc != MDB_NOTFOUND) return rn_store_fail(&p->err, rc, r->name);
  if (rc && rc != MDB_NOTFOUND) return rc;
  n++;
  v = (MDB_val){ sizeof n, &n };
  if ((rc = mdb_put(txn, p->store.meta, &k, &v, 0))) return rn_store_fail(&p->err, rc, r->name);
  char key[RN_NAME_MAX + 8];
  MDB_val nk = { (size_t)snprintf(key, sizeof key, "%s%s", RN_META_CHANGED_AT, r->name), key };
  v = (MDB_val){ sizeof n, &n };
  rc = mdb_put(txn, p->store.meta, &nk, &v, 0);
  return rc ? rn_store_fail(&p->err, rc, r->name) : 0;
}

static int opened(rn_pipeline *p, rn_rel *r, bool created, bool *stale);

int rn_evolve_opened(rn_pipeline *p, rn_rel *r, MDB_txn *txn, bool created, bool *stale)
{
  int rc = r->kind == RN_REL_TABLE ? check_rename_cycles(p, r) : 0; /* also where nothing else changed */
  if (!rc) rc = opened(p, r, created, stale);
  return rc || !r->evolved ? rc : stamp_changed(p, r, txn);
}

static int opened(rn_pipeline *p, rn_rel *r, bool created, bool *stale)
{
  const rn_rel *in = evolved_input(r);
  bool own = marked(p, r->name);
  if (own || created) r->evolved = true, r->evolved_by = r->name; /* new: what a drop left over it is stale */
  else if (in) r->evolved = true, r->evolved_by = in->evolved_by;
  if (!r->stateful || created || !(own || in || p->evolved_all)) return 0;
  if (replayable(r)) {
    *stale = true;
    r->evolved = true; /* its rows may change: rebuilt, keeping the ids of rows whose key stays */
    if (!r->evolved_by) r->evolved_by = r->name;
    if (own || !in || !in->evolved_by) return add_note(p, "%s: rebuilt from its inputs", r->name);
    return add_note(p, "%s: rebuilt from its inputs (\"%s\" changed)", r->name, in->evolved_by);
  }
  r->evolved = false; /* kept as it is: what reads it reads what it holds */
  r->evolved_by = NULL;
  const char *by = in && in->evolved_by ? in->evolved_by : own ? r->name : NULL;
  char what[RN_NAME_MAX + 8];
  snprintf(what, sizeof what, by ? "\"%s\"" : "%s", by ? by : "a table");
  return add_note(p, "%s: kept, not rebuilt: %s changed, but a rebuild would replay the stream \"%s\", whose "
                  "events are not kept; it holds what it counted before (p:drop(\"%s\") or runnel drop %s %s starts "
                  "it empty)", r->name, what, stream_of(r)->name, r->name, p->store.path, r->name);
}

/* RN_ESCHEMA: r, stateful over a stream, cannot be replayed. */
static int not_replayable(rn_pipeline *p, const rn_rel *r)
{
  char over[2 * RN_NAME_MAX + 64]; /* the stream, or what it reads that reads one */
  const rn_rel *s = stream_of(r);
  if (s == r->input) snprintf(over, sizeof over, "the stream \"%s\"", s->name);
  else snprintf(over, sizeof over, "\"%s\", which reads the stream \"%s\",", r->input->name, s->name);
  return rn_err_set(&p->err, RN_ESCHEMA,
                    "relation \"%s\": its declaration changed, and %s %s over %s cannot be rebuilt "
                    "(the stream's events are not kept): drop it to start it empty (p:drop(\"%s\") or runnel drop "
                    "%s %s), or keep its old declaration", r->name, r->kind == RN_REL_AGGREGATE ? "an" : "a",
                    rn_relkind_name(r->kind), over, r->name, p->store.path, r->name);
}

int rn_evolve_decl_changed(rn_pipeline *p, rn_rel *r)
{
  if (!replayable(r)) return not_replayable(p, r);
  size_t len = strlen(r->name);
  char *last = p->nnotes ? p->notes[p->nnotes - 1] : NULL; /* rn_evolve_opened's, in this declaration */
  if (last && strncmp(last, r->name, len) == 0 && strncmp(last + len, ": rebuilt from its inputs", 25) == 0)
    free(p->notes[--p->nnotes]); /* this one says it */
  int rc = add_note(p, "%s: its declaration changed: rebuilt from its inputs", r->name);
  return rc ? rc : evolved(p, r, p->store.wtxn); /* what is declared over r holds its old rows */
}

int rn_evolve(rn_pipeline *p, rn_rel *r, MDB_txn *txn, const MDB_val *k, const MDB_val *stored,
              const msgpack_sbuffer *declared, bool *rebuild)
{
  *rebuild = false;
  msgpack_zone z;
  if (!rn_zone_init(&z, 4096)) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  char *copy = malloc(stored->mv_size ? stored->mv_size : 1); /* LMDB's bytes move with our writes */
  desc old, now;
  int rc = copy ? 0 : rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (!rc) memcpy(copy, stored->mv_data, stored->mv_size);
  if (!rc && (!read_desc(copy, stored->mv_size, &z, &old) || !read_desc(declared->data, declared->size, &z, &now)))
    rc = rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: the catalogue entry of relation \"%s\" is malformed",
                    p->store.path, r->name);
  if (!rc && old.kind != now.kind)
    rc = rn_err_set(&p->err, RN_ESCHEMA,
                    "relation \"%s\": the state at %s holds it as kind %s, declared now as kind %s; drop it "
                    "first (p:drop(\"%s\") or runnel drop %s %s)", r->name, p->store.path, rn_relkind_name(old.kind),
                    rn_relkind_name(now.kind), r->name, p->store.path, r->name);
  else if (!rc && r->kind == RN_REL_TABLE)
    rc = evolve_table(p, r, txn, &old, &now);
  else if (!rc && r->stateful && !replayable(r))
    rc = not_replayable(p, r);
  else if (!rc && r->stateful) {
    *rebuild = true; /* as stale state: rebuilt keeping the ids of rows whose key stays (setup) */
    rc = add_note(p, "%s: its declaration changed: rebuilt from its inputs", r->name);
    if (!rc) rc = evolved(p, r, txn); /* what is declared over r holds its old rows: rebuilt too */
  } else if (!rc) {
    rc = add_note(p, "%s: its declaration changed", r->name);
    if (!rc) rc = evolved(p, r, txn); /* state declared over it holds rows made from its old ones */
  }
  MDB_val v = { declared->size, declared->data };
  if (!rc && (rc = mdb_put(txn, p->store.meta, (MDB_val *)k, &v, 0))) rc = rn_store_fail(&p->err, rc, r->name);
  free(copy);
  rn_zone_destroy(&z);
  return rc;
}

int rn_evolve_select_changed(rn_pipeline *p, rn_rel *r, MDB_txn *txn)
{
  int rc = add_note(p, "%s: its declaration changed", r->name);
  return rc ? rc : evolved(p, r, txn); /* state declared over it holds rows made from its old ones */
}

/* ---- renames ---- */

int rn_evolve_alter(rn_pipeline *p, const char *rel, const char *from, const char *to)
{
  if (rn_find(p, rel)) /* it is not declared again in p: the rename would wait for nothing */
    return rn_err_set(&p->err, RN_EMISUSE,
                      "alter: relation \"%s\" is declared already in this pipeline, and a rename applies when it is "
                      "declared: call p:alter before declaring it", rel);
  return rn_evolve_rename(p, rel, from, to);
}

const char *rn_evolve_renamed_from(const rn_pipeline *p, const char *rel, const char *to)
{
  for (int i = 0; i < p->nrenames; i++)
    if (strcmp(p->renames[i].rel, rel) == 0 && strcmp(p->renames[i].to, to) == 0) return p->renames[i].from;
  return NULL;
}

int rn_evolve_rename(rn_pipeline *p, const char *rel, const char *from, const char *to)
{
  if (p->nrenames == p->renamecap) {
    int cap = p->renamecap ? p->renamecap * 2 : 4;
    rn_rename *a = realloc(p->renames, (size_t)cap * sizeof *a);
    if (!a) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
    p->renames = a;
    p->renamecap = cap;
  }
  rn_rename *rn = &p->renames[p->nrenames];
  rn->rel = strdup(rel), rn->from = strdup(from), rn->to = strdup(to);
  if (!rn->rel || !rn->from || !rn->to) {
    free(rn->rel), free(rn->from), free(rn->to);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  p->nrenames++;
  return 0;
}

void rn_evolve_forget(rn_pipeline *p, int nnotes, size_t nmarks)
{
  while (p->nnotes > nnotes) free(p->notes[--p->nnotes]);
  p->evolved_len = nmarks;
}

void rn_evolve_free(rn_pipeline *p)
{
  for (int i = 0; i < p->nrenames; i++) free(p->renames[i].rel), free(p->renames[i].from), free(p->renames[i].to);
  free(p->renames);
  for (int i = 0; i < p->nnotes; i++) free(p->notes[i]);
  free(p->notes);
  free(p->evolved_marks);
  free(p->code_changed);
  free(p->code_pending.name), free(p->code_pending.framed); /* a record no declaration took */
}
