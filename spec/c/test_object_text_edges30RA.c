/* test_object_text_edges30RA.c — rn_object_text (json.c), which runnel
 * inspect writes defaults with and messages write values with: a float
 * is written as Lua writes it (rn_float_text), but only at the top; one
 * inside a list or a map went to msgpack-c's printer, which writes %f:
 * a list default { 1.5, 1e300 } showed as [1.500000, 1000…(301 digits)].
 * Now floats are written alike at every depth; the rest as msgpack-c
 * writes it, and the text always ends within cap (a cut string as
 * msgpack-c cuts it). */
#include <msgpack.h>
#include <string.h>

#include "check.h"
#include "json.h"

static msgpack_object num(double d)
{
  msgpack_object o = { .type = MSGPACK_OBJECT_FLOAT64 };
  o.via.f64 = d;
  return o;
}

static msgpack_object str(const char *s)
{
  msgpack_object o = { .type = MSGPACK_OBJECT_STR };
  o.via.str.ptr = s;
  o.via.str.size = (uint32_t)strlen(s);
  return o;
}

static void test_nested_floats(void)
{
  msgpack_object inner[2] = { num(0.1), { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 7 } };
  msgpack_object items[4] = { num(1.5), num(1e300), num(2.0), { .type = MSGPACK_OBJECT_ARRAY } };
  items[3].via.array.size = 2;
  items[3].via.array.ptr = inner;
  msgpack_object list = { .type = MSGPACK_OBJECT_ARRAY };
  list.via.array.size = 4;
  list.via.array.ptr = items;
  char buf[256];
  int n = rn_object_text(buf, sizeof buf, &list);
  CHECK(strcmp(buf, "[1.5, 1e+300, 2.0, [0.1, 7]]") == 0);
  CHECK(n == (int)strlen(buf));

  msgpack_object_kv kv[2] = { { str("a"), num(-0.0) }, { str("b"), str("x") } };
  msgpack_object map = { .type = MSGPACK_OBJECT_MAP };
  map.via.map.size = 2;
  map.via.map.ptr = kv;
  n = rn_object_text(buf, sizeof buf, &map);
  CHECK(strcmp(buf, "{\"a\"=>-0.0, \"b\"=>\"x\"}") == 0);
  CHECK(n == (int)strlen(buf));

  msgpack_object empty = { .type = MSGPACK_OBJECT_ARRAY };
  rn_object_text(buf, sizeof buf, &empty);
  CHECK(strcmp(buf, "[]") == 0);
}

static void test_cut(void)
{
  msgpack_object items[3] = { num(1.5), num(1e300), str("long enough to be cut") };
  msgpack_object list = { .type = MSGPACK_OBJECT_ARRAY };
  list.via.array.size = 3;
  list.via.array.ptr = items;
  for (size_t cap = 1; cap < 40; cap++) {
    char buf[48];
    memset(buf, 'Z', sizeof buf);
    int n = rn_object_text(buf, cap, &list);
    CHECK(memchr(buf, '\0', cap) != NULL); /* ended within cap */
    CHECK(buf[cap] == 'Z');                /* nothing written past it */
    CHECK(n == (int)strlen(buf));
    CHECK(strncmp(buf, "[1.5, 1e+300, ", strlen(buf) < 14 ? strlen(buf) : 14) == 0); /* the floats as Lua */
  }
}

int main(void)
{
  RUN(test_nested_floats);
  RUN(test_cut);
  return CHECK_REPORT();
}
