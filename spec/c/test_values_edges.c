/* test_values_edges.c — values at their edges (row.h): NaN as a map key,
 * rows equal but for the sign of a zero. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "row.h"

/* t(m map): one map column. */
static rn_schema *one_map(void)
{
  rn_err e;
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "m", 1, RN_T_MAP, false, NULL, &e);
  return s;
}

/* A NaN map key has no order among the others and no place in a Lua table
 * (lua_rawset raises "table index is NaN" where a sink is handed the row):
 * refused, naming the relation and the column. */
static void test_nan_map_key_is_refused(void)
{
  rn_schema *s = one_map();
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  rn_err e = { .code = RN_OK };
  msgpack_object_kv kv[1];
  kv[0].key = (msgpack_object){ .type = MSGPACK_OBJECT_FLOAT64, .via.f64 = NAN };
  kv[0].val = (msgpack_object){ .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 1 };
  msgpack_object v[1] = { { .type = MSGPACK_OBJECT_MAP, .via.map = { 1, kv } } };
  uint8_t given[1] = { 1 };
  CHECK(rn_row_normalize(s, "t", RN_ROW_FULL, v, given, &z, &e) == RN_EINVAL);
  CHECK(strstr(e.msg, "t: column \"m\"") == e.msg);
  CHECK(strstr(e.msg, "NaN") != NULL);
  msgpack_zone_destroy(&z);
  rn_schema_free(s);
}

/* Two NaN keys among others: refused too, never sorted by a comparison that
 * holds NaN equal to every number. */
static void test_nan_map_key_among_others_is_refused(void)
{
  rn_schema *s = one_map();
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  rn_err e = { .code = RN_OK };
  msgpack_object_kv kv[3];
  kv[0].key = (msgpack_object){ .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 2 };
  kv[1].key = (msgpack_object){ .type = MSGPACK_OBJECT_FLOAT64, .via.f64 = NAN };
  kv[2].key = (msgpack_object){ .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 1 };
  for (int i = 0; i < 3; i++) kv[i].val = (msgpack_object){ .type = MSGPACK_OBJECT_NIL };
  msgpack_object v[1] = { { .type = MSGPACK_OBJECT_MAP, .via.map = { 3, kv } } };
  uint8_t given[1] = { 1 };
  CHECK(rn_row_normalize(s, "t", RN_ROW_FULL, v, given, &z, &e) == RN_EINVAL);
  CHECK(strstr(e.msg, "NaN") != NULL);
  msgpack_zone_destroy(&z);
  rn_schema_free(s);
}

/* rn_row_same and rn_row_hash read -0.0 as 0.0, nested too, and only
 * there: a 0xcb byte inside a string is a string's byte. */
static void test_rows_equal_but_for_a_zero_sign(void)
{
  const char a[] = "\x92\xcb\x00\x00\x00\x00\x00\x00\x00\x00\x91\xcb\x80\x00\x00\x00\x00\x00\x00\x00";
  const char b[] = "\x92\xcb\x80\x00\x00\x00\x00\x00\x00\x00\x91\xcb\x00\x00\x00\x00\x00\x00\x00\x00";
  size_t n = sizeof a - 1;
  CHECK(rn_row_same(a, n, b, n));
  CHECK(rn_row_hash(a, n) == rn_row_hash(b, n));
  const char s1[] = "\x91\xaa\xcb\x80\x00\x00\x00\x00\x00\x00\x00\x01";
  const char s2[] = "\x91\xaa\xcb\x00\x00\x00\x00\x00\x00\x00\x00\x01";
  CHECK(!rn_row_same(s1, sizeof s1 - 1, s2, sizeof s2 - 1));
  const char one[] = "\x91\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00";
  const char minus_one[] = "\x91\xcb\xbf\xf0\x00\x00\x00\x00\x00\x00";
  CHECK(!rn_row_same(one, sizeof one - 1, minus_one, sizeof minus_one - 1));
}

int main(void)
{
  RUN(test_nan_map_key_is_refused);
  RUN(test_nan_map_key_among_others_is_refused);
  RUN(test_rows_equal_but_for_a_zero_sign);
  return CHECK_REPORT();
}
