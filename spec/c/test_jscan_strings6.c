/* test_jscan_strings6.c — the scanner's plain-run search (jscan.c reads a
 * string 8 bytes at a time): for strings of every length up to 40 with
 * any one byte at any place, and strings cut short, it reads or refuses
 * exactly as jansson does, to the same bytes. */
#include <string.h>

#include "check.h"
#include "jscan.h"
#include "json.h"

static msgpack_zone zone;

/* Whether the scanner and jansson agree on text[0..n). */
static bool agree(const char *text, size_t n)
{
  msgpack_object a, b;
  rn_err e = { .code = RN_OK };
  bool got = rn_jscan(text, n, &a, &zone) == RN_JSCAN_OK;
  bool want = rn_json_parse_jansson(text, n, &b, &zone, &e) == 0;
  if (got != want) return false;
  if (!got) return true;
  return a.type == MSGPACK_OBJECT_STR && b.type == MSGPACK_OBJECT_STR && a.via.str.size == b.via.str.size &&
         memcmp(a.via.str.ptr, b.via.str.ptr, a.via.str.size) == 0;
}

static void test_one_byte_anywhere(void)
{
  char text[64];
  int bad = 0;
  for (size_t len = 1; len <= 40 && !bad; len++)
    for (size_t at = 0; at < len && !bad; at++)
      for (int c = 1; c < 256 && !bad; c++) {
        text[0] = '"';
        memset(text + 1, 'a', len);
        text[1 + at] = (char)c;
        text[1 + len] = '"';
        if (!agree(text, len + 2)) bad = 1, fprintf(stderr, "len %zu at %zu byte %d\n", len, at, c);
        msgpack_zone_clear(&zone);
      }
  CHECK(bad == 0);
}

/* Multi-byte characters, escapes and the quote across the 8-byte steps. */
static void test_characters_across_words(void)
{
  static const char *const pieces[] = { "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\\n", "\\u00e9", "\\\"",
                                        "\xc3", "\xed\xa0\x80", "\x7f", "\x1f", " " };
  char text[96];
  int bad = 0;
  for (size_t lead = 0; lead <= 17 && !bad; lead++)
    for (size_t k = 0; k < sizeof pieces / sizeof *pieces && !bad; k++)
      for (size_t tail = 0; tail <= 9 && !bad; tail++) {
        size_t n = 0, pl = strlen(pieces[k]);
        text[n++] = '"';
        memset(text + n, 'b', lead), n += lead;
        memcpy(text + n, pieces[k], pl), n += pl;
        memset(text + n, 'c', tail), n += tail;
        text[n++] = '"';
        if (!agree(text, n)) bad = 1, fprintf(stderr, "lead %zu piece %zu tail %zu\n", lead, k, tail);
        if (!agree(text, n - 1)) bad = 1, fprintf(stderr, "cut: lead %zu piece %zu tail %zu\n", lead, k, tail);
        msgpack_zone_clear(&zone);
      }
  CHECK(bad == 0);
}

int main(void)
{
  msgpack_zone_init(&zone, 4096);
  RUN(test_one_byte_anywhere);
  RUN(test_characters_across_words);
  msgpack_zone_destroy(&zone);
  return CHECK_REPORT();
}
