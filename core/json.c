/* json.c — JSON through jansson (json.h). */
#include "json.h"

#include <jansson.h>
#include <string.h>

static int convert(json_t *j, msgpack_object *out, msgpack_zone *z, int depth)
{
  if (depth > 64) return -1;
  switch (json_typeof(j)) {
  case JSON_NULL: out->type = MSGPACK_OBJECT_NIL; return 0;
  case JSON_TRUE: case JSON_FALSE:
    out->type = MSGPACK_OBJECT_BOOLEAN;
    out->via.boolean = json_is_true(j);
    return 0;
  case JSON_INTEGER: {
    json_int_t i = json_integer_value(j);
    if (i >= 0) { out->type = MSGPACK_OBJECT_POSITIVE_INTEGER; out->via.u64 = (uint64_t)i; }
    else { out->type = MSGPACK_OBJECT_NEGATIVE_INTEGER; out->via.i64 = i; }
    return 0;
  }
  case JSON_REAL:
    out->type = MSGPACK_OBJECT_FLOAT64;
    out->via.f64 = json_real_value(j);
    return 0;
  case JSON_STRING: {
    size_t n = json_string_length(j);
    char *s = rn_zone_malloc_no_align(z, n ? n : 1);
    if (!s) return -1;
    memcpy(s, json_string_value(j), n);
    out->type = MSGPACK_OBJECT_STR;
    out->via.str.ptr = s;
    out->via.str.size = (uint32_t)n;
    return 0;
  }
  case JSON_ARRAY: {
    size_t n = json_array_size(j);
    msgpack_object *items = rn_zone_malloc(z, sizeof *items * (n ? n : 1));
    if (!items) return -1;
    for (size_t i = 0; i < n; i++)
      if (convert(json_array_get(j, i), &items[i], z, depth + 1)) return -1;
    out->type = MSGPACK_OBJECT_ARRAY;
    out->via.array.size = (uint32_t)n;
    out->via.array.ptr = items;
    return 0;
  }
  case JSON_OBJECT: {
    size_t n = json_object_size(j), i = 0;
    msgpack_object_kv *kv = rn_zone_malloc(z, sizeof *kv * (n ? n : 1));
    if (!kv) return -1;
    const char *key;
    size_t klen;
    json_t *val;
    json_object_keylen_foreach(j, key, klen, val) {
      char *k = rn_zone_malloc_no_align(z, klen ? klen : 1);
      if (!k) return -1;
      memcpy(k, key, klen);
      kv[i].key.type = MSGPACK_OBJECT_STR;
      kv[i].key.via.str.ptr = k;
      kv[i].key.via.str.size = (uint32_t)klen;
      if (convert(val, &kv[i].val, z, depth + 1)) return -1;
      i++;
    }
    out->type = MSGPACK_OBJECT_MAP;
    out->via.map.size = (uint32_t)i;
    out->via.map.ptr = kv;
    return 0;
  }
  }
  return -1;
}

int rn_json_parse(const char *text, size_t len, msgpack_object *out, msgpack_zone *z, rn_err *e)
{
  json_error_t jerr;
  json_t *j = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
  if (!j) return rn_err_set(e, RN_EINVAL, "malformed JSON at column %d: %s", jerr.column, jerr.text);
  int rc = convert(j, out, z, 0);
  json_decref(j);
  if (rc) return rn_err_set(e, RN_EINVAL, "JSON nested more than 64 deep or out of memory");
  return 0;
}
