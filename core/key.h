/* key.h — order-preserving key encoding.
 *
 * A key is a tuple of scalars. Each element is a tag byte and a payload:
 *
 *     |0x01|                                          null (foreign keys only)
 *     |0x05|  |0x06|                                  false, true
 *     |0x10|8 bytes big-endian of (int ^ 1<<63)|      int
 *     |0x20|8 bytes big-endian of the IEEE bits, sign bit flipped for
 *           positives, every bit inverted for negatives|   float (-0 as 0)
 *     |0x30|bytes, each 0x00 written 0x00 0xFF|0x00 0x00|  string
 *     |0x40|same escaping as string|0x00 0x00|         bytes
 *
 * memcmp of two encodings orders them as their tuples (numbers by value,
 * strings bytewise, column by column), and no element's encoding is a
 * prefix of another's, so the encoding of (a) prefixes that of every (a, …):
 * an LMDB cursor positioned with MDB_SET_RANGE at a prefix walks exactly
 * the tuples that start with it. NaN has no place in an order: not a key. */
#ifndef RN_KEY_H
#define RN_KEY_H

#include <msgpack.h>
#include <stdint.h>
#include <string.h>

#include "schema.h"

enum { RN_KEY_NULL = 0x01, RN_KEY_FALSE = 0x05, RN_KEY_TRUE = 0x06, RN_KEY_INT = 0x10,
       RN_KEY_FLOAT = 0x20, RN_KEY_STRING = 0x30, RN_KEY_BYTES = 0x40 };

/* Appends one normalized scalar; -1 for NaN or a value that is not a scalar. */
int rn_key_append(msgpack_sbuffer *out, const msgpack_object *v);

/* Appends the key columns of a normalized row; -1 as rn_key_append. */
int rn_key_encode(const rn_schema *s, const msgpack_object *vals, msgpack_sbuffer *out);

/* What rn_key_encode refused, for its message: "column \"x\"", the first
 * key column of s holding NaN in vals (a key of several columns must say
 * which), written into buf (its name quoted as JSON); "a key column" when
 * none does. Returns buf. */
const char *rn_key_nan_column(const rn_schema *s, const msgpack_object *vals, char *buf, size_t cap);

/* Decodes up to max elements (strings copied into z). Returns the count, or
 * -1 if k is not a valid encoding. */
int rn_key_decode(const char *k, size_t len, msgpack_object *out, int max, msgpack_zone *z);

/* Big-endian u64s: ids in keys sort as numbers. */
static inline void rn_be64_put(char out[8], uint64_t u)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  u = __builtin_bswap64(u); /* one store, not eight */
  memcpy(out, &u, 8);
#else
  for (int i = 0; i < 8; i++) out[i] = (char)(u >> (56 - 8 * i));
#endif
}

static inline uint64_t rn_be64_get(const char *d)
{
  uint64_t u = 0;
  for (int i = 0; i < 8; i++) u = (u << 8) | (unsigned char)d[i];
  return u;
}

/* FNV-1a, 64 bits: the hash of long keys and of keyless rows. */
uint64_t rn_hash64(const void *data, size_t len);

#endif
