/* test_jscan.c — the one-pass JSON reader (jscan.c) and rn_json_parse
 * around it: what it reads, where strings live, and that what it refuses
 * gets jansson's wording. fuzz/fuzz_json.c compares it with jansson on
 * arbitrary text. */
#include <string.h>

#include "check.h"
#include "jscan.h"
#include "json.h"

static msgpack_zone zone;

static int parse(const char *text, msgpack_object *out, rn_err *e)
{
  *e = (rn_err){ .code = RN_OK };
  return rn_json_parse(text, strlen(text), out, &zone, e);
}

static bool str_is(const msgpack_object *v, const char *s)
{
  return v->type == MSGPACK_OBJECT_STR && v->via.str.size == strlen(s) && memcmp(v->via.str.ptr, s, v->via.str.size) == 0;
}

/* An fkjoin line: the map in the order written; plain strings point into
 * the text, escaped ones are decoded copies. */
static void test_reads_a_line(void)
{
  const char *text = "{\"rel\":\"players\",\"op\":\"update\",\"row\":{\"id\":5,\"name\":\"p\\u00e95\",\"team_id\":null,\"score\":-12}}";
  msgpack_object v;
  rn_err e;
  CHECK(parse(text, &v, &e) == 0);
  CHECK(v.type == MSGPACK_OBJECT_MAP && v.via.map.size == 3);
  if (check_failed_now) return;
  const msgpack_object_kv *kv = v.via.map.ptr;
  CHECK(str_is(&kv[0].key, "rel") && str_is(&kv[0].val, "players"));
  CHECK(kv[0].val.via.str.ptr == text + 8); /* not copied */
  const msgpack_object *row = &kv[2].val;
  CHECK(row->type == MSGPACK_OBJECT_MAP && row->via.map.size == 4);
  if (check_failed_now) return;
  CHECK(row->via.map.ptr[0].val.type == MSGPACK_OBJECT_POSITIVE_INTEGER && row->via.map.ptr[0].val.via.u64 == 5);
  CHECK(str_is(&row->via.map.ptr[1].val, "p\xc3\xa9" "5"));
  CHECK(row->via.map.ptr[2].val.type == MSGPACK_OBJECT_NIL);
  CHECK(row->via.map.ptr[3].val.type == MSGPACK_OBJECT_NEGATIVE_INTEGER && row->via.map.ptr[3].val.via.i64 == -12);
}

static void test_numbers(void)
{
  msgpack_object v;
  rn_err e;
  CHECK(parse("[-0, 9223372036854775807, -9223372036854775808, 2.5, 1e2, -0.0]", &v, &e) == 0);
  if (check_failed_now) return;
  const msgpack_object *a = v.via.array.ptr;
  CHECK(a[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER && a[0].via.u64 == 0);
  CHECK(a[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER && a[1].via.u64 == 9223372036854775807ull);
  CHECK(a[2].type == MSGPACK_OBJECT_NEGATIVE_INTEGER && a[2].via.i64 == INT64_MIN);
  CHECK(a[3].type == MSGPACK_OBJECT_FLOAT64 && a[3].via.f64 == 2.5);
  CHECK(a[4].type == MSGPACK_OBJECT_FLOAT64 && a[4].via.f64 == 100.0);
  CHECK(a[5].type == MSGPACK_OBJECT_FLOAT64 && a[5].via.f64 == 0.0);
  CHECK(parse("9223372036854775808", &v, &e) == RN_EINVAL);
  CHECK(strcmp(e.msg, "the integer 9223372036854775808 is beyond int64 (-9223372036854775808 to 9223372036854775807) at column 1") == 0);
}

/* Refusals are worded by jansson, exactly as before the scanner. */
static void test_refusals_keep_their_words(void)
{
  msgpack_object v;
  rn_err e;
  CHECK(parse("{not json", &v, &e) == RN_EINVAL);
  CHECK(strcmp(e.msg, "malformed JSON at column 4: string or '}' expected near 'not'") == 0);
  CHECK(parse("[1,]", &v, &e) == RN_EINVAL);
  CHECK(strncmp(e.msg, "malformed JSON at column 4:", 27) == 0);
  CHECK(parse("{\"a\\u0000\":1}", &v, &e) == RN_EINVAL);
  CHECK(strstr(e.msg, "NUL byte in object key") != NULL);
  CHECK(parse("[\"\\ud800\"]", &v, &e) == RN_EINVAL);
  CHECK(strstr(e.msg, "invalid Unicode") != NULL);
}

/* Past 16 keys an object's keys are checked for duplicates when it closes:
 * the message still names the key and its column. */
static void test_duplicate_in_a_wide_object(void)
{
  char text[1024] = "{";
  for (int i = 1; i <= 40; i++) snprintf(text + strlen(text), sizeof text - strlen(text), "\"k%d\":%d,", i, i);
  strcat(text, "\"k7\":0}");
  msgpack_object v;
  rn_err e;
  CHECK(parse(text, &v, &e) == RN_EINVAL);
  char want[64];
  snprintf(want, sizeof want, "duplicate key \"k7\" at column %zu", strlen(text) - 6);
  CHECK(strcmp(e.msg, want) == 0);
  memcpy(text + strlen(text) - 7, "\"k0\"", 4); /* the last key new: no duplicate */
  CHECK(parse(text, &v, &e) == 0);
  CHECK(v.type == MSGPACK_OBJECT_MAP && v.via.map.size == 41);
}

/* Nested 64 deep reads; 65 is refused, as json.c always did. */
static void test_depth(void)
{
  char text[200];
  msgpack_object v;
  rn_err e;
  memset(text, '[', 64);
  strcpy(text + 64, "1");
  memset(text + 65, ']', 64);
  text[129] = '\0';
  CHECK(parse(text, &v, &e) == 0);
  memset(text, '[', 65);
  strcpy(text + 65, "1");
  memset(text + 66, ']', 65);
  text[131] = '\0';
  CHECK(parse(text, &v, &e) == RN_EINVAL);
  CHECK(strcmp(e.msg, "JSON nested more than 64 deep") == 0);
}

/* jansson reads one NUL byte right after a number or a literal as
 * nothing ("[1\0,2]" as [1,2], though two NULs or one after a string it
 * refuses); rn_json_parse refuses it as the scanner does (since 19: JSON
 * has no NUL outside strings, and one there is most often a torn or
 * zero-filled file). */
static void test_nul_outside_strings_refused(void)
{
  msgpack_object v;
  rn_err e = { .code = RN_OK };
  CHECK(rn_jscan("[1\0]", 4, &v, &zone) == RN_JSCAN_REFUSED);
  CHECK(rn_json_parse("[1\0]", 4, &v, &zone, &e) == RN_EINVAL);
  CHECK(strcmp(e.msg, "malformed JSON at column 3: a NUL byte outside a string") == 0);
  CHECK(rn_json_parse_jansson("[1\0,2]", 6, &v, &zone, &e) == RN_EINVAL);
  CHECK(rn_json_parse("[true\0]", 7, &v, &zone, &e) == RN_EINVAL);
  CHECK(rn_json_parse("[\"a\\u0000\"]", 11, &v, &zone, &e) == 0); /* inside a string, escaped: a NUL byte */
  CHECK(v.via.array.ptr[0].via.str.size == 2 && v.via.array.ptr[0].via.str.ptr[1] == '\0');
}

int main(void)
{
  msgpack_zone_init(&zone, 4096);
  RUN(test_reads_a_line);
  RUN(test_numbers);
  RUN(test_refusals_keep_their_words);
  RUN(test_duplicate_in_a_wide_object);
  RUN(test_depth);
  RUN(test_nul_outside_strings_refused);
  msgpack_zone_destroy(&zone);
  return CHECK_REPORT();
}
