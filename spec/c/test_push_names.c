/* test_push_names.c — names in msgpack given to rn_push and in struct and
 * map values (issue 10 #6, #16): compared by length and bytes, quoted with
 * their NUL and control bytes escaped, given twice an error. */
#include <msgpack.h>
#include <string.h>

#include "check.h"
#include "json.h"
#include "row.h"
#include "runnel.h"

static const rn_column_def cols[] = { { "id", "int", 0, NULL, 0, NULL }, { "name", "string", 1, NULL, 0, NULL } };
static const char *const key[] = { "id" };

static int events;
static int count_event(void *ctx, const rn_event *ev) { (void)ctx; (void)ev; events++; return 0; }

/* Inserts a map of n keys (with their lengths) holding ints. */
static int insert_keys(rn_pipeline *p, rn_rel *r, int n, const char *const *keys, const size_t *lens)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, (size_t)n);
  for (int i = 0; i < n; i++) {
    msgpack_pack_str_with_body(&pk, keys[i], lens[i]);
    if (strcmp(keys[i], "id") == 0) msgpack_pack_int(&pk, 1);
    else msgpack_pack_str_with_body(&pk, "v", 1);
  }
  int rc = rn_insert(p, r, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

static void test_column_name_with_nul_is_unknown(void)
{
  rn_pipeline *p;
  rn_rel *r;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "players", cols, 2, key, 1, &r) == 0);
  CHECK(rn_subscribe(p, r, count_event, NULL) == 0);
  events = 0;
  const char *const keys[] = { "id", "name\0evil" };
  const size_t lens[] = { 2, 9 };
  CHECK(insert_keys(p, r, 2, keys, lens) == RN_EINVAL);
  CHECK(strcmp(rn_errmsg(p), "players: unknown column \"name\\u0000evil\"") == 0);
  const char *const nl[] = { "id", "a\nb" };
  const size_t nl_lens[] = { 2, 3 };
  CHECK(insert_keys(p, r, 2, nl, nl_lens) == RN_EINVAL);
  CHECK(strcmp(rn_errmsg(p), "players: unknown column \"a\\nb\"") == 0);
  CHECK(events == 0 && rn_seq(p) == 0);
  rn_pipeline_close(p);
}

static void test_duplicate_column_is_an_error(void)
{
  rn_pipeline *p;
  rn_rel *r;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "players", cols, 2, key, 1, &r) == 0);
  CHECK(rn_subscribe(p, r, count_event, NULL) == 0);
  events = 0;
  const char *const keys[] = { "id", "name", "name" };
  const size_t lens[] = { 2, 4, 4 };
  CHECK(insert_keys(p, r, 3, keys, lens) == RN_EINVAL);
  CHECK(strcmp(rn_errmsg(p), "players: duplicate column \"name\"") == 0);
  const char *const ids[] = { "id", "id" };
  const size_t id_lens[] = { 2, 2 };
  CHECK(insert_keys(p, r, 2, ids, id_lens) == RN_EINVAL);
  CHECK(strcmp(rn_errmsg(p), "players: duplicate column \"id\"") == 0);
  CHECK(events == 0 && rn_seq(p) == 0);
  CHECK(insert_keys(p, r, 2, keys, lens) == 0); /* once each is fine */
  CHECK(events == 1);
  rn_pipeline_close(p);
}

static msgpack_object str_obj(const char *s, size_t len)
{
  msgpack_object o = { .type = MSGPACK_OBJECT_STR };
  o.via.str.ptr = s;
  o.via.str.size = (uint32_t)len;
  return o;
}

static msgpack_object int_obj(uint64_t u)
{
  msgpack_object o = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER };
  o.via.u64 = u;
  return o;
}

static void test_struct_and_map_keys_given_twice(void)
{
  rn_err e = { .code = RN_OK };
  rn_schema *pos = rn_schema_new();
  rn_schema_add(pos, "x", 1, RN_T_INT, false, NULL, &e);
  rn_schema_add(pos, "y", 1, RN_T_INT, true, NULL, &e);
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "m", 1, RN_T_MAP, true, NULL, &e);
  rn_schema_add(s, "pos", 3, RN_T_STRUCT, true, pos, &e);
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  uint8_t given[2] = { 0, 1 };
  msgpack_object v[2];
  msgpack_object_kv twice[2] = { { str_obj("x", 1), int_obj(1) }, { str_obj("x", 1), int_obj(2) } };
  v[1].type = MSGPACK_OBJECT_MAP; v[1].via.map.size = 2; v[1].via.map.ptr = twice;
  CHECK(rn_row_normalize(s, "r", RN_ROW_FULL, v, given, &z, &e) == RN_EINVAL);
  CHECK(strcmp(e.msg, "r: column \"pos\": duplicate field \"x\"") == 0);
  msgpack_object_kv nul[1] = { { str_obj("x\0y", 3), int_obj(1) } };
  v[1].type = MSGPACK_OBJECT_MAP; v[1].via.map.size = 1; v[1].via.map.ptr = nul;
  CHECK(rn_row_normalize(s, "r", RN_ROW_FULL, v, given, &z, &e) == RN_EINVAL);
  CHECK(strcmp(e.msg, "r: column \"pos\": unknown field \"x\\u0000y\"") == 0);
  /* a value that looks like the "not given" mark of old is still a value */
  msgpack_object ext = { .type = MSGPACK_OBJECT_EXT };
  msgpack_object_kv odd[1] = { { str_obj("x", 1), ext } };
  v[1].type = MSGPACK_OBJECT_MAP; v[1].via.map.size = 1; v[1].via.map.ptr = odd;
  CHECK(rn_row_normalize(s, "r", RN_ROW_FULL, v, given, &z, &e) == RN_EINVAL);
  CHECK(strcmp(e.msg, "r: column \"pos\" field \"x\": expected int, got ext") == 0);
  given[0] = 1;
  given[1] = 0;
  msgpack_object_kv map[2] = { { str_obj("k", 1), int_obj(1) }, { str_obj("k", 1), int_obj(2) } };
  v[0].type = MSGPACK_OBJECT_MAP; v[0].via.map.size = 2; v[0].via.map.ptr = map;
  CHECK(rn_row_normalize(s, "r", RN_ROW_FULL, v, given, &z, &e) == RN_EINVAL);
  CHECK(strcmp(e.msg, "r: column \"m\": duplicate key \"k\"") == 0);
  msgpack_zone_destroy(&z);
  rn_schema_free(s);
}

/* Regression (make fuzz, fuzz_row): a field key that is no string and
 * prints longer than the message's room (bytes, here) left msgpack-c's
 * print buffer unended, and the message read past it (ASan: a
 * stack-buffer-overflow in rn_err_set). The key is cut where the room
 * ends. */
static void test_long_key_that_is_no_string(void)
{
  rn_err e = { .code = RN_OK };
  rn_schema *pos = rn_schema_new();
  rn_schema_add(pos, "x", 1, RN_T_INT, true, NULL, &e);
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "pos", 3, RN_T_STRUCT, true, pos, &e);
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  uint8_t given[1] = { 1 };
  char bytes[300];
  memset(bytes, 'a', sizeof bytes);
  msgpack_object bin = { .type = MSGPACK_OBJECT_BIN };
  bin.via.bin.ptr = bytes;
  bin.via.bin.size = sizeof bytes;
  msgpack_object_kv kv[1] = { { bin, int_obj(1) } };
  msgpack_object v[1];
  v[0].type = MSGPACK_OBJECT_MAP; v[0].via.map.size = 1; v[0].via.map.ptr = kv;
  CHECK(rn_row_normalize(s, "r", RN_ROW_FULL, v, given, &z, &e) == RN_EINVAL);
  static const char head[] = "r: column \"pos\": unknown field \"aaa";
  CHECK(strncmp(e.msg, head, sizeof head - 1) == 0);
  CHECK(strlen(e.msg) <= sizeof head - 1 + 127);
  for (const char *c = e.msg + sizeof head - 1; *c; c++) CHECK(*c == 'a');
  char buf[16];
  memset(buf, 'z', sizeof buf);
  CHECK(rn_object_text(buf, sizeof buf, &bin) == 15 && buf[15] == '\0');
  msgpack_zone_destroy(&z);
  rn_schema_free(s);
}

static void test_quote(void)
{
  char buf[16];
  CHECK(strcmp(rn_json_quote(buf, sizeof buf, "a\"\\\x7f", 4), "\"a\\\"\\\\\\u007f\"") == 0);
  CHECK(strcmp(rn_json_quote(buf, sizeof buf, "", 0), "\"\"") == 0);
  CHECK(strcmp(rn_json_quote(buf, sizeof buf, "abcdefghijklmnop", 16), "\"abcdefghij\xe2\x80\xa6\"") == 0);
  CHECK(strcmp(rn_json_quote(buf, sizeof buf, "abcdefghi\xc3\xa9xyz", 14), "\"abcdefghi\xe2\x80\xa6\"") == 0);
}

int main(void)
{
  RUN(test_column_name_with_nul_is_unknown);
  RUN(test_duplicate_column_is_an_error);
  RUN(test_struct_and_map_keys_given_twice);
  RUN(test_long_key_that_is_no_string);
  RUN(test_quote);
  return CHECK_REPORT();
}
