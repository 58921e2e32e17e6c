/* api.c — the C API for hosts (runnel.h): declaring from C, pushing msgpack
 * maps keyed by external names, subscribing C callbacks. */
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "row.h"

static int declare(rn_pipeline *p, const char *name, rn_relkind kind, const rn_column_def *cols,
                   int ncols, const char *const *key, int nkey, rn_rel **out)
{
  rn_err_clear(&p->err);
  rn_schema *s = rn_schema_new();
  if (!s) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  for (int i = 0; i < ncols; i++) {
    rn_type t;
    if (!cols[i].name || !cols[i].type || rn_type_parse(cols[i].type, &t) != 0) {
      rn_schema_free(s);
      return rn_err_set(&p->err, RN_EINVAL, "%s: column #%d: unknown type %s", name, i + 1,
                        cols[i].type ? cols[i].type : "(null)");
    }
    if (rn_schema_add(s, cols[i].name, strlen(cols[i].name), t, cols[i].nullable != 0, NULL, &p->err) < 0) {
      rn_err_prefix(&p->err, name);
      rn_schema_free(s);
      return p->err.code;
    }
  }
  int slots[nkey > 0 ? nkey : 1];
  for (int i = 0; i < nkey; i++) {
    slots[i] = key[i] ? rn_schema_slot(s, key[i], strlen(key[i])) : -1;
    if (slots[i] < 0) {
      rn_schema_free(s);
      return rn_err_set(&p->err, RN_EINVAL, "%s: key column \"%s\" is not a declared column", name,
                        key[i] ? key[i] : "(null)");
    }
  }
  if (nkey > 0 && rn_schema_set_key(s, slots, nkey, name, &p->err)) {
    rn_schema_free(s);
    return p->err.code;
  }
  return rn_declare_source(p, name, kind, s, out);
}

RN_API int rn_declare_table(rn_pipeline *p, const char *name, const rn_column_def *cols, int ncols,
                            const char *const *key, int nkey, rn_rel **out)
{
  return declare(p, name, RN_REL_TABLE, cols, ncols, key, nkey, out);
}

RN_API int rn_declare_stream(rn_pipeline *p, const char *name, const rn_column_def *cols, int ncols,
                             rn_rel **out)
{
  return declare(p, name, RN_REL_STREAM, cols, ncols, NULL, 0, out);
}

RN_API rn_rel *rn_relation(const rn_pipeline *p, const char *name)
{
  return name ? rn_find(p, name) : NULL;
}

RN_API const char *rn_relation_name(const rn_rel *rel)
{
  return rel->name;
}

/* A map keyed by external names into slot values (in the scratch zone). */
static int map_to_slots(rn_pipeline *p, rn_rel *rel, const msgpack_object *m,
                        msgpack_object **vals, uint8_t **given)
{
  const rn_schema *s = rel->schema;
  if (m->type != MSGPACK_OBJECT_MAP)
    return rn_err_set(&p->err, RN_EINVAL, "%s: a change is a msgpack map keyed by column names, got %s",
                      rel->name, rn_value_kind(m));
  size_t n = (size_t)(s->ncols ? s->ncols : 1);
  *vals = rn_zone_malloc(&p->scratch, sizeof **vals * n);
  *given = rn_zone_malloc(&p->scratch, n);
  if (!*vals || !*given) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  memset(*given, 0, n);
  for (uint32_t i = 0; i < m->via.map.size; i++) {
    const msgpack_object *k = &m->via.map.ptr[i].key;
    int slot = k->type == MSGPACK_OBJECT_STR ? rn_schema_slot(s, k->via.str.ptr, k->via.str.size) : -1;
    if (slot < 0) {
      if (k->type == MSGPACK_OBJECT_STR)
        return rn_err_set(&p->err, RN_EINVAL, "%s: unknown column \"%.*s\"", rel->name, (int)k->via.str.size,
                          k->via.str.ptr);
      return rn_err_set(&p->err, RN_EINVAL, "%s: column names are strings, got %s", rel->name, rn_value_kind(k));
    }
    (*vals)[slot] = m->via.map.ptr[i].val;
    (*given)[slot] = 1;
  }
  return 0;
}

int rn_push_object(rn_pipeline *p, rn_rel *rel, rn_op op, const msgpack_object *m)
{
  rn_err_clear(&p->err);
  if (p->state == RN_APPLYING || p->state == RN_COMMITTING)
    return rn_err_set(&p->err, RN_EMISUSE, "tables cannot be changed from inside a callback (filter, map or sink)");
  msgpack_object *vals = NULL;
  uint8_t *given = NULL;
  int rc = map_to_slots(p, rel, m, &vals, &given);
  if (rc) return rn_group_fail(p, rc, p->err.msg); /* GROUP-2: bad input rolls the group back */
  switch (op) {
  case RN_OP_INSERT: return rn_table_insert(rel, vals, given);
  case RN_OP_UPDATE: return rn_table_update(rel, vals, given);
  case RN_OP_UPSERT: return rn_table_upsert(rel, vals, given);
  case RN_OP_DELETE: return rn_table_delete(rel, vals, given);
  }
  return rn_group_fail(p, RN_EINVAL, "rn_push: unknown op");
}

RN_API int rn_push(rn_pipeline *p, rn_rel *rel, rn_op op, const void *map, size_t len)
{
  msgpack_object m;
  size_t off = 0;
  /* Checked before decoding: msgpack-c allocates what a header claims. */
  if (!map || rn_msgpack_size(map, len) != len ||
      rn_unpack(map, len, &off, &p->scratch, &m) != MSGPACK_UNPACK_SUCCESS) {
    rn_err_set(&p->err, RN_EINVAL, "%s: the change is not valid msgpack", rel->name);
    return rn_group_fail(p, RN_EINVAL, p->err.msg);
  }
  return rn_push_object(p, rel, op, &m);
}

RN_API int rn_insert(rn_pipeline *p, rn_rel *rel, const void *map, size_t len) { return rn_push(p, rel, RN_OP_INSERT, map, len); }
RN_API int rn_update(rn_pipeline *p, rn_rel *rel, const void *map, size_t len) { return rn_push(p, rel, RN_OP_UPDATE, map, len); }
RN_API int rn_upsert(rn_pipeline *p, rn_rel *rel, const void *map, size_t len) { return rn_push(p, rel, RN_OP_UPSERT, map, len); }
RN_API int rn_delete(rn_pipeline *p, rn_rel *rel, const void *map, size_t len) { return rn_push(p, rel, RN_OP_DELETE, map, len); }

/* ---- subscriptions: rows as maps keyed by external names ---- */

static void pack_value_as_map(msgpack_packer *pk, const msgpack_object *v, const rn_column *c);

static void pack_struct(msgpack_packer *pk, const msgpack_object *v, const rn_schema *fields)
{
  msgpack_pack_map(pk, (size_t)fields->ncols);
  for (int i = 0; i < fields->ncols; i++) {
    const rn_column *c = &fields->cols[i];
    msgpack_pack_str_with_body(pk, c->name, c->name_len);
    if ((uint32_t)i < v->via.array.size) pack_value_as_map(pk, &v->via.array.ptr[i], c);
    else msgpack_pack_nil(pk);
  }
}

static void pack_value_as_map(msgpack_packer *pk, const msgpack_object *v, const rn_column *c)
{
  if (c->type == RN_T_STRUCT && v->type == MSGPACK_OBJECT_ARRAY) pack_struct(pk, v, c->fields);
  else msgpack_pack_object(pk, *v);
}

/* Appends a stored row of s as a map keyed by external names. */
int rn_row_to_map(const rn_schema *s, const char *row, size_t len, msgpack_zone *z, msgpack_sbuffer *out)
{
  const msgpack_object *v = rn_row_unpack(row, len, s->ncols, z);
  if (!v) return -1;
  msgpack_packer pk;
  msgpack_packer_init(&pk, out, rn_buf_write);
  msgpack_pack_map(&pk, (size_t)s->ncols);
  for (int i = 0; i < s->ncols; i++) {
    msgpack_pack_str_with_body(&pk, s->cols[i].name, s->cols[i].name_len);
    pack_value_as_map(&pk, &v[i], &s->cols[i]);
  }
  return 0;
}

typedef struct csub {
  rn_callback fn;
  void *ctx;
  msgpack_sbuffer row, old;
  msgpack_zone zone;
} csub;

static void free_csub(void *ctx)
{
  csub *s = ctx;
  msgpack_sbuffer_destroy(&s->row);
  msgpack_sbuffer_destroy(&s->old);
  msgpack_zone_destroy(&s->zone);
  free(s);
}

static int csub_change(void *ctx, rn_rel *rel, const rn_change *c, const rn_sink_info *info, rn_err *e)
{
  csub *s = ctx;
  msgpack_sbuffer_clear(&s->row);
  msgpack_sbuffer_clear(&s->old);
  if ((c->row && rn_row_to_map(rel->schema, c->row, c->row_len, &s->zone, &s->row)) ||
      (c->old && rn_row_to_map(rel->schema, c->old, c->old_len, &s->zone, &s->old))) {
    msgpack_zone_clear(&s->zone);
    return rn_err_set(e, RN_ESTORE, "%s: a row could not be decoded", rel->name);
  }
  msgpack_zone_clear(&s->zone);
  rn_event ev = { (int)c->verb, info->id, info->seq, info->n,
                  c->row ? s->row.data : NULL, c->row ? s->row.size : 0,
                  c->old ? s->old.data : NULL, c->old ? s->old.size : 0 };
  int rc = s->fn(s->ctx, &ev);
  return rc ? rn_err_set(e, RN_ECALLBACK, "%s: subscriber returned %d", rel->name, rc) : 0;
}

RN_API int rn_subscribe(rn_pipeline *p, rn_rel *rel, rn_callback fn, void *ctx)
{
  rn_err_clear(&p->err);
  if (!fn) return rn_err_set(&p->err, RN_EINVAL, "%s: rn_subscribe needs a callback", rel->name);
  csub *s = calloc(1, sizeof *s);
  if (!s || !msgpack_zone_init(&s->zone, 4096)) {
    free(s);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  s->fn = fn;
  s->ctx = ctx;
  msgpack_sbuffer_init(&s->row);
  msgpack_sbuffer_init(&s->old);
  return rn_sink_add(p, rel, false, csub_change, NULL, s, free_csub);
}
