/* test_key_format.c — rn_key_format, the key an error names ("no row with
 * key (…)"): a string key's bytes escaped so that a NUL cannot end the
 * message early and name another key, and the text always ends within the
 * buffer, however small. */
#include <string.h>

#include "check.h"
#include "row.h"
#include "schema.h"

static rn_schema *two_keys(void)
{
  rn_err e;
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "a", 1, RN_T_STRING, false, NULL, &e);
  rn_schema_add(s, "b", 1, RN_T_INT, false, NULL, &e);
  int key[2] = { 0, 1 };
  rn_schema_set_key(s, key, 2, "t", &e);
  return s;
}

static void test_escapes_string_keys(void)
{
  rn_schema *s = two_keys();
  static const char raw[] = "a\0\"\\\n\t\x01\x7f\xc3\xa9z";
  msgpack_object vals[2] = { { .type = MSGPACK_OBJECT_STR, .via.str = { sizeof raw - 1, raw } },
                             { .type = MSGPACK_OBJECT_NEGATIVE_INTEGER, .via.i64 = -3 } };
  char buf[256];
  rn_key_format(s, vals, buf, sizeof buf);
  CHECK(strcmp(buf, "a = \"a\\0\\\"\\\\\\n\\t\\x01\\x7f\xc3\xa9z\", b = -3") == 0);
  rn_schema_free(s);
}

static void test_ends_within_any_buffer(void)
{
  rn_schema *s = two_keys();
  static const char raw[] = "\0\0\0\0\"\"\"\"abcdefgh\n\n";
  msgpack_object vals[2] = { { .type = MSGPACK_OBJECT_STR, .via.str = { sizeof raw - 1, raw } },
                             { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 123456 } };
  char full[256];
  rn_key_format(s, vals, full, sizeof full);
  for (size_t len = 1; len < 80; len++) {
    char buf[96];
    memset(buf, 'Z', sizeof buf);
    rn_key_format(s, vals, buf, len);
    CHECK(memchr(buf, '\0', len) != NULL); /* ends inside */
    for (size_t i = len; i < sizeof buf; i++) CHECK(buf[i] == 'Z');
    CHECK(strncmp(buf, full, strlen(buf)) == 0 || strstr(buf, "...\"")); /* the whole one's start, or cut */
    /* a string shown closed is the whole key, never a shorter one */
    CHECK(strstr(buf, "\"\\0\\0\\0\\0\\\"\\\"\\\"\\\"abcdefgh\\n\\n\"") || strstr(buf, "...\"") ||
          !strchr(buf, '"'));
  }
  rn_schema_free(s);
}

/* Floats as the shortest text that reads back (msgpack-c's %f printed 300
 * digits for 1e300, or nothing when they did not fit), one that looks like
 * an integer with ".0" as Lua writes it (since 0.41), bytes escaped past
 * ASCII too. */
static void test_floats_and_bytes(void)
{
  rn_err e;
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "f", 1, RN_T_FLOAT, false, NULL, &e);
  rn_schema_add(s, "b", 1, RN_T_BYTES, false, NULL, &e);
  int key[2] = { 0, 1 };
  rn_schema_set_key(s, key, 2, "t", &e);
  static const struct { double f; const char *want; } cases[] = {
    { 1.5, "f = 1.5, b = \"\\0\\xff\"" }, { 1e300, "f = 1e+300, b = \"\\0\\xff\"" },
    { -0.0, "f = -0.0, b = \"\\0\\xff\"" }, { 0.1, "f = 0.1, b = \"\\0\\xff\"" },
    { 1.0 / 3, "f = 0.3333333333333333, b = \"\\0\\xff\"" }, { -1.0 / 0.0, "f = -inf, b = \"\\0\\xff\"" },
    { 7.0, "f = 7.0, b = \"\\0\\xff\"" }, { 1e20, "f = 1e+20, b = \"\\0\\xff\"" } };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    msgpack_object vals[2] = { { .type = MSGPACK_OBJECT_FLOAT64, .via.f64 = cases[i].f },
                               { .type = MSGPACK_OBJECT_BIN, .via.bin = { 2, "\0\xff" } } };
    char buf[256];
    rn_key_format(s, vals, buf, sizeof buf);
    CHECK(strcmp(buf, cases[i].want) == 0);
    /* cut short: never a shorter number */
    rn_key_format(s, vals, buf, 7);
    CHECK(strcmp(buf, "f = ") == 0); /* "f = -0" would be another key's text */
  }
  rn_schema_free(s);
}

int main(void)
{
  RUN(test_escapes_string_keys);
  RUN(test_ends_within_any_buffer);
  RUN(test_floats_and_bytes);
  return CHECK_REPORT();
}
