/* test_err_utf8_edges28c.c — messages whose end a buffer cut (review
 * 28c): what is appended after rn_err_set made the message (a "did you
 * mean" suggestion) ends on a whole character too. Uses runnel.h only. */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runnel.h"

/* Whether s is valid UTF-8 (no overlong form, surrogate, or code point
 * past U+10FFFF, nothing cut short). */
static int utf8_ok(const char *str)
{
  const unsigned char *s = (const unsigned char *)str;
  while (*s) {
    unsigned c = *s, n = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2
                                                               : c >= 0xF0 && c <= 0xF4 ? 3 : 9;
    if (n == 9) return 0;
    unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    for (unsigned i = 1; i <= n; i++, lo = 0x80, hi = 0xBF)
      if (s[i] < lo || s[i] > hi) return 0;
    s += n + 1;
  }
  return 1;
}

/* Tables whose names are control bytes (each "\u0001" in a message)
 * and "t" or "tt", a column of 30 "é" and "a"; a change naming the column of 30
 * "é" and "b": the message ends in the suggestion of the column, cut by
 * the message's 1024 bytes somewhere in its "é"s as the name varies.
 * Regression: the suggestion was appended with snprintf, which cut it in
 * the middle of a character half the time. */
static void test_suggestion_cut_ends_on_a_character(void)
{
  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/runnel-edges28c-XXXXXX");
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir };
  char err[512] = "";
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, err, sizeof err) == 0);
  char col[128] = "", given[128] = "";
  for (int i = 0; i < 30; i++) strcat(col, "\xc3\xa9");
  strcpy(given, col);
  strcat(col, "a");
  strcat(given, "b");
  rn_column_def cols[] = { { .name = "id", .type = "int" }, { .name = col, .type = "int" } };
  const char *const key[] = { "id" };
  int bad = 0;
  for (int at = 0; at < 24; at++) {
    char name[256];
    int ctl = 140 + at / 2;
    memset(name, 1, (size_t)ctl);
    strcpy(name + ctl, at % 2 ? "tt" : "t");
    rn_rel *t;
    CHECK(rn_declare_table(p, name, cols, 2, key, 1, &t) == 0);
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 2);
    msgpack_pack_str_with_body(&pk, "id", 2);
    msgpack_pack_int64(&pk, 1);
    msgpack_pack_str_with_body(&pk, given, strlen(given));
    msgpack_pack_int64(&pk, 1);
    CHECK(rn_push(p, t, RN_OP_INSERT, sb.data, sb.size) == RN_EINVAL);
    msgpack_sbuffer_destroy(&sb);
    const char *msg = rn_errmsg(p);
    CHECK(strstr(msg, "unknown column") != NULL);
    if (!utf8_ok(msg)) {
      if (!bad++) fprintf(stderr, "  %d control bytes: the message (%zu bytes) ends \"%s\"\n", ctl, strlen(msg),
                          msg + strlen(msg) - 12);
    }
  }
  CHECK(bad == 0);
  CHECK(rn_pipeline_close(p) == 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_suggestion_cut_ends_on_a_character);
  printf("%d passed, %d failed\n", check_passed, check_failed);
  return check_failed != 0;
}
