/* schema.c — declaring columns, keys and defaults. */
#include "schema.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "row.h"

static const char *const type_names[] = {
  [RN_T_INT] = "int", [RN_T_FLOAT] = "float", [RN_T_STRING] = "string",
  [RN_T_BOOL] = "bool", [RN_T_BYTES] = "bytes", [RN_T_LIST] = "list",
  [RN_T_MAP] = "map", [RN_T_ANY] = "any", [RN_T_STRUCT] = "struct",
};

const char *rn_type_name(rn_type t) { return type_names[t]; }

int rn_type_parse(const char *name, rn_type *out)
{
  for (int t = RN_T_INT; t <= RN_T_ANY; t++)
    if (strcmp(name, type_names[t]) == 0) { *out = (rn_type)t; return 0; }
  return -1;
}

bool rn_type_is_scalar(rn_type t)
{
  return t == RN_T_INT || t == RN_T_FLOAT || t == RN_T_STRING ||
         t == RN_T_BOOL || t == RN_T_BYTES;
}

rn_schema *rn_schema_new(void)
{
  rn_schema *s = calloc(1, sizeof *s);
  if (s && !msgpack_zone_init(&s->zone, 1024)) { free(s); return NULL; }
  return s;
}

void rn_schema_free(rn_schema *s)
{
  if (!s) return;
  for (int i = 0; i < s->ncols; i++) {
    free(s->cols[i].name);
    rn_schema_free(s->cols[i].fields);
  }
  free(s->cols);
  free(s->key_slots);
  msgpack_zone_destroy(&s->zone);
  free(s);
}

int rn_schema_slot(const rn_schema *s, const char *name, size_t len)
{
  for (int i = 0; i < s->ncols; i++)
    if (s->cols[i].name_len == len && rn_same_bytes(s->cols[i].name, name, len))
      return i;
  return -1;
}

int rn_schema_add(rn_schema *s, const char *name, size_t len, rn_type type,
                  bool nullable, rn_schema *fields, rn_err *e)
{
  if (len == 0 || memchr(name, '\0', len)) {
    rn_schema_free(fields);
    return rn_err_set(e, RN_EINVAL, "column names must be non-empty and hold no NUL byte");
  }
  if (!rn_utf8_valid(name, len)) { /* names are UTF-8: JSON (NDJSON, CDC, SQLite's any) writes no other */
    rn_schema_free(fields);
    char quoted[256];
    return rn_err_set(e, RN_EINVAL, "column name %s is not valid UTF-8", rn_json_quote(quoted, sizeof quoted, name, len));
  }
  if (s->ncols >= RN_COLUMNS_MAX) {
    rn_schema_free(fields);
    return rn_err_set(e, RN_EINVAL, "too many columns: the limit is %d", RN_COLUMNS_MAX);
  }
  if (rn_schema_slot(s, name, len) >= 0) {
    rn_schema_free(fields);
    return rn_err_set(e, RN_EINVAL, "duplicate column name \"%.*s\"", (int)len, name);
  }
  if (s->ncols == s->cap) {
    int cap = s->cap ? s->cap * 2 : 8;
    rn_column *cols = realloc(s->cols, (size_t)cap * sizeof *cols);
    if (!cols) { rn_schema_free(fields); return rn_err_set(e, RN_ENOMEM, "out of memory"); }
    s->cols = cols;
    s->cap = cap;
  }
  rn_column *c = &s->cols[s->ncols];
  memset(c, 0, sizeof *c);
  c->name = malloc(len + 1);
  if (!c->name) { rn_schema_free(fields); return rn_err_set(e, RN_ENOMEM, "out of memory"); }
  memcpy(c->name, name, len);
  c->name[len] = '\0';
  c->name_len = (uint32_t)len;
  c->type = fields ? RN_T_STRUCT : type;
  c->nullable = nullable;
  c->fields = fields;
  return s->ncols++;
}

int rn_schema_copy_columns(rn_schema *dst, const rn_schema *src, bool all_nullable, rn_err *e)
{
  for (int i = 0; i < src->ncols; i++) {
    const rn_column *c = &src->cols[i];
    rn_schema *fields = NULL;
    if (c->fields) {
      fields = rn_schema_new();
      if (!fields) return rn_err_set(e, RN_ENOMEM, "out of memory");
      if (rn_schema_copy_columns(fields, c->fields, false, e)) { rn_schema_free(fields); return e->code; }
    }
    bool nullable = all_nullable || c->nullable;
    if (rn_schema_add(dst, c->name, c->name_len, c->type, nullable, fields, e) < 0) return e->code;
  }
  return 0;
}

/* A float default of NaN: no key can hold it (key.c), so a key column
 * with it would refuse every row that leaves it out. */
static bool nan_default(const rn_column *c)
{
  return c->has_default && (c->defval.type == MSGPACK_OBJECT_FLOAT32 || c->defval.type == MSGPACK_OBJECT_FLOAT64) &&
         isnan(c->defval.via.f64);
}

static int nan_key_default(const rn_column *c, const char *rel, rn_err *e)
{
  return rn_err_set(e, RN_EINVAL, "%s: key column \"%s\": its default is NaN, which cannot be part of a key", rel,
                    c->name);
}

int rn_schema_set_default(rn_schema *s, int slot, const msgpack_object *v,
                          const char *rel, rn_err *e)
{
  rn_column *c = &s->cols[slot];
  msgpack_object val = *v;
  if (val.type == MSGPACK_OBJECT_NIL && !c->nullable)
    return rn_err_set(e, RN_EINVAL, "%s: column \"%s\": default is null but the column is not nullable",
                      rel, c->name);
  if (rn_value_normalize(c, &val, &s->zone, rel, e) != 0) return e->code;
  /* Deep-copy into the schema's zone: the caller's object may be transient. */
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, rn_buf_write);
  msgpack_pack_object(&pk, val);
  char *copy = rn_zone_malloc(&s->zone, sb.size);
  size_t off = 0;
  int rc = copy ? 0 : RN_ENOMEM;
  if (copy) {
    memcpy(copy, sb.data, sb.size);
    if (rn_unpack(copy, sb.size, &off, &s->zone, &c->defval) != MSGPACK_UNPACK_SUCCESS)
      rc = RN_ENOMEM;
  }
  msgpack_sbuffer_destroy(&sb);
  if (rc) return rn_err_set(e, rc, "out of memory");
  c->has_default = true;
  return c->is_key && nan_default(c) ? nan_key_default(c, rel, e) : 0;
}

int rn_schema_set_key(rn_schema *s, const int *slots, int n, const char *rel, rn_err *e)
{
  int *ks = malloc((size_t)(n ? n : 1) * sizeof *ks);
  if (!ks) return rn_err_set(e, RN_ENOMEM, "out of memory");
  for (int i = 0; i < n; i++) {
    rn_column *c = &s->cols[slots[i]];
    if (!rn_type_is_scalar(c->type)) {
      free(ks);
      return rn_err_set(e, RN_EINVAL, "%s: key column \"%s\" has type %s; keys are int, float, string, bool or bytes",
                        rel, c->name, rn_type_name(c->type));
    }
    if (c->is_key) {
      free(ks);
      return rn_err_set(e, RN_EINVAL, "%s: key column \"%s\" named twice", rel, c->name);
    }
    if (c->nullable) {
      free(ks);
      return rn_err_set(e, RN_EINVAL, "%s: key column \"%s\" cannot be nullable", rel, c->name);
    }
    if (nan_default(c)) {
      free(ks);
      return nan_key_default(c, rel, e);
    }
    c->is_key = true;
    ks[i] = slots[i];
  }
  free(s->key_slots);
  s->key_slots = ks;
  s->nkey = n;
  return 0;
}

/* |ncols|[name,type,nullable,default|nil,fields|nil]...|key slots...| */
/* A description as rn_schema_describe writes it — |[columns]|[key slots]|,
 * a column |name|type|nullable|default|fields or nil| — read back from a
 * state that may be damaged or crafted: anything else is refused, never
 * read as zeros. depth bounds nested structs. */
bool rn_schema_desc_valid(const msgpack_object *d, int depth)
{
  if (depth > 64 || d->type != MSGPACK_OBJECT_ARRAY || d->via.array.size != 2) return false;
  const msgpack_object *cols = &d->via.array.ptr[0], *key = &d->via.array.ptr[1];
  if (cols->type != MSGPACK_OBJECT_ARRAY || key->type != MSGPACK_OBJECT_ARRAY) return false;
  if (cols->via.array.size > RN_COLUMNS_MAX || key->via.array.size > cols->via.array.size) return false;
  for (uint32_t i = 0; i < cols->via.array.size; i++) {
    const msgpack_object *c = &cols->via.array.ptr[i];
    if (c->type != MSGPACK_OBJECT_ARRAY || c->via.array.size < 5) return false;
    const msgpack_object *f = c->via.array.ptr;
    if (f[0].type != MSGPACK_OBJECT_STR || f[1].type != MSGPACK_OBJECT_STR || f[2].type != MSGPACK_OBJECT_BOOLEAN)
      return false;
    if (f[4].type != MSGPACK_OBJECT_NIL && !rn_schema_desc_valid(&f[4], depth + 1)) return false;
  }
  for (uint32_t k = 0; k < key->via.array.size; k++)
    if (key->via.array.ptr[k].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
        key->via.array.ptr[k].via.u64 >= cols->via.array.size)
      return false;
  return true;
}

int rn_schema_describe(const rn_schema *s, msgpack_packer *pk)
{
  msgpack_pack_array(pk, 2);
  msgpack_pack_array(pk, (size_t)s->ncols);
  for (int i = 0; i < s->ncols; i++) {
    const rn_column *c = &s->cols[i];
    msgpack_pack_array(pk, 5);
    msgpack_pack_str_with_body(pk, c->name, c->name_len);
    msgpack_pack_str_with_body(pk, rn_type_name(c->type), strlen(rn_type_name(c->type)));
    if (c->nullable) msgpack_pack_true(pk); else msgpack_pack_false(pk);
    if (c->has_default) msgpack_pack_object(pk, c->defval); else msgpack_pack_nil(pk);
    if (c->fields) rn_schema_describe(c->fields, pk); else msgpack_pack_nil(pk);
  }
  msgpack_pack_array(pk, (size_t)s->nkey);
  for (int i = 0; i < s->nkey; i++) msgpack_pack_int(pk, s->key_slots[i]);
  return 0;
}
