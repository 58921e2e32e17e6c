/* test_key.c — the key encoding: memcmp order equals tuple order, round
 * trips, prefixes. Random tuples come from a fixed seed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "key.h"
#include "store.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void)
{
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

enum { NCOLS = 3, NTUPLES = 4000 };
typedef struct tuple {
  int kinds[NCOLS];            /* per column: the tuple layout is one type per column */
  msgpack_object v[NCOLS];
  char strs[NCOLS][8];
} tuple;

/* Column types of the random tuples: int, float, string, bool, bytes. */
static const int col_kind[NCOLS] = { 0, 2, 1 };

static void random_value(int kind, msgpack_object *o, char *buf)
{
  switch (kind) {
  case 0: {
    static const int64_t edges[] = { INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX - 1, INT64_MAX };
    int64_t i = rnd() % 4 == 0 ? edges[rnd() % 7] : (int64_t)(rnd() % 21) - 10;
    if (i >= 0) { o->type = MSGPACK_OBJECT_POSITIVE_INTEGER; o->via.u64 = (uint64_t)i; }
    else { o->type = MSGPACK_OBJECT_NEGATIVE_INTEGER; o->via.i64 = i; }
    break;
  }
  case 1: {
    static const double edges[] = { -INFINITY, -1e300, -1.5, -0.0, 0.0, 1e-300, 2.5, 1e300, INFINITY };
    o->type = MSGPACK_OBJECT_FLOAT64;
    o->via.f64 = rnd() % 3 == 0 ? edges[rnd() % 9] : ((double)(rnd() % 2001) - 1000) / 8;
    break;
  }
  case 2: case 4: {
    int n = (int)(rnd() % 4);
    for (int i = 0; i < n; i++) buf[i] = "\0\1a\xff"[rnd() % 4];
    o->type = kind == 2 ? MSGPACK_OBJECT_STR : MSGPACK_OBJECT_BIN;
    o->via.str.ptr = buf;
    o->via.str.size = (uint32_t)n;
    break;
  }
  default:
    o->type = MSGPACK_OBJECT_BOOLEAN;
    o->via.boolean = rnd() & 1;
  }
}

static int cmp_value(const msgpack_object *a, const msgpack_object *b)
{
  switch (a->type) {
  case MSGPACK_OBJECT_POSITIVE_INTEGER: case MSGPACK_OBJECT_NEGATIVE_INTEGER: {
    int64_t x = a->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)a->via.u64 : a->via.i64;
    int64_t y = b->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)b->via.u64 : b->via.i64;
    return x < y ? -1 : x > y;
  }
  case MSGPACK_OBJECT_FLOAT64:
    return a->via.f64 < b->via.f64 ? -1 : a->via.f64 > b->via.f64;
  case MSGPACK_OBJECT_BOOLEAN:
    return (int)a->via.boolean - (int)b->via.boolean;
  default: {
    uint32_t n = a->via.str.size < b->via.str.size ? a->via.str.size : b->via.str.size;
    int c = memcmp(a->via.str.ptr, b->via.str.ptr, n);
    if (c) return c < 0 ? -1 : 1;
    return a->via.str.size < b->via.str.size ? -1 : a->via.str.size > b->via.str.size;
  }
  }
}

static int cmp_tuple(const msgpack_object *a, const msgpack_object *b, int n)
{
  for (int i = 0; i < n; i++) {
    int c = cmp_value(&a[i], &b[i]);
    if (c) return c;
  }
  return 0;
}

static void encode(const msgpack_object *v, int n, msgpack_sbuffer *out)
{
  msgpack_sbuffer_clear(out);
  for (int i = 0; i < n; i++) rn_key_append(out, &v[i]);
}

static int sign(int x) { return (x > 0) - (x < 0); }

static int memcmp_keys(const msgpack_sbuffer *a, const msgpack_sbuffer *b)
{
  size_t n = a->size < b->size ? a->size : b->size;
  int c = memcmp(a->data, b->data, n);
  if (c) return sign(c);
  return a->size < b->size ? -1 : a->size > b->size;
}

static void test_memcmp_order_is_tuple_order(void)
{
  static tuple t[2];
  msgpack_sbuffer ka, kb;
  msgpack_sbuffer_init(&ka);
  msgpack_sbuffer_init(&kb);
  for (int round = 0; round < NTUPLES; round++) {
    for (int j = 0; j < 2; j++)
      for (int c = 0; c < NCOLS; c++) random_value(col_kind[c], &t[j].v[c], t[j].strs[c]);
    encode(t[0].v, NCOLS, &ka);
    encode(t[1].v, NCOLS, &kb);
    CHECK(memcmp_keys(&ka, &kb) == cmp_tuple(t[0].v, t[1].v, NCOLS));
    MDB_val va = { ka.size, ka.data }, vb = { kb.size, kb.data };
    CHECK(rn_store_key_cmp(&va, &vb) == memcmp_keys(&ka, &kb)); /* LMDB's order, 8 bytes at a time */
    CHECK(rn_store_key_cmp(&vb, &va) == -memcmp_keys(&ka, &kb));
  }
  msgpack_sbuffer_destroy(&ka);
  msgpack_sbuffer_destroy(&kb);
}

/* The comparator every runnel database uses orders raw bytes as memcmp
 * then length does: short, long, equal prefixes, differences at every byte. */
static void test_store_key_cmp_is_memcmp_order(void)
{
  unsigned char a[40], b[40];
  for (int round = 0; round < 200000; round++) {
    size_t la = (size_t)(rand() % 40), lb = (size_t)(rand() % 40);
    for (size_t i = 0; i < 40; i++) a[i] = (unsigned char)(rand() % 4 == 0 ? rand() : 0x10);
    memcpy(b, a, 40);
    if (rand() % 2) b[rand() % 40] = (unsigned char)rand();
    msgpack_sbuffer ka = { la, (char *)a, 0 }, kb = { lb, (char *)b, 0 };
    MDB_val va = { la, a }, vb = { lb, b };
    CHECK(rn_store_key_cmp(&va, &vb) == memcmp_keys(&ka, &kb));
  }
}

static void test_round_trip(void)
{
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  msgpack_sbuffer k;
  msgpack_sbuffer_init(&k);
  for (int round = 0; round < NTUPLES; round++) {
    int kinds[5] = { 0, 1, 2, 3, 4 };
    msgpack_object v[5], back[6];
    char strs[5][8];
    for (int c = 0; c < 5; c++) random_value(kinds[c], &v[c], strs[c]);
    encode(v, 5, &k);
    CHECK(rn_key_decode(k.data, k.size, back, 6, &z) == 5);
    if (v[1].via.f64 == 0) v[1].via.f64 = 0.0; /* -0 decodes as 0 */
    CHECK(cmp_tuple(v, back, 5) == 0);
    CHECK(signbit(back[1].via.f64) == signbit(v[1].via.f64) || v[1].via.f64 == 0);
    msgpack_zone_clear(&z);
  }
  msgpack_sbuffer_destroy(&k);
  msgpack_zone_destroy(&z);
}

static void test_prefix_of_longer_tuples(void)
{
  msgpack_sbuffer a, b;
  msgpack_sbuffer_init(&a);
  msgpack_sbuffer_init(&b);
  msgpack_object s1 = { .type = MSGPACK_OBJECT_STR, .via.str = { 2, "ab" } };
  msgpack_object s2 = { .type = MSGPACK_OBJECT_STR, .via.str = { 3, "abc" } };
  msgpack_object i7 = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 7 };
  msgpack_object t1[2] = { s1, i7 }, t2[1] = { s2 };
  encode(t1, 1, &a);
  encode(t1, 2, &b);
  CHECK(b.size > a.size && memcmp(a.data, b.data, a.size) == 0); /* (ab) prefixes (ab, 7) */
  encode(t2, 1, &b);
  CHECK(!(b.size >= a.size && memcmp(a.data, b.data, a.size) == 0)); /* but not (abc) */
  msgpack_sbuffer_destroy(&a);
  msgpack_sbuffer_destroy(&b);
}

static void test_nan_and_non_scalars_are_refused(void)
{
  msgpack_sbuffer k;
  msgpack_sbuffer_init(&k);
  msgpack_object nan = { .type = MSGPACK_OBJECT_FLOAT64, .via.f64 = NAN };
  msgpack_object arr = { .type = MSGPACK_OBJECT_ARRAY };
  CHECK(rn_key_append(&k, &nan) == -1);
  CHECK(rn_key_append(&k, &arr) == -1);
  msgpack_zone z;
  msgpack_zone_init(&z, 256);
  msgpack_object out[2];
  CHECK(rn_key_decode("\x10\x01", 2, out, 2, &z) == -1); /* truncated int */
  CHECK(rn_key_decode("\x30" "ab", 3, out, 2, &z) == -1); /* unterminated string */
  CHECK(rn_key_decode("\x77", 1, out, 2, &z) == -1);      /* unknown tag */
  msgpack_zone_destroy(&z);
  msgpack_sbuffer_destroy(&k);
}

/* msgpack-c decodes an empty string with a NULL pointer: the encoder must do
 * no arithmetic on it (UBSan's "applying zero offset to null pointer",
 * reported under clang: make asan CC=clang). */
static void test_empty_string_with_a_null_pointer(void)
{
  msgpack_sbuffer k;
  msgpack_sbuffer_init(&k);
  msgpack_object s = { .type = MSGPACK_OBJECT_STR }, b = { .type = MSGPACK_OBJECT_BIN };
  CHECK(rn_key_append(&k, &s) == 0 && rn_key_append(&k, &b) == 0);
  CHECK(k.size == 6 && memcmp(k.data, "\x30\0\0\x40\0\0", 6) == 0);
  msgpack_zone z;
  msgpack_zone_init(&z, 256);
  msgpack_object out[2];
  CHECK(rn_key_decode(k.data, k.size, out, 2, &z) == 2);
  CHECK(out[0].type == MSGPACK_OBJECT_STR && out[0].via.str.size == 0);
  CHECK(out[1].type == MSGPACK_OBJECT_BIN && out[1].via.bin.size == 0);
  msgpack_zone_destroy(&z);
  msgpack_sbuffer_destroy(&k);
}

int main(void)
{
  RUN(test_memcmp_order_is_tuple_order);
  RUN(test_store_key_cmp_is_memcmp_order);
  RUN(test_round_trip);
  RUN(test_prefix_of_longer_tuples);
  RUN(test_nan_and_non_scalars_are_refused);
  RUN(test_empty_string_with_a_null_pointer);
  return CHECK_REPORT();
}
