/* row.c — the one place where values are checked against their columns. */
#include "row.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "key.h"

bool rn_utf8_valid(const char *str, size_t len)
{
  if (len == 0) return true; /* str may be NULL then: msgpack-c gives empty strings none */
  const unsigned char *s = (const unsigned char *)str, *end = s + len;
  while (s < end) {
    unsigned c = *s;
    size_t n;
    unsigned min;
    if (c < 0x80) { s++; continue; }
    else if ((c & 0xE0) == 0xC0) { n = 1; min = 0x80; c &= 0x1F; }
    else if ((c & 0xF0) == 0xE0) { n = 2; min = 0x800; c &= 0x0F; }
    else if ((c & 0xF8) == 0xF0) { n = 3; min = 0x10000; c &= 0x07; }
    else return false;
    if ((size_t)(end - s) <= n) return false;
    for (size_t i = 1; i <= n; i++) {
      if ((s[i] & 0xC0) != 0x80) return false;
      c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
    s += n + 1;
  }
  return true;
}

/* A foreign value's payload names its Lua type. From msgpack input it is
 * anybody's bytes, not NUL-terminated: matched against the names the
 * binding sends, never printed. */
static const char *foreign_kind(const msgpack_object *v)
{
  static const char *const names[] = { "function", "thread", "userdata" };
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (v->via.ext.size == strlen(names[i]) && memcmp(v->via.ext.ptr, names[i], v->via.ext.size) == 0)
      return names[i];
  return "ext";
}

const char *rn_value_kind(const msgpack_object *v)
{
  switch (v->type) {
  case MSGPACK_OBJECT_NIL: return "nil";
  case MSGPACK_OBJECT_BOOLEAN: return "boolean";
  case MSGPACK_OBJECT_POSITIVE_INTEGER: case MSGPACK_OBJECT_NEGATIVE_INTEGER:
  case MSGPACK_OBJECT_FLOAT32: case MSGPACK_OBJECT_FLOAT64: return "number";
  case MSGPACK_OBJECT_STR: return "string";
  case MSGPACK_OBJECT_BIN: return "bytes";
  case MSGPACK_OBJECT_ARRAY: case MSGPACK_OBJECT_MAP: return "table";
  case MSGPACK_OBJECT_EXT:
    return v->via.ext.type == RN_EXT_FOREIGN ? foreign_kind(v) : "ext";
  }
  return "?";
}


static void set_int(msgpack_object *v, int64_t i)
{
  if (i >= 0) { v->type = MSGPACK_OBJECT_POSITIVE_INTEGER; v->via.u64 = (uint64_t)i; }
  else { v->type = MSGPACK_OBJECT_NEGATIVE_INTEGER; v->via.i64 = i; }
}

/* A path like `column "pos" field "x"` for messages about nested values. */
typedef struct path { const struct path *up; const char *name; } path;

static void where(const path *p, char *buf, size_t len)
{
  const path *chain[16];
  int n = 0;
  for (const path *q = p; q && n < 16; q = q->up) chain[n++] = q;
  size_t off = 0;
  buf[0] = '\0';
  for (int i = n - 1; i >= 0 && off < len; i--)
    off += (size_t)snprintf(buf + off, len - off, "%s\"%s\"",
                            i == n - 1 ? "column " : " field ", chain[i]->name);
}

const char *rn_value_kind_sent(const msgpack_object *v)
{
  return v->type == MSGPACK_OBJECT_ARRAY ? "a list" : v->type == MSGPACK_OBJECT_MAP ? "a map" : rn_value_kind(v);
}

/* What v is, for a message: "table" (Lua's word, as rn_value_kind says),
 * except where a container of one kind was expected: a list given for a
 * map (or a struct), or a map for a list, is named as such. */
static const char *got_kind(const char *want, const msgpack_object *v)
{
  bool container = !strcmp(want, "list") || !strcmp(want, "map") || !strcmp(want, "struct");
  return container ? rn_value_kind_sent(v) : rn_value_kind(v);
}

static int type_error(rn_err *e, const char *rel, const path *p, const char *want,
                      const msgpack_object *v, const char *extra)
{
  char at[512];
  where(p, at, sizeof at);
  return rn_err_set(e, RN_EINVAL, "%s: %s: expected %s, got %s%s", rel, at, want,
                    got_kind(want, v), extra ? extra : "");
}

/* A whole float in int64 but beyond ±2^53 for an int: every integer
 * there is not a double (9007199254740993 becomes 9007199254740992), so
 * the float may not be the integer meant; an int column takes a float
 * only where it is exact. */
static int inexact_int(rn_err *e, const char *rel, const path *p, const msgpack_object *v)
{
  char extra[256];
  snprintf(extra, sizeof extra, " %.17g as a float: beyond ±2^53 a float is not exact (9007199254740993 would be "
           "9007199254740992 too): give it as an integer", v->via.f64);
  return type_error(e, rel, p, "int", v, extra);
}

/* Whether the integer v is a double exactly (row.h): always within ±2^53;
 * beyond, only when the nearest double converts back to it (2^60 does,
 * 2^53 + 1 does not). The bounds keep the casts back defined. */
bool rn_int_is_float(const msgpack_object *v)
{
  if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER && v->type != MSGPACK_OBJECT_NEGATIVE_INTEGER) return true;
  if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
    if (v->via.u64 <= 9007199254740992ULL) return true;
    double d = (double)v->via.u64;
    return d < 18446744073709551616.0 && (uint64_t)d == v->via.u64;
  }
  if (v->via.i64 >= -9007199254740992LL) return true;
  double d = (double)v->via.i64;
  return d >= -9223372036854775808.0 && (int64_t)d == v->via.i64; /* -2^63 is a double */
}

/* An integer for a float column that no double holds (rn_int_is_float): it
 * would be stored as its nearest double, another number; a float given
 * as such is the caller's rounding. Worded as JSON's refusals are
 * (json_change.c): the value as written, and how to say the float. */
static int inexact_float(rn_err *e, const char *rel, const path *p, const msgpack_object *v)
{
  char num[24], extra[320];
  double d = v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (double)v->via.u64 : (double)v->via.i64;
  if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) snprintf(num, sizeof num, "%llu", (unsigned long long)v->via.u64);
  else snprintf(num, sizeof num, "%lld", (long long)v->via.i64);
  snprintf(extra, sizeof extra, " %s, an integer no float holds: beyond ±2^53 not every integer is a float (this "
           "one would be stored as %.0f): give it as a float (%s.0) to store the nearest one", num, d, num);
  return type_error(e, rel, p, "float", v, extra);
}

/* depth counts the containers around v within its column's value. */
static int too_deep(rn_err *e, const char *rel, const path *p, const msgpack_object *v)
{
  char want[64];
  snprintf(want, sizeof want, "a value nesting at most %d lists, maps or structs", RN_MAX_NESTING);
  return type_error(e, rel, p, want, v, NULL);
}

static int normalize_any(msgpack_object *v, msgpack_zone *z, const char *rel,
                         const path *p, int depth, rn_err *e);
static int normalize_struct(const rn_schema *s, msgpack_object *v, msgpack_zone *z,
                            const char *rel, const path *p, int depth, rn_err *e);

static int normalize_typed(rn_type t, const rn_schema *fields, msgpack_object *v,
                           msgpack_zone *z, const char *rel, const path *p, int depth, rn_err *e)
{
  switch (t) {
  case RN_T_INT:
    if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
      if (v->via.u64 > (uint64_t)INT64_MAX) return type_error(e, rel, p, "int", v, " out of range");
      return 0;
    }
    if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) return 0;
    if (v->type == MSGPACK_OBJECT_FLOAT32 || v->type == MSGPACK_OBJECT_FLOAT64) {
      double d = v->via.f64;
      if (d == floor(d) && fabs(d) < 9007199254740992.0) {
        set_int(v, (int64_t)d);
        return 0;
      }
      if (d == floor(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0)
        return inexact_int(e, rel, p, v);
      char num[96]; /* a whole float past int64 says so, as an integer past it does */
      if (d != d) snprintf(num, sizeof num, " nan"); /* not "-nan": a NaN's sign means nothing */
      else snprintf(num, sizeof num, " %.17g%s", d, d == floor(d) ? " out of range" : "");
      return type_error(e, rel, p, "int", v, num);
    }
    return type_error(e, rel, p, "int", v, NULL);
  case RN_T_FLOAT:
    if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER || v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
      if (!rn_int_is_float(v)) return inexact_float(e, rel, p, v);
      v->via.f64 = v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (double)v->via.u64 : (double)v->via.i64;
    } else if (v->type != MSGPACK_OBJECT_FLOAT32 && v->type != MSGPACK_OBJECT_FLOAT64)
      return type_error(e, rel, p, "float", v, NULL);
    v->type = MSGPACK_OBJECT_FLOAT64;
    v->via.f64 = rn_float_canon(v->via.f64);
    return 0;
  case RN_T_STRING:
    if (v->type != MSGPACK_OBJECT_STR && v->type != MSGPACK_OBJECT_BIN)
      return type_error(e, rel, p, "string", v, NULL);
    if (!rn_utf8_valid(v->via.str.ptr, v->via.str.size))
      return type_error(e, rel, p, "string", v, " that is not valid UTF-8");
    v->type = MSGPACK_OBJECT_STR;
    return 0;
  case RN_T_BYTES:
    if (v->type != MSGPACK_OBJECT_STR && v->type != MSGPACK_OBJECT_BIN)
      return type_error(e, rel, p, "bytes", v, NULL);
    v->type = MSGPACK_OBJECT_BIN;
    return 0;
  case RN_T_BOOL:
    return v->type == MSGPACK_OBJECT_BOOLEAN ? 0 : type_error(e, rel, p, "bool", v, NULL);
  case RN_T_LIST:
    if (v->type != MSGPACK_OBJECT_ARRAY) return type_error(e, rel, p, "list", v, NULL);
    return normalize_any(v, z, rel, p, depth, e);
  case RN_T_MAP:
    if (v->type != MSGPACK_OBJECT_MAP) return type_error(e, rel, p, "map", v, NULL);
    return normalize_any(v, z, rel, p, depth, e);
  case RN_T_ANY:
    return normalize_any(v, z, rel, p, depth, e);
  case RN_T_STRUCT:
    return normalize_struct(fields, v, z, rel, p, depth, e);
  }
  return type_error(e, rel, p, "a known type", v, NULL);
}

/* Map keys are scalars, ordered: booleans, numbers by value, strings
 * bytewise, bytes bytewise. */
static int key_rank(const msgpack_object *k)
{
  switch (k->type) {
  case MSGPACK_OBJECT_BOOLEAN: return 0;
  case MSGPACK_OBJECT_POSITIVE_INTEGER: case MSGPACK_OBJECT_NEGATIVE_INTEGER:
  case MSGPACK_OBJECT_FLOAT64: return 1;
  case MSGPACK_OBJECT_STR: return 2;
  case MSGPACK_OBJECT_BIN: return 3;
  default: return 4;
  }
}

static double num_of(const msgpack_object *k)
{
  return k->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (double)k->via.u64
       : k->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? (double)k->via.i64 : k->via.f64;
}

static int cmp_map_keys(const void *a, const void *b)
{
  const msgpack_object *x = &((const msgpack_object_kv *)a)->key;
  const msgpack_object *y = &((const msgpack_object_kv *)b)->key;
  int rx = key_rank(x), ry = key_rank(y);
  if (rx != ry) return rx < ry ? -1 : 1;
  switch (rx) {
  case 0: return (int)x->via.boolean - (int)y->via.boolean;
  case 1: {
    if (x->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && y->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
      return x->via.i64 < y->via.i64 ? -1 : x->via.i64 > y->via.i64;
    if (x->type == MSGPACK_OBJECT_POSITIVE_INTEGER && y->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
      return x->via.u64 < y->via.u64 ? -1 : x->via.u64 > y->via.u64;
    double dx = num_of(x), dy = num_of(y);
    return dx < dy ? -1 : dx > dy;
  }
  default: {
    uint32_t n = x->via.str.size < y->via.str.size ? x->via.str.size : y->via.str.size;
    int c = memcmp(x->via.str.ptr, y->via.str.ptr, n);
    if (c) return c;
    return x->via.str.size < y->via.str.size ? -1 : x->via.str.size > y->via.str.size;
  }
  }
}

/* A map given the same key twice (its keys are sorted and normalized). */
static int duplicate_key(rn_err *e, const char *rel, const path *p, const msgpack_object *k)
{
  char name[128], at[512];
  if (k->type == MSGPACK_OBJECT_STR || k->type == MSGPACK_OBJECT_BIN)
    rn_json_quote(name, sizeof name, k->via.str.ptr, k->via.str.size);
  else rn_object_text(name, sizeof name, k);
  where(p, at, sizeof at);
  return rn_err_set(e, RN_EINVAL, "%s: %s: duplicate key %s", rel, at, name);
}

/* Two map keys JSON would write as one (rn_json_keys_clash). */
static int json_clash(rn_err *e, const char *rel, const path *p, const msgpack_object *a, const msgpack_object *b)
{
  char x[128], y[128], at[512];
  const msgpack_object *k[2] = { a, b };
  char *out[2] = { x, y };
  for (int i = 0; i < 2; i++) {
    if (k[i]->type == MSGPACK_OBJECT_STR || k[i]->type == MSGPACK_OBJECT_BIN)
      rn_json_quote(out[i], sizeof x, k[i]->via.str.ptr, k[i]->via.str.size);
    else rn_object_text(out[i], sizeof x, k[i]);
  }
  where(p, at, sizeof at);
  return rn_err_set(e, RN_EINVAL, "%s: %s: map keys %s and %s are one key in JSON, where keys are text (NDJSON and "
                    "SQLite sinks write maps as JSON)", rel, at, x, y);
}

static int normalize_any(msgpack_object *v, msgpack_zone *z, const char *rel,
                         const path *p, int depth, rn_err *e)
{
  if (depth >= RN_MAX_NESTING && (v->type == MSGPACK_OBJECT_ARRAY || v->type == MSGPACK_OBJECT_MAP))
    return too_deep(e, rel, p, v);
  switch (v->type) {
  case MSGPACK_OBJECT_NEGATIVE_INTEGER:
    if (v->via.i64 >= 0) set_int(v, v->via.i64);
    return 0;
  case MSGPACK_OBJECT_FLOAT32: case MSGPACK_OBJECT_FLOAT64:
    v->type = MSGPACK_OBJECT_FLOAT64;
    v->via.f64 = rn_float_canon(v->via.f64);
    return 0;
  case MSGPACK_OBJECT_EXT:
    return type_error(e, rel, p, "a storable value", v, NULL);
  case MSGPACK_OBJECT_STR: /* a string is UTF-8: other bytes are bytes (JSON, which sinks write, holds no other) */
    if (!rn_utf8_valid(v->via.str.ptr, v->via.str.size)) v->type = MSGPACK_OBJECT_BIN;
    return 0;
  case MSGPACK_OBJECT_ARRAY:
    for (uint32_t i = 0; i < v->via.array.size; i++)
      if (normalize_any(&v->via.array.ptr[i], z, rel, p, depth + 1, e)) return e->code;
    return 0;
  case MSGPACK_OBJECT_MAP: {
    msgpack_object_kv *kv = v->via.map.ptr;
    uint32_t n = v->via.map.size;
    for (uint32_t i = 0; i < n; i++) {
      if (normalize_any(&kv[i].key, z, rel, p, depth + 1, e)) return e->code;
      if (key_rank(&kv[i].key) == 4)
        return type_error(e, rel, p, "map keys that are strings, numbers or booleans", &kv[i].key, NULL);
      if (kv[i].key.type == MSGPACK_OBJECT_FLOAT64 && isnan(kv[i].key.via.f64)) /* no order, no Lua table key */
        return type_error(e, rel, p, "map keys other than NaN", &kv[i].key, " NaN");
      if (normalize_any(&kv[i].val, z, rel, p, depth + 1, e)) return e->code;
    }
    qsort(kv, n, sizeof *kv, cmp_map_keys);
    for (uint32_t i = 1; i < n; i++)
      if (cmp_map_keys(&kv[i - 1], &kv[i]) == 0) return duplicate_key(e, rel, p, &kv[i].key);
    uint32_t x, y;
    int clash = rn_json_keys_clash(kv, n, &x, &y); /* sinks write maps as JSON: keys must stay apart there */
    if (clash < 0) return rn_err_set(e, RN_ENOMEM, "out of memory");
    if (clash) return json_clash(e, rel, p, &kv[x].key, &kv[y].key);
    return 0;
  }
  default:
    return 0;
  }
}

static int missing_error(rn_err *e, const char *rel, const path *p, const rn_column *c)
{
  (void)p;
  if (c->is_key) return rn_err_set(e, RN_EINVAL, "%s: column \"%s\": key column is missing", rel, c->name);
  return rn_err_set(e, RN_EINVAL, "%s: column \"%s\": missing (the column is not nullable)", rel, c->name);
}

static int null_error(rn_err *e, const char *rel, const rn_column *c)
{
  if (c->is_key) return rn_err_set(e, RN_EINVAL, "%s: column \"%s\": key columns cannot be null", rel, c->name);
  return rn_err_set(e, RN_EINVAL, "%s: column \"%s\": null given but the column is not nullable", rel, c->name);
}

/* A struct value arrives as a map of field names (or an array in slot
 * order) and leaves as an array in slot order. */
static int normalize_struct(const rn_schema *s, msgpack_object *v, msgpack_zone *z,
                            const char *rel, const path *p, int depth, rn_err *e)
{
  if (depth >= RN_MAX_NESTING) return too_deep(e, rel, p, v);
  msgpack_object *out = rn_zone_malloc(z, sizeof *out * (size_t)(s->ncols ? s->ncols : 1));
  if (!out) return rn_err_set(e, RN_ENOMEM, "out of memory");
  if (v->type == MSGPACK_OBJECT_ARRAY && v->via.array.size == (uint32_t)s->ncols) {
    memcpy(out, v->via.array.ptr, sizeof *out * (size_t)s->ncols);
  } else if (v->type == MSGPACK_OBJECT_MAP) {
    uint8_t *given = rn_zone_malloc(z, (size_t)(s->ncols ? s->ncols : 1)); /* not a sentinel value: */
    if (!given) return rn_err_set(e, RN_ENOMEM, "out of memory");               /* any value can arrive */
    memset(given, 0, (size_t)s->ncols);
    for (uint32_t i = 0; i < v->via.map.size; i++) {
      const msgpack_object *k = &v->via.map.ptr[i].key;
      int slot = k->type == MSGPACK_OBJECT_STR ? rn_schema_slot(s, k->via.str.ptr, k->via.str.size) : -1;
      bool twice = slot >= 0 && given[slot];
      if (slot < 0 || twice) { /* twice: last-wins would drop a value silently */
        char name[128];
        if (k->type == MSGPACK_OBJECT_STR) rn_json_quote(name, sizeof name, k->via.str.ptr, k->via.str.size);
        else rn_object_text(name, sizeof name, k);
        char at[512];
        where(p, at, sizeof at);
        return rn_err_set(e, RN_EINVAL, "%s: %s: %s field %s", rel, at, twice ? "duplicate" : "unknown", name);
      }
      out[slot] = v->via.map.ptr[i].val;
      given[slot] = 1;
    }
    for (int i = 0; i < s->ncols; i++) {
      const rn_column *c = &s->cols[i];
      if (given[i]) continue;
      if (c->has_default) out[i] = c->defval;
      else if (c->nullable) out[i].type = MSGPACK_OBJECT_NIL;
      else {
        path fp = { p, c->name };
        msgpack_object nil = { .type = MSGPACK_OBJECT_NIL };
        return type_error(e, rel, &fp, rn_type_name(c->type), &nil, " (the field is missing)");
      }
    }
  } else {
    return type_error(e, rel, p, "struct", v, v->type == MSGPACK_OBJECT_ARRAY ? " (a struct is a map of its fields by name)"
                                                                              : NULL);
  }
  for (int i = 0; i < s->ncols; i++) {
    const rn_column *c = &s->cols[i];
    path fp = { p, c->name };
    if (out[i].type == MSGPACK_OBJECT_NIL) {
      if (!c->nullable) return type_error(e, rel, &fp, rn_type_name(c->type), &out[i], NULL);
      continue;
    }
    if (normalize_typed(c->type, c->fields, &out[i], z, rel, &fp, depth + 1, e)) return e->code;
  }
  v->type = MSGPACK_OBJECT_ARRAY;
  v->via.array.size = (uint32_t)s->ncols;
  v->via.array.ptr = out;
  return 0;
}

int rn_value_normalize(const rn_column *c, msgpack_object *v, msgpack_zone *z,
                       const char *rel, rn_err *e)
{
  path p = { NULL, c->name };
  return normalize_typed(c->type, c->fields, v, z, rel, &p, 0, e);
}

/* The common values normalize_typed leaves as they are, told without a
 * call: an int in int64 for an int column, ASCII text for a string one. */
static bool already_normal(rn_type t, const msgpack_object *v)
{
  if (t == RN_T_INT)
    return v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ||
           (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 <= (uint64_t)INT64_MAX);
  if (t != RN_T_STRING || v->type != MSGPACK_OBJECT_STR) return false;
  for (uint32_t i = 0; i < v->via.str.size; i++)
    if ((unsigned char)v->via.str.ptr[i] >= 0x80) return false;
  return true;
}

int rn_row_normalize(const rn_schema *s, const char *rel, rn_rowmode mode,
                     msgpack_object *vals, const uint8_t *given,
                     msgpack_zone *z, rn_err *e)
{
  for (int i = 0; i < s->ncols; i++) {
    const rn_column *c = &s->cols[i];
    if (!given[i]) {
      if (mode == RN_ROW_FULL || mode == RN_ROW_AS_TOLD) {
        if (c->has_default) vals[i] = c->defval;
        else if (c->nullable || mode == RN_ROW_AS_TOLD) vals[i].type = MSGPACK_OBJECT_NIL;
        else return missing_error(e, rel, NULL, c);
      } else if (c->is_key) {
        return missing_error(e, rel, NULL, c);
      }
      continue;
    }
    /* RN_ROW_KEY: a given column that is no key column is checked all the
     * same (a whole row may be the key; a wrong one is bad input), then
     * not used: the key finds the row. */
    if (vals[i].type == MSGPACK_OBJECT_NIL) {
      if (!c->nullable) return null_error(e, rel, c);
      continue;
    }
    if (already_normal(c->type, &vals[i])) continue;
    if (rn_value_normalize(c, &vals[i], z, rel, e)) return e->code;
  }
  return 0;
}

/* ---- packing ----
 * Rows are made of scalars, and msgpack_pack_object writes each through a
 * callback a few bytes at a time: a row of scalars is written here instead,
 * into room reserved once, byte for byte as msgpack_pack_object writes it
 * (smallest int form, str8 from 32 bytes, float64, bin8 from 0 bytes;
 * test_row checks the two agree). Anything else goes to msgpack-c. */

/* The most bytes scalar v packs into; 0 for what msgpack-c packs (containers,
 * float32, ext). */
static size_t scalar_room(const msgpack_object *v)
{
  switch (v->type) {
  case MSGPACK_OBJECT_NIL: case MSGPACK_OBJECT_BOOLEAN: return 1;
  case MSGPACK_OBJECT_POSITIVE_INTEGER: case MSGPACK_OBJECT_NEGATIVE_INTEGER: case MSGPACK_OBJECT_FLOAT64: return 9;
  case MSGPACK_OBJECT_STR: case MSGPACK_OBJECT_BIN: return 5 + (size_t)v->via.str.size;
  default: return 0;
  }
}

static unsigned char *put_be(unsigned char *p, uint64_t v, int n)
{
  for (int i = n - 1; i >= 0; i--, v >>= 8) p[i] = (unsigned char)v;
  return p + n;
}

static unsigned char *put_uint(unsigned char *p, uint64_t u)
{
  return (unsigned char *)rn_put_uint((char *)p, u);
}

static unsigned char *put_int(unsigned char *p, int64_t i)
{
  if (i >= 0) return put_uint(p, (uint64_t)i);
  if (i >= -32) { *p++ = (unsigned char)(int8_t)i; return p; }
  if (i >= -128) { *p++ = 0xd0; return put_be(p, (uint64_t)i, 1); }
  if (i >= -32768) { *p++ = 0xd1; return put_be(p, (uint64_t)i, 2); }
  if (i >= -2147483648LL) { *p++ = 0xd2; return put_be(p, (uint64_t)i, 4); }
  *p++ = 0xd3;
  return put_be(p, (uint64_t)i, 8);
}

/* head: the str or bin family's 8-, 16- and 32-bit length markers. */
static unsigned char *put_bytes(unsigned char *p, const char *b, uint32_t n, bool str)
{
  if (str && n < 32) *p++ = (unsigned char)(0xa0 | n);
  else if (n < 256) { *p++ = str ? 0xd9 : 0xc4; p = put_be(p, n, 1); }
  else if (n < 65536) { *p++ = str ? 0xda : 0xc5; p = put_be(p, n, 2); }
  else { *p++ = str ? 0xdb : 0xc6; p = put_be(p, n, 4); }
  if (n) memcpy(p, b, n);
  return p + n;
}

/* Writes scalar v (scalar_room(v) > 0) at p; returns where it ends. */
static unsigned char *put_scalar(unsigned char *p, const msgpack_object *v)
{
  switch (v->type) {
  case MSGPACK_OBJECT_NIL: *p++ = 0xc0; return p;
  case MSGPACK_OBJECT_BOOLEAN: *p++ = v->via.boolean ? 0xc3 : 0xc2; return p;
  case MSGPACK_OBJECT_POSITIVE_INTEGER: return put_uint(p, v->via.u64);
  case MSGPACK_OBJECT_NEGATIVE_INTEGER: return put_int(p, v->via.i64);
  case MSGPACK_OBJECT_FLOAT64: {
    uint64_t bits;
    memcpy(&bits, &v->via.f64, 8);
    *p++ = 0xcb;
    return put_be(p, bits, 8);
  }
  default: return put_bytes(p, v->via.str.ptr, v->via.str.size, v->type == MSGPACK_OBJECT_STR);
  }
}

/* Room for n more bytes at the end of out (grown as msgpack_sbuffer_write
 * grows it); false, noted as out of memory, if it cannot grow. */
/* Packs the row as msgpack-c does (a value other than a scalar inside). */
static void pack_slow(const rn_schema *s, const msgpack_object *vals, const char *old, const size_t *starts,
                      const uint8_t *given, msgpack_sbuffer *out)
{
  msgpack_packer pk;
  msgpack_packer_init(&pk, out, rn_buf_write);
  msgpack_pack_array(&pk, (size_t)s->ncols);
  for (int i = 0; i < s->ncols; i++) {
    if (!given || given[i]) msgpack_pack_object(&pk, vals[i]);
    else rn_buf_write(out, old + starts[i], starts[i + 1] - starts[i]);
  }
}

/* The row of vals (given == NULL), or old with the given columns replaced:
 * the scalars written in place, anything else by pack_slow. */
static void pack_row(const rn_schema *s, const msgpack_object *vals, const char *old, const size_t *starts,
                     const uint8_t *given, msgpack_sbuffer *out)
{
  size_t room = 5;
  for (int i = 0; i < s->ncols; i++) {
    if (given && !given[i]) { room += starts[i + 1] - starts[i]; continue; }
    size_t n = scalar_room(&vals[i]);
    if (!n) { pack_slow(s, vals, old, starts, given, out); return; }
    room += n;
  }
  if (rn_sbuf_reserve(out, room)) return;
  unsigned char *p = (unsigned char *)rn_put_array_header(out->data + out->size, (uint32_t)s->ncols);
  for (int i = 0; i < s->ncols; i++) {
    if (given && !given[i]) {
      memcpy(p, old + starts[i], starts[i + 1] - starts[i]);
      p += starts[i + 1] - starts[i];
    } else {
      p = put_scalar(p, &vals[i]);
    }
  }
  out->size = (size_t)((char *)p - out->data);
}

void rn_row_pack(const rn_schema *s, const msgpack_object *vals, msgpack_sbuffer *out)
{
  pack_row(s, vals, NULL, NULL, NULL, out);
}

int rn_row_patch(const rn_schema *s, const char *old, size_t old_len, const msgpack_object *vals,
                 const uint8_t *given, msgpack_sbuffer *out)
{
  int upto = s->ncols; /* old's spans up to its last column kept: none when every column is given */
  while (upto > 0 && given[upto - 1]) upto--;
  size_t starts[s->ncols + 1];
  if (rn_row_spans(old, old_len, s->ncols, upto, starts) != 0) return -1;
  pack_row(s, vals, old, starts, given, out);
  return 0;
}

static uint64_t read_be(const unsigned char *p, int n)
{
  uint64_t u = 0;
  for (int i = 0; i < n; i++) u = (u << 8) | p[i];
  return u;
}

const msgpack_object *rn_row_unpack(const char *data, size_t len, int ncols, msgpack_zone *z)
{
  msgpack_object obj;
  size_t off = 0;
  if (rn_unpack(data, len, &off, z, &obj) != MSGPACK_UNPACK_SUCCESS) return NULL;
  if (obj.type != MSGPACK_OBJECT_ARRAY || obj.via.array.size != (uint32_t)ncols) return NULL;
  return obj.via.array.ptr;
}

/* String or bytes v as "…" into buf (len bytes of room), quotes,
 * backslashes and control bytes escaped (and, for bytes, those past ASCII):
 * a NUL printed raw would end the message there and name another key. Cut
 * short (*cut) as "abc...", never as a closed string that names another
 * key; nothing when not even that fits. The bytes written. */
static size_t print_key_string(char *buf, size_t len, const msgpack_object *v, bool *cut)
{
  buf[0] = '\0';
  *cut = true;
  if (len < 3) return 0;
  size_t off = 0;
  uint32_t size = v->via.str.size;
  buf[off++] = '"';
  for (uint32_t i = 0; i < size; i++) {
    unsigned char ch = (unsigned char)v->via.str.ptr[i];
    char esc[8];
    const char *e = ch == '"' ? "\\\"" : ch == '\\' ? "\\\\" : ch == '\n' ? "\\n" : ch == '\t' ? "\\t"
                  : ch == 0 ? "\\0" : NULL;
    if (!e && (ch < 0x20 || ch == 0x7f || (ch > 0x7f && v->type == MSGPACK_OBJECT_BIN)))
      snprintf(esc, sizeof esc, "\\x%02x", ch), e = esc;
    size_t n = e ? strlen(e) : 1, keep = i + 1 < size ? 5 : 2; /* room after it: ...", or " and the NUL */
    if (off + n + keep > len) {
      if (off + 5 > len) { buf[0] = '\0'; return 0; } /* the first byte: not even "..." fits */
      memcpy(buf + off, "...\"", 5);                  /* with its NUL */
      return off + 4;
    }
    if (e) memcpy(buf + off, e, n);
    else buf[off] = (char)ch;
    off += n;
  }
  buf[off++] = '"';
  buf[off] = '\0';
  *cut = false;
  return off;
}

/* Key value v as text into buf (len bytes of room), as snprintf: its
 * length, len or more when it did not fit; *cut when a string was cut. */
static int print_key_value(char *buf, size_t len, const msgpack_object *v, bool *cut)
{
  *cut = false;
  switch (v->type) {
  case MSGPACK_OBJECT_STR: case MSGPACK_OBJECT_BIN: return (int)print_key_string(buf, len, v, cut);
  case MSGPACK_OBJECT_FLOAT32: case MSGPACK_OBJECT_FLOAT64: return rn_float_text(buf, len, v->via.f64);
  case MSGPACK_OBJECT_POSITIVE_INTEGER: return snprintf(buf, len, "%" PRIu64, v->via.u64);
  case MSGPACK_OBJECT_NEGATIVE_INTEGER: return snprintf(buf, len, "%" PRId64, v->via.i64);
  case MSGPACK_OBJECT_BOOLEAN: return snprintf(buf, len, "%s", v->via.boolean ? "true" : "false");
  default: return rn_object_text(buf, len, v);
  }
}

int rn_key_value_text(char *buf, size_t len, const msgpack_object *v)
{
  bool cut;
  return print_key_value(buf, len, v, &cut);
}

void rn_key_format(const rn_schema *s, const msgpack_object *vals, char *buf, size_t len)
{
  size_t off = 0;
  buf[0] = '\0';
  for (int i = 0; i < s->nkey && off + 1 < len; i++) {
    const rn_column *c = &s->cols[s->key_slots[i]];
    off += (size_t)snprintf(buf + off, len - off, "%s%s = ", i ? ", " : "", c->name);
    if (off + 1 >= len) break;
    bool cut;
    int n = print_key_value(buf + off, len - off, &vals[s->key_slots[i]], &cut);
    if (n < 0 || (size_t)n >= len - off) { buf[off] = '\0'; break; } /* no shorter value: it would name another key */
    off += (size_t)n;
    if (cut) break; /* no later column after a key cut short */
  }
}

#define RN_X16(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
const uint8_t rn_scalar_size[256] = { /* row.h */
  RN_X16(1), RN_X16(1), RN_X16(1), RN_X16(1), RN_X16(1), RN_X16(1), RN_X16(1), RN_X16(1), /* positive fixint */
  RN_X16(0), RN_X16(0),                                          /* fixmap, fixarray */
  1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,          /* fixstr: 1 + its length */
  17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,
  1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 5, 9, 2, 3, 5, 9,                 /* 0xc0: nil, bool, floats, uints */
  2, 3, 5, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                 /* 0xd0: ints */
  RN_X16(1), RN_X16(1),                                          /* negative fixint */
};
#undef RN_X16

/* The header of the msgpack element at p (p < end): its size, with *body
 * the bytes of payload that follow it (strings, bins, exts, fixed scalars)
 * and *children the elements that follow it (an array's; a map's keys and
 * values). 0 when the header runs past end or is no msgpack (0xc1). */
static size_t header_of(const unsigned char *p, const unsigned char *end, size_t *body, uint64_t *children)
{
  unsigned b = *p;
  *body = 0;
  *children = 0;
  if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) return 1; /* fixints, nil, bool */
  if (b <= 0x8f) { *children = 2 * (uint64_t)(b & 0x0f); return 1; }
  if (b <= 0x9f) { *children = b & 0x0f; return 1; }
  if (b <= 0xbf) { *body = b & 0x1f; return 1; }
  size_t head, n = 0;
  int counts = 0; /* the n bytes after the type: 0 the body's length, 1 an array's, 2 a map's elements */
  switch (b) {
  case 0xc4: case 0xd9: head = 2; n = 1; break;
  case 0xc5: case 0xda: head = 3; n = 2; break;
  case 0xc6: case 0xdb: head = 5; n = 4; break;
  case 0xc7: head = 3; n = 1; break;
  case 0xc8: head = 4; n = 2; break;
  case 0xc9: head = 6; n = 4; break;
  case 0xca: case 0xce: case 0xd2: head = 5; break;
  case 0xcb: case 0xcf: case 0xd3: head = 9; break;
  case 0xcc: case 0xd0: head = 2; break;
  case 0xcd: case 0xd1: head = 3; break;
  case 0xd4: head = 3; break;
  case 0xd5: head = 4; break;
  case 0xd6: head = 6; break;
  case 0xd7: head = 10; break;
  case 0xd8: head = 18; break;
  case 0xdc: head = 3; n = 2; counts = 1; break;
  case 0xdd: head = 5; n = 4; counts = 1; break;
  case 0xde: head = 3; n = 2; counts = 2; break;
  case 0xdf: head = 5; n = 4; counts = 2; break;
  default: return 0;
  }
  if ((size_t)(end - p) < head) return 0;
  uint64_t v = n ? read_be(p + 1, (int)n) : 0;
  if (counts) *children = (uint64_t)counts * v;
  else *body = (size_t)v;
  return head;
}

/* The byte length of the msgpack element at p, or 0 if it runs past end.
 * Iterative: `left` counts the elements still to walk. */
static size_t element_size(const unsigned char *p, const unsigned char *end)
{
  if (p < end && rn_scalar_size[*p]) /* the common scalars, without the walk */
    return (size_t)(end - p) >= rn_scalar_size[*p] ? rn_scalar_size[*p] : 0;
  const unsigned char *start = p;
  uint64_t left = 1;
  while (left--) {
    if (p >= end) return 0;
    size_t body;
    uint64_t children;
    size_t head = header_of(p, end, &body, &children);
    if (!head || body > (size_t)(end - p) - head) return 0;
    p += head + body;
    left += children;
  }
  return (size_t)(p - start);
}

/* Rewrites every float64 -0.0 in the msgpack at p as 0.0 and every NaN
 * as rn_float_canon's (rows written before 0.17 may hold any NaN's bits);
 * false when the bytes are not well formed (left as they are). */
static bool zero_signs(unsigned char *p, size_t len)
{
  const unsigned char *end = p + len;
  while (p < end) {
    size_t body;
    uint64_t children; /* walked in turn: zero_signs reads every element's header */
    size_t head = header_of(p, end, &body, &children);
    if (!head || body > (size_t)(end - p) - head) return false;
    uint64_t bits = *p == 0xcb ? read_be(p + 1, 8) : 0;
    if (bits == 0x8000000000000000ULL) memset(p + 1, 0, 8);
    else if ((bits & 0x7ff0000000000000ULL) == 0x7ff0000000000000ULL && (bits & 0x000fffffffffffffULL) &&
             bits != 0x7ff8000000000000ULL)
      memcpy(p + 1, "\x7f\xf8\0\0\0\0\0\0", 8); /* rn_float_canon's NaN, big-endian */
    p += head + body;
  }
  return true;
}

/* May row hold a -0.0 or a NaN? (0xcb, a float64's tag, somewhere in it.) */
static bool may_hold_floats(const char *row, size_t len)
{
  return len && memchr(row, 0xcb, len) != NULL;
}

/* A copy of row with its -0.0 as 0.0 and one NaN (malloc'd; NULL when out of memory). */
static unsigned char *zeroed_copy(const char *row, size_t len)
{
  unsigned char *c = malloc(len);
  if (!c) { rn_oom_note(); return NULL; }
  memcpy(c, row, len);
  zero_signs(c, len);
  return c;
}

bool rn_row_same(const char *a, size_t alen, const char *b, size_t blen)
{
  if (alen != blen) return false; /* -0.0 and 0.0 are 9 bytes each */
  if (memcmp(a, b, alen) == 0) return true;
  if (!may_hold_floats(a, alen) || !may_hold_floats(b, blen)) return false;
  unsigned char *x = zeroed_copy(a, alen), *y = x ? zeroed_copy(b, blen) : NULL;
  bool same = y && memcmp(x, y, alen) == 0;
  free(x);
  free(y);
  return same;
}

void rn_row_zero_signs(char *row, size_t len)
{
  if (may_hold_floats(row, len)) zero_signs((unsigned char *)row, len);
}

uint64_t rn_row_hash(const char *row, size_t len)
{
  if (!may_hold_floats(row, len)) return rn_hash64(row, len);
  unsigned char *c = zeroed_copy(row, len);
  uint64_t h = c ? rn_hash64(c, len) : rn_hash64(row, len); /* out of memory is noted: the group fails */
  free(c);
  return h;
}

size_t rn_msgpack_size(const char *data, size_t len)
{
  return element_size((const unsigned char *)data, (const unsigned char *)data + len);
}

/* The array header of a row: its count into *n, its size returned (0: not
 * an array header within len bytes). */
static size_t array_header(const unsigned char *p, size_t len, uint32_t *n)
{
  if (p[0] >= 0x90 && p[0] <= 0x9f) { *n = p[0] & 0x0f; return 1; }
  if (p[0] == 0xdc && len >= 3) { *n = (uint32_t)read_be(p + 1, 2); return 3; }
  if (p[0] == 0xdd && len >= 5) { *n = (uint32_t)read_be(p + 1, 4); return 5; }
  return 0;
}

/* rn_row_spans from column i on, for the values the table lookup does not
 * size (containers, long strings) or that run past the end. Out of line so
 * that the common walk below stays a leaf that saves no registers. */
static __attribute__((noinline)) int spans_slow(const unsigned char *p, size_t len, size_t off, int i,
                                                int upto, size_t *starts)
{
  for (; i < upto; i++) {
    starts[i] = off;
    size_t sz = element_size(p + off, p + len);
    if (!sz) return -1;
    off += sz;
  }
  starts[upto] = off;
  return 0;
}

int rn_row_spans(const char *row, size_t len, int ncols, int upto, size_t *starts)
{
  const unsigned char *p = (const unsigned char *)row;
  uint32_t n;
  size_t off = len ? array_header(p, len, &n) : 0;
  if (!off || n != (uint32_t)ncols || upto > ncols) return -1;
  size_t *at = starts, *stop = starts + upto;
  for (; at < stop; at++) { /* sz is at most 33: off + sz cannot wrap */
    size_t sz = off < len ? rn_scalar_size[p[off]] : 0;
    if (!sz || off + sz > len) return spans_slow(p, len, off, (int)(at - starts), upto, starts);
    *at = off;
    off += sz;
  }
  *stop = off;
  return 0;
}

/* Whether the value starting with byte b is of type t at the top. */
static bool of_type(rn_type t, unsigned char b)
{
  switch (t) {
  case RN_T_INT: return b <= 0x7f || b >= 0xe0 || (b >= 0xcc && b <= 0xd3);
  case RN_T_FLOAT: return b == 0xca || b == 0xcb;
  case RN_T_STRING: return (b >= 0xa0 && b <= 0xbf) || (b >= 0xd9 && b <= 0xdb);
  case RN_T_BOOL: return b == 0xc2 || b == 0xc3;
  case RN_T_BYTES: return b >= 0xc4 && b <= 0xc6;
  case RN_T_LIST: case RN_T_STRUCT: return (b >= 0x90 && b <= 0x9f) || b == 0xdc || b == 0xdd;
  case RN_T_MAP: return (b >= 0x80 && b <= 0x8f) || b == 0xde || b == 0xdf;
  case RN_T_ANY: return true;
  }
  return false;
}

bool rn_row_fits(const rn_schema *s, const char *row, size_t len)
{
  size_t starts[s->ncols + 1];
  if (rn_row_spans(row, len, s->ncols, s->ncols, starts) || starts[s->ncols] != len) return false;
  for (int i = 0; i < s->ncols; i++) {
    unsigned char b = (unsigned char)row[starts[i]];
    if (b != 0xc0 && !of_type(s->cols[i].type, b)) return false;
  }
  return true;
}

int rn_sbuf_grow(msgpack_sbuffer *out, size_t n)
{
  size_t size = out->alloc ? out->alloc * 2 : MSGPACK_SBUFFER_INIT_SIZE;
  while (size < out->size + n) {
    if (size > SIZE_MAX / 2) { rn_oom_note(); return -1; }
    size *= 2;
  }
  char *data = realloc(out->data, size);
  if (!data) { rn_oom_note(); return -1; }
  out->data = data;
  out->alloc = size;
  return 0;
}

bool rn_scalar_object(const unsigned char *p, size_t sz, msgpack_object *o)
{
  unsigned b = p[0];
  if (b <= 0x7f) *o = (msgpack_object){ .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = b };
  else if (b >= 0xe0) *o = (msgpack_object){ .type = MSGPACK_OBJECT_NEGATIVE_INTEGER, .via.i64 = (int8_t)b };
  else if (b >= 0xa0 && b <= 0xbf) *o = (msgpack_object){ .type = MSGPACK_OBJECT_STR };
  else if (b == 0xc0) *o = (msgpack_object){ .type = MSGPACK_OBJECT_NIL };
  else if (b == 0xc2 || b == 0xc3) *o = (msgpack_object){ .type = MSGPACK_OBJECT_BOOLEAN, .via.boolean = b == 0xc3 };
  else if (b >= 0xc4 && b <= 0xc6) *o = (msgpack_object){ .type = MSGPACK_OBJECT_BIN };
  else if (b >= 0xd9 && b <= 0xdb) *o = (msgpack_object){ .type = MSGPACK_OBJECT_STR };
  else if (b >= 0xcc && b <= 0xcf) *o = (msgpack_object){ .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = read_be(p + 1, (int)sz - 1) };
  else if (b >= 0xd0 && b <= 0xd3) {
    int n = (int)sz - 1;
    uint64_t u = read_be(p + 1, n);
    int64_t v = n == 1 ? (int8_t)u : n == 2 ? (int16_t)u : n == 4 ? (int32_t)u : (int64_t)u;
    if (v >= 0) *o = (msgpack_object){ .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = (uint64_t)v };
    else *o = (msgpack_object){ .type = MSGPACK_OBJECT_NEGATIVE_INTEGER, .via.i64 = v };
  } else if (b == 0xca) {
    uint32_t bits = (uint32_t)read_be(p + 1, 4);
    float f;
    memcpy(&f, &bits, sizeof f);
    *o = (msgpack_object){ .type = MSGPACK_OBJECT_FLOAT32, .via.f64 = f };
  } else if (b == 0xcb) {
    uint64_t bits = read_be(p + 1, 8);
    double d;
    memcpy(&d, &bits, sizeof d);
    *o = (msgpack_object){ .type = MSGPACK_OBJECT_FLOAT64, .via.f64 = d };
  } else {
    return false;
  }
  if (o->type == MSGPACK_OBJECT_STR || o->type == MSGPACK_OBJECT_BIN) { /* its bytes follow its header */
    size_t head = b >= 0xa0 && b <= 0xbf ? 1 : b == 0xc4 || b == 0xd9 ? 2 : b == 0xc5 || b == 0xda ? 3 : 5;
    o->via.str.ptr = (const char *)p + head; /* str and bin share the layout */
    o->via.str.size = (uint32_t)(sz - head);
  }
  return true;
}

int rn_unpack_flat_map(const char *data, size_t len, msgpack_zone *z, msgpack_object *out)
{
  const unsigned char *p = (const unsigned char *)data;
  const char *end = data + len;
  uint32_t n;
  size_t off;
  if (len == 0) return 0;
  if (p[0] >= 0x80 && p[0] <= 0x8f) { n = p[0] & 0x0f; off = 1; }
  else if (p[0] == 0xde && len >= 3) { n = (uint32_t)read_be(p + 1, 2); off = 3; }
  else if (p[0] == 0xdf && len >= 5) { n = (uint32_t)read_be(p + 1, 4); off = 5; }
  else return 0;
  if (n > (len - off) / 2) return 0; /* not there: the decoder says so */
  msgpack_object_kv *kv = rn_zone_malloc(z, sizeof *kv * (n ? n : 1));
  if (!kv) return -1;
  for (uint32_t i = 0; i < n; i++) {
    for (int half = 0; half < 2; half++) {
      size_t sz = rn_value_size(data + off, end);
      msgpack_object *o = half ? &kv[i].val : &kv[i].key;
      if (!sz || !rn_scalar_object(p + off, sz, o) || (!half && o->type != MSGPACK_OBJECT_STR)) return 0;
      off += sz;
    }
  }
  *out = (msgpack_object){ .type = MSGPACK_OBJECT_MAP, .via.map = { n, kv } };
  return 1;
}
