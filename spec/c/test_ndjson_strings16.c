/* test_ndjson_strings16.c — the JSON writer (ndjson.c's rn_json_value)
 * and a msgpack string that is not UTF-8. row.c stores such a value as
 * bytes, but a state an earlier runnel wrote may hold it as a string:
 * jansson will not dump it, and the writer noted "out of memory", so the
 * NDJSON sink failed the group ("t: out of memory delivering group N")
 * every time, for good. It is written as bytes are (base64), and nothing
 * is noted. */
#include <string.h>

#include "buf.h"
#include "check.h"
#include "ndjson.h"

static void written(const msgpack_object *v, const char *want)
{
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  rn_oom_clear();
  rn_json_value(&b, v, NULL);
  CHECK(!rn_oom());
  CHECK(b.size == strlen(want) && memcmp(b.data, want, b.size) == 0);
  if (b.size != strlen(want) || memcmp(b.data, want, b.size) != 0)
    fprintf(stderr, "  wrote %.*s, want %s\n", (int)b.size, b.data ? b.data : "", want);
  msgpack_sbuffer_destroy(&b);
}

static void test_string_not_utf8_is_written_as_bytes(void)
{
  msgpack_object s = { .type = MSGPACK_OBJECT_STR, .via.str = { 4, "\xff\0\xc3(" } };
  written(&s, "\"/wDDKA==\"");
  msgpack_object ok = { .type = MSGPACK_OBJECT_STR, .via.str = { 7, "Stra\xc3\x9f" "e" } };
  written(&ok, "\"Stra\xc3\x9f" "e\"");
  msgpack_object_kv kv[1] = { { .key = s, .val = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 1 } } };
  msgpack_object m = { .type = MSGPACK_OBJECT_MAP, .via.map = { 1, kv } };
  written(&m, "{\"/wDDKA==\":1}");
  msgpack_object l = { .type = MSGPACK_OBJECT_ARRAY, .via.array = { 1, &s } };
  written(&l, "[\"/wDDKA==\"]");
}

int main(void)
{
  RUN(test_string_not_utf8_is_written_as_bytes);
  return CHECK_REPORT();
}
