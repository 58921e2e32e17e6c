/* test_row.c — checking, normalizing and encoding rows (row.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "row.h"

static msgpack_object obj_int(int64_t i)
{
  msgpack_object o;
  if (i >= 0) { o.type = MSGPACK_OBJECT_POSITIVE_INTEGER; o.via.u64 = (uint64_t)i; }
  else { o.type = MSGPACK_OBJECT_NEGATIVE_INTEGER; o.via.i64 = i; }
  return o;
}
static msgpack_object obj_f(double d) { msgpack_object o = { .type = MSGPACK_OBJECT_FLOAT64 }; o.via.f64 = d; return o; }
static msgpack_object obj_s(const char *s)
{
  msgpack_object o = { .type = MSGPACK_OBJECT_STR };
  o.via.str.ptr = s;
  o.via.str.size = (uint32_t)strlen(s);
  return o;
}
static msgpack_object obj_nil(void) { msgpack_object o = { .type = MSGPACK_OBJECT_NIL }; return o; }

/* players(id int key, "@NAME" string, score int default 0, tags list null, w float null) */
static rn_schema *players(void)
{
  rn_err e;
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "id", 2, RN_T_INT, false, NULL, &e);
  rn_schema_add(s, "@NAME", 5, RN_T_STRING, false, NULL, &e);
  rn_schema_add(s, "score", 5, RN_T_INT, false, NULL, &e);
  rn_schema_add(s, "tags", 4, RN_T_LIST, true, NULL, &e);
  rn_schema_add(s, "w", 1, RN_T_FLOAT, true, NULL, &e);
  msgpack_object zero = obj_int(0);
  rn_schema_set_default(s, 2, &zero, "players", &e);
  int key = 0;
  rn_schema_set_key(s, &key, 1, "players", &e);
  return s;
}

static void test_full_row_defaults_and_coercion(void)
{
  rn_schema *s = players();
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  rn_err e = { .code = RN_OK };
  msgpack_object v[5] = { obj_f(7.0), obj_s("ann"), obj_nil(), obj_nil(), obj_int(2) };
  uint8_t given[5] = { 1, 1, 0, 0, 1 };
  CHECK(rn_row_normalize(s, "players", RN_ROW_FULL, v, given, &z, &e) == 0);
  CHECK(v[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER && v[0].via.u64 == 7); /* 7.0 -> int 7 */
  CHECK(v[2].type == MSGPACK_OBJECT_POSITIVE_INTEGER && v[2].via.u64 == 0); /* default */
  CHECK(v[3].type == MSGPACK_OBJECT_NIL);                                    /* nullable, absent */
  CHECK(v[4].type == MSGPACK_OBJECT_FLOAT64 && v[4].via.f64 == 2.0);         /* int -> float */
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  rn_row_pack(s, v, &sb);
  const msgpack_object *back = rn_row_unpack(sb.data, sb.size, 5, &z);
  CHECK(back != NULL);
  CHECK(back && back[4].type == MSGPACK_OBJECT_FLOAT64); /* 2.0 stays a float */
  CHECK(back && back[1].via.str.size == 3 && memcmp(back[1].via.str.ptr, "ann", 3) == 0);
  CHECK(rn_row_unpack(sb.data, sb.size, 4, &z) == NULL); /* wrong width */
  msgpack_sbuffer_destroy(&sb);
  msgpack_zone_destroy(&z);
  rn_schema_free(s);
}

static void expect_error(rn_rowmode mode, msgpack_object *v, uint8_t *given, const char *msg)
{
  rn_schema *s = players();
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  rn_err e = { .code = RN_OK };
  CHECK(rn_row_normalize(s, "players", mode, v, given, &z, &e) == RN_EINVAL);
  CHECK(strcmp(e.msg, msg) == 0);
  if (strcmp(e.msg, msg) != 0) fprintf(stderr, "  got: %s\n  want: %s\n", e.msg, msg);
  msgpack_zone_destroy(&z);
  rn_schema_free(s);
}

static void test_errors_name_relation_and_column(void)
{
  msgpack_object v[5] = { obj_int(1), obj_int(5), obj_nil(), obj_nil(), obj_nil() };
  uint8_t given[5] = { 1, 1, 0, 0, 0 };
  expect_error(RN_ROW_FULL, v, given, "players: column \"@NAME\": expected string, got number");
  msgpack_object v2[5] = { obj_f(7.5), obj_s("a"), obj_nil(), obj_nil(), obj_nil() };
  expect_error(RN_ROW_FULL, v2, given, "players: column \"id\": expected int, got number 7.5");
  msgpack_object v3[5] = { obj_nil(), obj_s("a"), obj_nil(), obj_nil(), obj_nil() };
  expect_error(RN_ROW_FULL, v3, given, "players: column \"id\": key columns cannot be null");
  uint8_t no_name[5] = { 1, 0, 0, 0, 0 };
  msgpack_object v4[5] = { obj_int(1), obj_nil(), obj_nil(), obj_nil(), obj_nil() };
  expect_error(RN_ROW_FULL, v4, no_name, "players: column \"@NAME\": missing (the column is not nullable)");
  uint8_t no_key[5] = { 0, 1, 0, 0, 0 };
  expect_error(RN_ROW_PATCH, v4, no_key, "players: column \"id\": key column is missing");
  msgpack_object v5[5] = { obj_int(1), obj_s("\xff\xfe"), obj_nil(), obj_nil(), obj_nil() };
  expect_error(RN_ROW_FULL, v5, given, "players: column \"@NAME\": expected string, got string that is not valid UTF-8");
}

static void test_patch_leaves_absent_columns_alone(void)
{
  rn_schema *s = players();
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  rn_err e = { .code = RN_OK };
  msgpack_object v[5] = { obj_int(1), obj_nil(), obj_int(3), obj_nil(), obj_nil() };
  uint8_t given[5] = { 1, 0, 1, 0, 1 }; /* w set to null explicitly */
  CHECK(rn_row_normalize(s, "players", RN_ROW_PATCH, v, given, &z, &e) == 0);
  CHECK(v[4].type == MSGPACK_OBJECT_NIL);
  uint8_t null_score[5] = { 1, 0, 1, 0, 0 };
  msgpack_object v2[5] = { obj_int(1), obj_nil(), obj_nil(), obj_nil(), obj_nil() };
  CHECK(rn_row_normalize(s, "players", RN_ROW_PATCH, v2, null_score, &z, &e) == RN_EINVAL);
  CHECK(strcmp(e.msg, "players: column \"score\": null given but the column is not nullable") == 0);
  msgpack_zone_destroy(&z);
  rn_schema_free(s);
}

/* rn_row_patch gives the bytes rn_row_pack gives for the merged row. */
static void test_row_patch_equals_packing_the_merged_row(void)
{
  rn_schema *s = players();
  msgpack_sbuffer old, want, got;
  msgpack_sbuffer_init(&old);
  msgpack_sbuffer_init(&want);
  msgpack_sbuffer_init(&got);
  msgpack_object before[5] = { obj_int(1), obj_s("ann"), obj_int(70000), obj_nil(), obj_f(2.5) };
  rn_row_pack(s, before, &old);
  for (unsigned mask = 0; mask < 32; mask++) {
    msgpack_object now[5] = { obj_int(1), obj_s("a much longer name than before"), obj_int(-3), obj_nil(), obj_nil() };
    uint8_t given[5];
    msgpack_object merged[5];
    for (int i = 0; i < 5; i++) {
      given[i] = (mask >> i) & 1;
      merged[i] = given[i] ? now[i] : before[i];
    }
    msgpack_sbuffer_clear(&want);
    msgpack_sbuffer_clear(&got);
    rn_row_pack(s, merged, &want);
    CHECK(rn_row_patch(s, old.data, old.size, now, given, &got) == 0);
    CHECK(got.size == want.size && memcmp(got.data, want.data, want.size) == 0);
  }
  CHECK(rn_row_patch(s, old.data, old.size - 1, before, (uint8_t[5]){ 0 }, &got) == -1); /* truncated */
  msgpack_sbuffer_destroy(&old);
  msgpack_sbuffer_destroy(&want);
  msgpack_sbuffer_destroy(&got);
  rn_schema_free(s);
}

/* rn_row_pack writes rows of scalars itself: byte for byte what
 * msgpack_pack_object writes, at every boundary of every form (stored rows
 * are compared as bytes), with containers and float32 left to msgpack-c;
 * rn_row_patch the same, for rows wider than a fixarray too. */
static void test_row_pack_writes_what_msgpack_writes(void)
{
  static const int64_t ints[] = { 0, 1, 31, 32, 127, 128, 255, 256, 65535, 65536, 4294967295LL, 4294967296LL,
                                  INT64_MAX, -1, -31, -32, -33, -127, -128, -129, -32767, -32768, -32769,
                                  -2147483647LL, -2147483648LL, -2147483649LL, INT64_MIN };
  static const uint32_t lens[] = { 0, 1, 31, 32, 255, 256, 65535, 65536 };
  static char text[65536];
  memset(text, 'x', sizeof text);
  enum { NVALS = 27 + 2 * 8 + 7 };
  msgpack_object vals[NVALS];
  int n = 0;
  for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) vals[n++] = obj_int(ints[i]);
  for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
    msgpack_object str = { .type = MSGPACK_OBJECT_STR }, bin = { .type = MSGPACK_OBJECT_BIN };
    str.via.str.ptr = bin.via.bin.ptr = text;
    str.via.str.size = bin.via.bin.size = lens[i];
    vals[n++] = str;
    vals[n++] = bin;
  }
  vals[n++] = obj_f(2.5);
  vals[n++] = obj_f(-0.0);
  vals[n++] = obj_nil();
  vals[n++] = (msgpack_object){ .type = MSGPACK_OBJECT_BOOLEAN, .via.boolean = true };
  vals[n++] = (msgpack_object){ .type = MSGPACK_OBJECT_BOOLEAN, .via.boolean = false };
  vals[n++] = (msgpack_object){ .type = MSGPACK_OBJECT_NEGATIVE_INTEGER, .via.i64 = 5 }; /* not normalized */
  vals[n++] = (msgpack_object){ .type = MSGPACK_OBJECT_FLOAT32, .via.f64 = 1.5 };         /* msgpack-c's */
  CHECK(n == NVALS);
  msgpack_sbuffer want, got, old;
  msgpack_sbuffer_init(&want);
  msgpack_sbuffer_init(&got);
  msgpack_sbuffer_init(&old);
  for (int width = 1; width <= NVALS; width += width < 20 ? 1 : 7) { /* across the fixarray bound */
    rn_err e;
    rn_schema *s = rn_schema_new();
    for (int c = 0; c < width; c++) {
      char name[16];
      snprintf(name, sizeof name, "c%d", c);
      rn_schema_add(s, name, strlen(name), RN_T_ANY, true, NULL, &e);
    }
    for (int from = 0; from + width <= NVALS; from++) {
      msgpack_sbuffer_clear(&want);
      msgpack_sbuffer_clear(&got);
      msgpack_packer pk;
      msgpack_packer_init(&pk, &want, msgpack_sbuffer_write);
      msgpack_pack_array(&pk, (size_t)width);
      for (int c = 0; c < width; c++) msgpack_pack_object(&pk, vals[from + c]);
      rn_row_pack(s, vals + from, &got);
      CHECK(got.size == want.size && memcmp(got.data, want.data, want.size) == 0);
      uint8_t given[NVALS];
      msgpack_object nils[NVALS];
      for (int c = 0; c < width; c++) { given[c] = c % 2; nils[c] = obj_nil(); }
      msgpack_sbuffer_clear(&old);
      rn_row_pack(s, nils, &old); /* the patch's given columns are vals, the others stay null */
      for (int c = 0; c < width; c++) if (!given[c]) nils[c] = obj_nil(); else nils[c] = vals[from + c];
      msgpack_sbuffer_clear(&want);
      msgpack_packer_init(&pk, &want, msgpack_sbuffer_write);
      msgpack_pack_array(&pk, (size_t)width);
      for (int c = 0; c < width; c++) msgpack_pack_object(&pk, nils[c]);
      msgpack_sbuffer_clear(&got);
      CHECK(rn_row_patch(s, old.data, old.size, vals + from, given, &got) == 0);
      CHECK(got.size == want.size && memcmp(got.data, want.data, want.size) == 0);
    }
    rn_schema_free(s);
  }
  msgpack_sbuffer_destroy(&want);
  msgpack_sbuffer_destroy(&got);
  msgpack_sbuffer_destroy(&old);
}

static void test_maps_sort_and_structs_become_arrays(void)
{
  rn_err e = { .code = RN_OK };
  rn_schema *pos = rn_schema_new();
  rn_schema_add(pos, "x", 1, RN_T_INT, false, NULL, &e);
  rn_schema_add(pos, "y", 1, RN_T_INT, true, NULL, &e);
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "m", 1, RN_T_MAP, false, NULL, &e);
  rn_schema_add(s, "pos", 3, RN_T_STRUCT, false, pos, &e);
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  msgpack_object_kv kv[2] = { { obj_s("b"), obj_int(2) }, { obj_s("a"), obj_int(1) } };
  msgpack_object_kv fields[1] = { { obj_s("x"), obj_f(3.0) } };
  msgpack_object v[2];
  v[0].type = MSGPACK_OBJECT_MAP; v[0].via.map.size = 2; v[0].via.map.ptr = kv;
  v[1].type = MSGPACK_OBJECT_MAP; v[1].via.map.size = 1; v[1].via.map.ptr = fields;
  uint8_t given[2] = { 1, 1 };
  CHECK(rn_row_normalize(s, "r", RN_ROW_FULL, v, given, &z, &e) == 0);
  CHECK(kv[0].key.via.str.ptr[0] == 'a');                    /* sorted by key */
  CHECK(v[1].type == MSGPACK_OBJECT_ARRAY && v[1].via.array.size == 2);
  CHECK(v[1].via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER); /* 3.0 -> 3 */
  CHECK(v[1].via.array.ptr[1].type == MSGPACK_OBJECT_NIL);   /* absent nullable field */
  msgpack_object_kv bad[1] = { { obj_s("z"), obj_int(1) } };
  v[1].type = MSGPACK_OBJECT_MAP; v[1].via.map.size = 1; v[1].via.map.ptr = bad;
  CHECK(rn_row_normalize(s, "r", RN_ROW_FULL, v, given, &z, &e) == RN_EINVAL);
  CHECK(strcmp(e.msg, "r: column \"pos\": unknown field \"z\"") == 0);
  msgpack_zone_destroy(&z);
  rn_schema_free(s);
}

static void test_schema_declaration_errors(void)
{
  rn_err e = { .code = RN_OK };
  rn_schema *s = rn_schema_new();
  CHECK(rn_schema_add(s, "a b", 3, RN_T_INT, false, NULL, &e) == 0);
  CHECK(rn_schema_add(s, "a b", 3, RN_T_INT, false, NULL, &e) == RN_EINVAL);
  CHECK(strcmp(e.msg, "duplicate column name \"a b\"") == 0);
  CHECK(rn_schema_add(s, "", 0, RN_T_INT, false, NULL, &e) == RN_EINVAL);
  CHECK(rn_schema_add(s, "l", 1, RN_T_LIST, false, NULL, &e) == 1);
  int slot = 1;
  CHECK(rn_schema_set_key(s, &slot, 1, "t", &e) == RN_EINVAL);
  CHECK(strcmp(e.msg, "t: key column \"l\" has type list; keys are int, float, string, bool or bytes") == 0);
  rn_schema_free(s);
}

/* rn_row_spans agrees with msgpack-c's own decoder on random nested rows. */
static uint64_t rng = 88172645463325252ULL;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static void pack_random(msgpack_packer *pk, int depth)
{
  static const char blob[70000] = { 0 };
  int kind = (int)(next() % (depth > 3 ? 9 : 12));
  switch (kind) {
  case 0: msgpack_pack_nil(pk); break;
  case 1: msgpack_pack_true(pk); break;
  case 2: msgpack_pack_int64(pk, (int64_t)next()); break;
  case 3: msgpack_pack_int64(pk, -(int64_t)(next() % 200)); break;
  case 4: msgpack_pack_uint64(pk, next() % 70000); break;
  case 5: msgpack_pack_double(pk, (double)next()); break;
  case 6: msgpack_pack_float(pk, 1.5f); break;
  case 7: { size_t n = next() % 3 == 0 ? next() % 70000 : next() % 40;
            msgpack_pack_str_with_body(pk, blob, n); break; }
  case 8: { size_t n = next() % 300; msgpack_pack_bin_with_body(pk, blob, n); break; }
  case 9: case 10: { size_t n = next() % (next() % 4 == 0 ? 40 : 5);
            msgpack_pack_array(pk, n);
            for (size_t i = 0; i < n; i++) pack_random(pk, depth + 1);
            break; }
  default: { size_t n = next() % 20;
            msgpack_pack_map(pk, n);
            for (size_t i = 0; i < 2 * n; i++) pack_random(pk, depth + 1);
            break; }
  }
}

static void test_row_spans_match_the_decoder(void)
{
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_zone z;
  msgpack_zone_init(&z, 4096);
  for (int round = 0; round < 2000; round++) {
    msgpack_sbuffer_clear(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    int ncols = (int)(next() % 20);
    msgpack_pack_array(&pk, (size_t)ncols);
    size_t want[21];
    for (int i = 0; i < ncols; i++) { want[i] = sb.size; pack_random(&pk, 0); }
    want[ncols] = sb.size;
    size_t got[21];
    CHECK(rn_row_spans(sb.data, sb.size, ncols, ncols, got) == 0);
    for (int i = 0; i <= ncols; i++) CHECK(got[i] == want[i]);
    int upto = ncols ? (int)(next() % (uint64_t)ncols) : 0; /* a prefix of the values */
    CHECK(rn_row_spans(sb.data, sb.size, ncols, upto, got) == 0);
    for (int i = 0; i <= upto; i++) CHECK(got[i] == want[i]);
    CHECK(rn_row_spans(sb.data, sb.size, ncols + 1, ncols + 1, got) == -1); /* wrong width */
    CHECK(rn_row_spans(sb.data, sb.size, ncols, ncols + 1, got) == -1);     /* past the end */
    if (sb.size > 1) CHECK(rn_row_spans(sb.data, sb.size - 1, ncols, ncols, got) == -1 || ncols == 0); /* truncated */
    msgpack_zone_clear(&z);
  }
  msgpack_zone_destroy(&z);
  msgpack_sbuffer_destroy(&sb);
}

/* rn_row_to_map writes headers and copies value bytes itself: it must
 * write exactly what packing each decoded value under its name would, for
 * fixmap/map16 widths, every string header width of a name, and a row
 * wider than its stack buffer of offsets. */
static void test_row_to_map_equals_packing_the_map(void)
{
  static const int widths[] = { 1, 3, 15, 16, 17, 64, 65, 70, 300 };
  static const size_t name_lens[] = { 8, 31, 32, 255, 256, 508 }; /* 508: the longest name allowed */
  char *name = malloc(509);
  memset(name, 'n', 508);
  msgpack_sbuffer row, want, got;
  msgpack_sbuffer_init(&row);
  msgpack_sbuffer_init(&want);
  msgpack_sbuffer_init(&got);
  msgpack_zone z;
  msgpack_zone_init(&z, 4096);
  for (size_t w = 0; w < sizeof widths / sizeof *widths; w++) {
    rn_err e;
    rn_schema *s = rn_schema_new();
    for (int i = 0; i < widths[w]; i++) {
      size_t len = name_lens[(size_t)i % (sizeof name_lens / sizeof *name_lens)];
      snprintf(name, 16, "%07d", i); /* unique names; the rest stays 'n' */
      name[7] = 'n';
      CHECK(rn_schema_add(s, name, len, RN_T_ANY, true, NULL, &e) >= 0);
    }
    for (int round = 0; round < 20; round++) {
      msgpack_sbuffer_clear(&row);
      msgpack_sbuffer_clear(&want);
      msgpack_sbuffer_clear(&got);
      msgpack_packer pk, wk;
      msgpack_packer_init(&pk, &row, msgpack_sbuffer_write);
      msgpack_packer_init(&wk, &want, msgpack_sbuffer_write);
      msgpack_pack_array(&pk, (size_t)widths[w]);
      for (int i = 0; i < widths[w]; i++) pack_random(&pk, 0);
      const msgpack_object *v = rn_row_unpack(row.data, row.size, widths[w], &z);
      CHECK(v != NULL);
      msgpack_pack_map(&wk, (size_t)widths[w]);
      for (int i = 0; v && i < widths[w]; i++) {
        msgpack_pack_str_with_body(&wk, s->cols[i].name, s->cols[i].name_len);
        msgpack_pack_object(&wk, v[i]);
      }
      msgpack_sbuffer_write(&got, "x", 1); /* appends after what is there */
      CHECK(rn_row_to_map(s, row.data, row.size, &z, &got) == 0);
      CHECK(got.size == want.size + 1 && memcmp(got.data + 1, want.data, want.size) == 0);
      CHECK(rn_row_to_map(s, row.data, row.size - 1, &z, &got) == -1); /* truncated */
      msgpack_zone_clear(&z);
    }
    rn_schema_free(s);
  }
  msgpack_zone_destroy(&z);
  msgpack_sbuffer_destroy(&row);
  msgpack_sbuffer_destroy(&want);
  msgpack_sbuffer_destroy(&got);
  free(name);
}

/* Same type and value, strings and bins at the same bytes (where an empty
 * one points does not matter), floats bit for bit: what the rest of the core would read from either decoding. */
static bool same_object(const msgpack_object *a, const msgpack_object *b)
{
  if (a->type != b->type) return false;
  switch (a->type) {
  case MSGPACK_OBJECT_NIL: return true;
  case MSGPACK_OBJECT_BOOLEAN: return a->via.boolean == b->via.boolean;
  case MSGPACK_OBJECT_POSITIVE_INTEGER: return a->via.u64 == b->via.u64;
  case MSGPACK_OBJECT_NEGATIVE_INTEGER: return a->via.i64 == b->via.i64;
  case MSGPACK_OBJECT_FLOAT32: case MSGPACK_OBJECT_FLOAT64: return memcmp(&a->via.f64, &b->via.f64, 8) == 0;
  case MSGPACK_OBJECT_STR: case MSGPACK_OBJECT_BIN:
    return a->via.str.size == b->via.str.size && (a->via.str.size == 0 || a->via.str.ptr == b->via.str.ptr);
  case MSGPACK_OBJECT_MAP:
    if (a->via.map.size != b->via.map.size) return false;
    for (uint32_t i = 0; i < a->via.map.size; i++)
      if (!same_object(&a->via.map.ptr[i].key, &b->via.map.ptr[i].key) ||
          !same_object(&a->via.map.ptr[i].val, &b->via.map.ptr[i].val))
        return false;
    return true;
  default: return false;
  }
}

/* A value of every scalar encoding msgpack has, at the edges of each
 * width (signed forms holding positive values too, as other packers write
 * them), and some it does not decode itself (ext, containers). */
static const char *const RAW_VALUES[] = {
  "\x00", "\x7f", "\xe0", "\xff", "\xc0", "\xc2", "\xc3", "\xcc\xff", "\xcd\xff\xff", "\xce\xff\xff\xff\xff",
  "\xcf\xff\xff\xff\xff\xff\xff\xff\xff", "\xd0\x05", "\xd0\x80", "\xd1\x7f\xff", "\xd1\x80\x00",
  "\xd2\x7f\xff\xff\xff", "\xd2\x80\x00\x00\x00", "\xd3\x7f\xff\xff\xff\xff\xff\xff\xff",
  "\xd3\x80\x00\x00\x00\x00\x00\x00\x00", "\xd3\x00\x00\x00\x00\x00\x00\x00\x01", "\xca\x3f\xc0\x00\x00",
  "\xca\x7f\xc0\x00\x01", "\xcb\x80\x00\x00\x00\x00\x00\x00\x00", "\xa3" "abc", "\xd9\x02" "ab",
  "\xda\x00\x01" "a", "\xdb\x00\x00\x00\x02" "ab", "\xc4\x01" "x", "\xc5\x00\x02" "xy", "\xc6\x00\x00\x00\x01" "z",
  "\xd4\x01\x02", "\x91\x01", "\x81\xa1" "k" "\x01",
};
static const size_t RAW_LENS[] = { 1, 1, 1, 1, 1, 1, 1, 2, 3, 5, 9, 2, 2, 3, 3, 5, 5, 9, 9, 9, 5, 5, 9, 4, 4, 4,
                                   7, 3, 5, 6, 3, 2, 4 };
#define RAW_SCALARS 30 /* the first 30 are scalars */

/* rn_unpack_flat_map decodes a host's change itself: every map it takes
 * must come out as msgpack_unpack's, and it must leave every other map to
 * msgpack_unpack (a container or ext value, a key that is not a string). */
/* rn_put_uint writes what msgpack_pack_uint64 does, at every width's edges. */
static void test_put_uint_writes_what_msgpack_writes(void)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  for (int bits = 0; bits <= 64; bits++) {
    uint64_t edge = bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits);
    for (int d = -2; d <= 2; d++) {
      uint64_t u = edge + (uint64_t)(int64_t)d;
      char mine[16];
      msgpack_sbuffer_clear(&sb);
      msgpack_pack_uint64(&pk, u);
      size_t n = (size_t)(rn_put_uint(mine, u) - mine);
      CHECK(n == sb.size && memcmp(mine, sb.data, n) == 0);
    }
  }
  msgpack_sbuffer_destroy(&sb);
}

static void test_flat_map_decodes_as_msgpack_does(void)
{
  CHECK(sizeof RAW_VALUES / sizeof *RAW_VALUES == sizeof RAW_LENS / sizeof *RAW_LENS);
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_zone z;
  msgpack_zone_init(&z, 4096);
  int flat = 0, other = 0;
  for (int round = 0; round < 3000; round++) {
    msgpack_sbuffer_clear(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    size_t n = next() % 4 == 0 ? next() % 40 : next() % 6;
    bool scalars = true;
    msgpack_pack_map(&pk, n);
    for (size_t i = 0; i < n; i++) {
      if (next() % 50 == 0) { msgpack_pack_int64(&pk, 1); scalars = false; } /* a key not a string */
      else msgpack_pack_str_with_body(&pk, "key_of_some_length_over_thirty_two", next() % 35);
      if (next() % 2) {
        size_t k = next() % (sizeof RAW_LENS / sizeof *RAW_LENS);
        msgpack_sbuffer_write(&sb, RAW_VALUES[k], RAW_LENS[k]);
        scalars &= k < RAW_SCALARS;
      } else {
        size_t before = sb.size;
        pack_random(&pk, 0);
        unsigned char b = (unsigned char)sb.data[before];
        scalars &= !((b >= 0x80 && b <= 0x9f) || b == 0xdc || b == 0xdd || b == 0xde || b == 0xdf);
      }
    }
    msgpack_object fast, slow;
    size_t off = 0;
    CHECK(rn_msgpack_size(sb.data, sb.size) == sb.size);
    int rc = rn_unpack_flat_map(sb.data, sb.size, &z, &fast);
    CHECK(msgpack_unpack(sb.data, sb.size, &off, &z, &slow) == MSGPACK_UNPACK_SUCCESS);
    CHECK(rc == (scalars ? 1 : 0));
    if (rc == 1) CHECK(same_object(&fast, &slow));
    flat += rc == 1;
    other += rc == 0;
    msgpack_zone_clear(&z);
  }
  CHECK(flat > 500 && other > 500);
  CHECK(rn_unpack_flat_map("\x91\x01", 2, &z, &(msgpack_object){ 0 }) == 0); /* not a map */
  CHECK(rn_unpack_flat_map("\xc0", 1, &z, &(msgpack_object){ 0 }) == 0);
  msgpack_zone_destroy(&z);
  msgpack_sbuffer_destroy(&sb);
}

int main(void)
{
  RUN(test_row_to_map_equals_packing_the_map);
  RUN(test_flat_map_decodes_as_msgpack_does);
  RUN(test_put_uint_writes_what_msgpack_writes);
  RUN(test_row_spans_match_the_decoder);
  RUN(test_full_row_defaults_and_coercion);
  RUN(test_errors_name_relation_and_column);
  RUN(test_patch_leaves_absent_columns_alone);
  RUN(test_row_patch_equals_packing_the_merged_row);
  RUN(test_row_pack_writes_what_msgpack_writes);
  RUN(test_maps_sort_and_structs_become_arrays);
  RUN(test_schema_declaration_errors);
  return CHECK_REPORT();
}
