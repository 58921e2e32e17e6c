/* key.c — the order-preserving tuple encoding drawn in key.h. */
#include "key.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "row.h"

/* Written into reserved room, not through rn_buf_write: keys are encoded
 * per change and an int key is most of them. */
static void put_be64(msgpack_sbuffer *out, uint8_t tag, uint64_t u)
{
  if (rn_sbuf_reserve(out, 9)) return; /* noted as out of memory */
  char *b = out->data + out->size;
  b[0] = (char)tag;
  rn_be64_put(b + 1, u);
  out->size += 9;
}

/* s may be NULL when n is 0 (msgpack-c decodes an empty string so): no
 * pointer arithmetic on it then. */
static void put_escaped(msgpack_sbuffer *out, uint8_t tag, const char *s, size_t n)
{
  char t = (char)tag;
  rn_buf_write(out, &t, 1);
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] != '\0') continue;
    rn_buf_write(out, s + run, i - run);
    rn_buf_write(out, "\0\xff", 2);
    run = i + 1;
  }
  rn_buf_write(out, s + run, n - run);
  rn_buf_write(out, "\0\0", 2);
}

int rn_key_append(msgpack_sbuffer *out, const msgpack_object *v)
{
  switch (v->type) {
  case MSGPACK_OBJECT_NIL: { char t = RN_KEY_NULL; rn_buf_write(out, &t, 1); return 0; }
  case MSGPACK_OBJECT_BOOLEAN: {
    char t = v->via.boolean ? RN_KEY_TRUE : RN_KEY_FALSE;
    rn_buf_write(out, &t, 1);
    return 0;
  }
  case MSGPACK_OBJECT_POSITIVE_INTEGER:
    put_be64(out, RN_KEY_INT, v->via.u64 ^ (1ULL << 63));
    return 0;
  case MSGPACK_OBJECT_NEGATIVE_INTEGER:
    put_be64(out, RN_KEY_INT, (uint64_t)v->via.i64 ^ (1ULL << 63));
    return 0;
  case MSGPACK_OBJECT_FLOAT32: case MSGPACK_OBJECT_FLOAT64: {
    double d = v->via.f64;
    if (isnan(d)) return -1;
    if (d == 0) d = 0; /* -0.0 and 0.0 are one key */
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    u = (u >> 63) ? ~u : u ^ (1ULL << 63);
    put_be64(out, RN_KEY_FLOAT, u);
    return 0;
  }
  case MSGPACK_OBJECT_STR:
    put_escaped(out, RN_KEY_STRING, v->via.str.ptr, v->via.str.size);
    return 0;
  case MSGPACK_OBJECT_BIN:
    put_escaped(out, RN_KEY_BYTES, v->via.bin.ptr, v->via.bin.size);
    return 0;
  default:
    return -1;
  }
}

int rn_key_encode(const rn_schema *s, const msgpack_object *vals, msgpack_sbuffer *out)
{
  for (int i = 0; i < s->nkey; i++) {
    const msgpack_object *v = &vals[s->key_slots[i]];
    if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER || v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
      put_be64(out, RN_KEY_INT, v->via.u64 ^ (1ULL << 63)); /* most keys: rn_key_append's int case, here */
    else if (rn_key_append(out, v) != 0)
      return -1;
  }
  return 0;
}

const char *rn_key_nan_column(const rn_schema *s, const msgpack_object *vals, char *buf, size_t cap)
{
  snprintf(buf, cap, "a key column");
  for (int i = 0; i < s->nkey; i++) {
    const msgpack_object *v = &vals[s->key_slots[i]];
    if ((v->type == MSGPACK_OBJECT_FLOAT32 || v->type == MSGPACK_OBJECT_FLOAT64) && isnan(v->via.f64)) {
      const rn_column *c = &s->cols[s->key_slots[i]];
      char quoted[256];
      snprintf(buf, cap, "column %s", rn_json_quote(quoted, sizeof quoted, c->name, c->name_len));
      break;
    }
  }
  return buf;
}

static uint64_t get_be64(const unsigned char *p)
{
  uint64_t u = 0;
  for (int i = 0; i < 8; i++) u = (u << 8) | p[i];
  return u;
}

/* Decodes one escaped run starting at p; returns bytes consumed or 0. */
static size_t get_escaped(const unsigned char *p, size_t avail, msgpack_zone *z,
                          const char **str, uint32_t *n)
{
  char *buf = rn_zone_malloc(z, avail ? avail : 1);
  size_t i = 0, o = 0;
  if (!buf) return 0;
  while (i + 1 < avail) {
    if (p[i] != 0) { buf[o++] = (char)p[i++]; continue; }
    if (p[i + 1] == 0xff) { buf[o++] = '\0'; i += 2; continue; }
    if (p[i + 1] == 0) { *str = buf; *n = (uint32_t)o; return i + 2; }
    return 0;
  }
  return 0;
}

int rn_key_decode(const char *k, size_t len, msgpack_object *out, int max, msgpack_zone *z)
{
  const unsigned char *p = (const unsigned char *)k, *end = p + len;
  int n = 0;
  while (p < end) {
    if (n == max) return -1;
    msgpack_object *v = &out[n++];
    uint8_t tag = *p++;
    size_t left = (size_t)(end - p), used;
    switch (tag) {
    case RN_KEY_NULL: v->type = MSGPACK_OBJECT_NIL; break;
    case RN_KEY_FALSE: case RN_KEY_TRUE:
      v->type = MSGPACK_OBJECT_BOOLEAN;
      v->via.boolean = tag == RN_KEY_TRUE;
      break;
    case RN_KEY_INT: {
      if (left < 8) return -1;
      int64_t i = (int64_t)(get_be64(p) ^ (1ULL << 63));
      p += 8;
      if (i >= 0) { v->type = MSGPACK_OBJECT_POSITIVE_INTEGER; v->via.u64 = (uint64_t)i; }
      else { v->type = MSGPACK_OBJECT_NEGATIVE_INTEGER; v->via.i64 = i; }
      break;
    }
    case RN_KEY_FLOAT: {
      if (left < 8) return -1;
      uint64_t u = get_be64(p);
      p += 8;
      u = (u >> 63) ? u ^ (1ULL << 63) : ~u;
      v->type = MSGPACK_OBJECT_FLOAT64;
      memcpy(&v->via.f64, &u, sizeof u);
      break;
    }
    case RN_KEY_STRING: case RN_KEY_BYTES:
      v->type = tag == RN_KEY_STRING ? MSGPACK_OBJECT_STR : MSGPACK_OBJECT_BIN;
      used = get_escaped(p, left, z, &v->via.str.ptr, &v->via.str.size);
      if (!used) return -1;
      p += used;
      break;
    default:
      return -1;
    }
  }
  return n;
}

uint64_t rn_hash64(const void *data, size_t len)
{
  const unsigned char *p = data;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < len; i++) { h ^= p[i]; h *= 1099511628211ULL; }
  return h;
}
