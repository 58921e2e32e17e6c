/* test_read_hostile.c — rn_get and cursors given what a careless host
 * gives them: a key that is not a map (nil, an array), a msgpack buffer
 * that lies about its length or carries trailing bytes, NaN; a cursor read
 * past its end, or after its pipeline closed. Each refused in rn_errmsg
 * naming the relation, or answered as documented. Uses runnel.h only. */
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runnel.h"

static const char *const key[] = { "id" };

static rn_pipeline *open_with_row(char *dir, rn_rel **out)
{
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts o = { .path = dir };
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  static const rn_column_def cols[] = { { "id", "float", 0, NULL, 0, NULL }, { "name", "string", 1, NULL, 0, NULL } };
  CHECK(rn_declare_table(p, "t", cols, 2, key, 1, out) == 0);
  static const char row[] = "\x82\xa2id\x01\xa4name\xa1x"; /* {id = 1, name = "x"} */
  CHECK(rn_push(p, *out, RN_OP_INSERT, row, sizeof row - 1) == 0);
  return p;
}

/* rn_get of the msgpack literal lit: its return code; *row set. */
#define GET(lit) rn_get(p, t, lit, sizeof lit - 1, &row, &len, &id)

static void test_keys(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  rn_rel *t;
  rn_pipeline *p = open_with_row(dir, &t);
  const void *row;
  size_t len;
  uint64_t id;
  CHECK(GET("\xc0") == RN_EINVAL && row == NULL);
  CHECK(strcmp(rn_errmsg(p), "t: rn_get: the key is a msgpack map of the key columns by name (as {\"id\": …}), "
               "got nil") == 0);
  CHECK(GET("\x91\x01") == RN_EINVAL);
  CHECK(strstr(rn_errmsg(p), "t: rn_get: the key is a msgpack map of the key columns") != NULL);
  CHECK(GET("\x81\xa2id\xdb\x7f\xff\xff\xff") == RN_EINVAL); /* a str32 of 2 GB in 9 bytes */
  CHECK(strcmp(rn_errmsg(p), "t: rn_get: the key is not one msgpack value") == 0);
  CHECK(GET("\x82\xa2id\x01") == RN_EINVAL); /* a map of two pairs holding one */
  CHECK(GET("\x81\xa2id\x01\x01") == RN_EINVAL); /* trailing bytes */
  CHECK(rn_get(p, t, "\x81\xa2id\x01", 0, &row, &len, &id) == RN_EINVAL);
  CHECK(GET("\x81\xa2id\xcb\x7f\xf8\0\0\0\0\0\0") == RN_EINVAL);
  CHECK(strstr(rn_errmsg(p), "NaN") != NULL);
  CHECK(GET("\x81\xa2id\x01") == 0 && row != NULL && id == 1); /* an int for a float key: the same key */
  CHECK(GET("\x81\xa2id\xcb\x80\0\0\0\0\0\0\0") == 0 && row == NULL); /* -0.0: another key than 1 */
  rn_pipeline_close(p);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

static void test_cursor_past_its_end_and_its_pipeline(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  rn_rel *t;
  rn_pipeline *p = open_with_row(dir, &t);
  rn_cursor *c, *kept;
  const void *row;
  size_t len;
  uint64_t id;
  int done = 0;
  CHECK(rn_cursor_open(p, t, &c) == 0 && rn_cursor_open(p, t, &kept) == 0);
  CHECK(rn_cursor_next(c, &row, &len, &id, &done) == 0 && !done && row && id == 1);
  for (int i = 0; i < 3; i++) CHECK(rn_cursor_next(c, &row, &len, &id, &done) == 0 && done && !row);
  rn_cursor_close(c);
  rn_pipeline_close(p);
  CHECK(rn_cursor_next(kept, &row, &len, &id, &done) == RN_EMISUSE && !row);
  rn_cursor_close(kept);
  rn_cursor_close(NULL);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_keys);
  RUN(test_cursor_past_its_end_and_its_pipeline);
  return CHECK_REPORT();
}
