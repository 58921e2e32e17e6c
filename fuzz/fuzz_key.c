/* fuzz_key.c — the key decoder (rn_key_decode) on arbitrary bytes.
 *
 * The first byte splits the rest into two candidate keys. For each that
 * decodes: encoding the values again gives the same bytes (the encoding is
 * canonical; only -0 and NaN floats have other forms). For two that decode:
 * memcmp of the encodings orders them as their values compare (tag rank,
 * then value, column by column, a prefix first). */
#include <math.h>
#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "key.h"

#define MAXCOLS 16

static int sign(int c) { return (c > 0) - (c < 0); }

static int tag_rank(const msgpack_object *v)
{
  switch (v->type) {
  case MSGPACK_OBJECT_NIL: return RN_KEY_NULL;
  case MSGPACK_OBJECT_BOOLEAN: return v->via.boolean ? RN_KEY_TRUE : RN_KEY_FALSE;
  case MSGPACK_OBJECT_POSITIVE_INTEGER: case MSGPACK_OBJECT_NEGATIVE_INTEGER: return RN_KEY_INT;
  case MSGPACK_OBJECT_FLOAT64: return RN_KEY_FLOAT;
  case MSGPACK_OBJECT_STR: return RN_KEY_STRING;
  case MSGPACK_OBJECT_BIN: return RN_KEY_BYTES;
  default: abort(); /* the decoder made a type a key cannot hold */
  }
}

static int64_t int_of(const msgpack_object *v)
{
  return v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)v->via.u64 : v->via.i64;
}

/* Orders two decoded values as key.h promises. */
static int cmp_value(const msgpack_object *a, const msgpack_object *b)
{
  int ra = tag_rank(a), rb = tag_rank(b);
  if (ra != rb) return ra < rb ? -1 : 1;
  switch (ra) {
  case RN_KEY_INT: return int_of(a) < int_of(b) ? -1 : int_of(a) > int_of(b);
  case RN_KEY_FLOAT: return a->via.f64 < b->via.f64 ? -1 : a->via.f64 > b->via.f64;
  case RN_KEY_STRING: case RN_KEY_BYTES: {
    uint32_t n = a->via.str.size < b->via.str.size ? a->via.str.size : b->via.str.size;
    int c = n ? memcmp(a->via.str.ptr, b->via.str.ptr, n) : 0;
    if (c) return c;
    return a->via.str.size < b->via.str.size ? -1 : a->via.str.size > b->via.str.size;
  }
  default: return 0;
  }
}

/* Floats without one place in the order: NaN, and zero (two encodings). */
static bool has_odd_float(const msgpack_object *v, int n)
{
  for (int i = 0; i < n; i++)
    if (v[i].type == MSGPACK_OBJECT_FLOAT64 && (isnan(v[i].via.f64) || v[i].via.f64 == 0)) return true;
  return false;
}

static void check_round_trip(const uint8_t *k, size_t len, const msgpack_object *v, int n)
{
  if (has_odd_float(v, n)) return;
  msgpack_sbuffer out;
  msgpack_sbuffer_init(&out);
  for (int i = 0; i < n; i++)
    if (rn_key_append(&out, &v[i]) != 0) abort();
  if (out.size != len || (len && memcmp(out.data, k, len) != 0)) {
    fprintf(stderr, "fuzz: key encode(decode(k)) differs from k\n");
    abort();
  }
  msgpack_sbuffer_destroy(&out);
}

static int cmp_bytes(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
  size_t n = na < nb ? na : nb;
  int c = n ? memcmp(a, b, n) : 0;
  if (c) return sign(c);
  return na < nb ? -1 : na > nb;
}

static int cmp_tuples(const msgpack_object *a, int na, const msgpack_object *b, int nb)
{
  for (int i = 0; i < na && i < nb; i++) {
    int c = cmp_value(&a[i], &b[i]);
    if (c) return sign(c);
  }
  return na < nb ? -1 : na > nb;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1) return 0;
  size_t split = data[0] < size - 1 ? data[0] : size - 1;
  const uint8_t *ka = data + 1, *kb = data + 1 + split;
  size_t la = split, lb = size - 1 - split;
  msgpack_zone z;
  msgpack_zone_init(&z, 256);
  msgpack_object va[MAXCOLS], vb[MAXCOLS];
  int na = rn_key_decode((const char *)ka, la, va, MAXCOLS, &z);
  int nb = rn_key_decode((const char *)kb, lb, vb, MAXCOLS, &z);
  if (na >= 0) check_round_trip(ka, la, va, na);
  if (nb >= 0) check_round_trip(kb, lb, vb, nb);
  if (na >= 0 && nb >= 0 && !has_odd_float(va, na) && !has_odd_float(vb, nb) &&
      cmp_bytes(ka, la, kb, lb) != cmp_tuples(va, na, vb, nb)) {
    fprintf(stderr, "fuzz: memcmp of two keys disagrees with their values' order\n");
    abort();
  }
  msgpack_zone_destroy(&z);
  return 0;
}
