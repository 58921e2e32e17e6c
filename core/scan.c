/* scan.c — current rows of any table-like relation (scan.h), through its
 * operator (ops.h). */
#include "scan.h"

#include <string.h>

#include "buf.h"
#include "key.h"
#include "row.h"
#include "rowsort.h"

int rn_rel_scan(rn_rel *rel, rn_scan_fn fn, void *ctx)
{
  if (rel->tablelike && rel->ops->scan) return rel->ops->scan(rel, fn, ctx);
  if (rel->kind == RN_REL_LOOKUP)
    return rn_err_set(&rel->p->err, RN_EINVAL,
                      "%s: a lookup holds no rows to read: they are fetched from its source when a join asks for them",
                      rel->name);
  return rn_err_set(&rel->p->err, RN_EINVAL, "%s: a stream holds no rows to read", rel->name);
}

int rn_rel_scan_ordered(rn_rel *rel, rn_scan_fn fn, void *ctx)
{
  if (rel->kind != RN_REL_JOIN && rel->kind != RN_REL_FILTER && rel->kind != RN_REL_MAP)
    return rn_rel_scan(rel, fn, ctx);
  rn_rowsort s;
  int rc = rn_rowsort_init(&s, rel->schema, rel->name, &rel->p->err);
  if (!rc) rc = rn_rel_scan(rel, rn_rowsort_add, &s);
  if (!rc) rc = rn_rowsort_each(&s, fn, ctx);
  rn_rowsort_free(&s);
  return rc;
}

rn_rel *rn_rel_key_source(rn_rel *rel)
{
  rn_rel *k = (rel->kind == RN_REL_TOP || rel->kind == RN_REL_INDEX) ? rel->input : rel;
  return k && k->schema->nkey > 0 ? k : NULL;
}

typedef struct finding {
  rn_rel *rel;
  const rn_schema *ks;     /* the key's schema (rn_rel_key_source) */
  int *slots;              /* rel's slot of each of ks's key columns, in key order */
  msgpack_object *vals;    /* ks->ncols values: a row's key columns */
  const char *key;         /* the key looked for, encoded */
  size_t klen;
  msgpack_sbuffer kb;      /* a row's key, encoded */
  msgpack_zone zone;
  msgpack_sbuffer *row;
  uint64_t id;
  int found;
} finding;

/* Stops the scan (1) at the row whose key is f->key. */
static int find_key(void *ctx, uint64_t id, const char *row, size_t len)
{
  finding *f = ctx;
  const msgpack_object *rv = rn_row_unpack(row, len, f->rel->schema->ncols, &f->zone);
  if (!rv) return rn_err_set(&f->rel->p->err, RN_ESTORE, "%s: a row does not decode", f->rel->name);
  for (int i = 0; i < f->ks->nkey; i++) f->vals[f->ks->key_slots[i]] = rv[f->slots[i]];
  msgpack_sbuffer_clear(&f->kb);
  int rc = rn_key_encode(f->ks, f->vals, &f->kb);
  msgpack_zone_clear(&f->zone);
  if (rc || rn_oom()) return rn_err_set(&f->rel->p->err, RN_ENOMEM, "out of memory");
  if (f->kb.size != f->klen || memcmp(f->kb.data, f->key, f->klen)) return 0;
  msgpack_sbuffer_clear(f->row);
  rn_buf_write(f->row, row, len);
  f->id = id;
  f->found = 1;
  return 1;
}

int rn_rel_get(rn_rel *rel, msgpack_object *vals, uint8_t *given, msgpack_sbuffer *row, uint64_t *id,
               int *found)
{
  rn_pipeline *p = rel->p;
  rn_rel *kr = rn_rel_key_source(rel);
  *found = 0;
  if (!kr) return rn_err_set(&p->err, RN_EINVAL, "%s: get needs a relation with a key", rel->name);
  const rn_schema *ks = kr->schema;
  int rc = rn_row_normalize(ks, rel->name, RN_ROW_KEY, vals, given, &p->scratch, &p->err);
  if (rc) return rc;
  finding f = { .rel = rel, .ks = ks, .row = row };
  msgpack_sbuffer key;
  msgpack_sbuffer_init(&key);
  msgpack_sbuffer_init(&f.kb);
  bool zone = rn_zone_init(&f.zone, 1024);
  f.slots = malloc(sizeof *f.slots * (size_t)ks->nkey);
  f.vals = calloc((size_t)ks->ncols, sizeof *f.vals);
  if (!zone || !f.slots || !f.vals || rn_key_encode(ks, vals, &key) || rn_oom())
    rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  for (int i = 0; !rc && i < ks->nkey; i++) {
    const rn_column *c = &ks->cols[ks->key_slots[i]];
    f.slots[i] = rn_schema_slot(rel->schema, c->name, strlen(c->name));
    if (f.slots[i] < 0) rc = rn_err_set(&p->err, RN_EINVAL, "%s: get: no column \"%s\" to read its key by", rel->name, c->name);
  }
  f.key = key.data, f.klen = key.size;
  if (!rc) rc = rn_rel_scan(rel, find_key, &f);
  if (rc == 1) rc = 0;
  *found = f.found;
  *id = f.id;
  free(f.slots);
  free(f.vals);
  if (zone) rn_zone_destroy(&f.zone);
  msgpack_sbuffer_destroy(&f.kb);
  msgpack_sbuffer_destroy(&key);
  if (p->state == RN_IDLE) msgpack_zone_clear(&p->scratch);
  return rc;
}
