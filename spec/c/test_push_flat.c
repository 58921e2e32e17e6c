/* test_push_flat.c — rn_push's fast path for a host's usual change (a
 * fixmap of string keys and scalar values, decoded straight into slot
 * values: rn_flat_map_slots) against the general path (msgpack-c's decoder,
 * then rn_map_slots): on random maps, clean and damaged, whatever the fast
 * path takes it decodes to the very slot values the general one gives, and
 * it takes every clean change. */
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pipeline.h"
#include "row.h"
#include "runnel.h"

static const rn_column_def cols[] = {
  { "id", "int", 0, NULL, 0, NULL },      { "name", "string", 1, NULL, 0, NULL },
  { "score", "float", 1, NULL, 0, NULL }, { "flag", "bool", 1, NULL, 0, NULL },
  { "blob", "bytes", 1, NULL, 0, NULL },  { "n2", "int", 1, NULL, 0, NULL },
};
#define NCOLS 6
static const char *const key[] = { "id" };


/* A random scalar (every msgpack width and kind a host may send), or now
 * and then a container, which makes the map unclean. */
static void pack_value(msgpack_packer *pk, bool *clean)
{
  static const char text[300] = "abcdefghijklmnopqrstuvwxyz";
  switch (check_random(16)) {
  case 0: msgpack_pack_int64(pk, (int64_t)check_random(128)); break;
  case 1: msgpack_pack_int64(pk, -(int64_t)check_random(33)); break;
  case 2: msgpack_pack_uint64(pk, 200 + check_random(60000)); break;
  case 3: msgpack_pack_uint64(pk, UINT64_MAX - check_random(1000)); break;
  case 4: msgpack_pack_int64(pk, -1000 - (int64_t)check_random(1000000000)); break;
  case 5: msgpack_pack_int64(pk, INT64_MIN + (int64_t)check_random(1000)); break;
  case 6: msgpack_pack_float(pk, (float)check_random(1000) / 7.0f); break;
  case 7: msgpack_pack_double(pk, (double)check_random(1000000) / 3.0); break;
  case 8: msgpack_pack_nil(pk); break;
  case 9: if (check_random(2)) msgpack_pack_true(pk); else msgpack_pack_false(pk); break;
  case 10: msgpack_pack_str_with_body(pk, text, check_random(32)); break;
  case 11: msgpack_pack_str_with_body(pk, text, 32 + check_random(268)); break;
  case 12: msgpack_pack_bin_with_body(pk, text, check_random(300)); break;
  case 13: msgpack_pack_int8(pk, (int8_t)check_random(256)); break; /* fixed-width forms too */
  case 14: msgpack_pack_fix_int32(pk, (int32_t)check_random(1u << 31)); break;
  default:
    *clean = false;
    msgpack_pack_array(pk, 1);
    msgpack_pack_int(pk, 1);
  }
}

/* A key: a column's name (as fixstr or str8), or now and then an unknown
 * name, a repeated one or an int, which make the map unclean. */
static void pack_key(msgpack_sbuffer *sb, msgpack_packer *pk, bool *used, bool *clean)
{
  int r = (int)check_random(20), c = (int)check_random(NCOLS);
  if (r == 0) { *clean = false; msgpack_pack_str_with_body(pk, "nope", 4); return; }
  if (r == 1) { *clean = false; msgpack_pack_int(pk, 3); return; }
  if (r == 2) { *clean = false; msgpack_pack_str_with_body(pk, "i", 1); return; }
  for (int k = 0; k < NCOLS && used[c] && r != 3; k++) c = (c + 1) % NCOLS;
  if (used[c]) *clean = false; /* a repeated column */
  used[c] = true;
  size_t n = strlen(cols[c].name);
  if (r == 4) { /* str8: another encoding of the same name */
    char head[2] = { (char)0xd9, (char)n };
    msgpack_sbuffer_write(sb, head, 2);
    msgpack_sbuffer_write(sb, cols[c].name, n);
  } else {
    msgpack_pack_str_with_body(pk, cols[c].name, n);
  }
}

/* One random change into sb; true if it is clean (the fast path's kind). */
static bool random_change(msgpack_sbuffer *sb)
{
  msgpack_packer pk;
  msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
  bool clean = true, used[NCOLS] = { false };
  int n = (int)check_random(NCOLS + 3);
  if (check_random(30) == 0) { /* a map16 header for a small map: fine, but not a fixmap */
    char head[3] = { (char)0xde, 0, (char)n };
    msgpack_sbuffer_write(sb, head, 3);
    clean = false;
  } else {
    msgpack_pack_map(&pk, (size_t)n);
  }
  for (int i = 0; i < n; i++) {
    pack_key(sb, &pk, used, &clean);
    pack_value(&pk, &clean);
  }
  int damage = (int)check_random(25);
  if (damage == 0 && sb->size > 1) { sb->size -= 1 + check_random(sb->size - 1); clean = false; } /* cut short */
  if (damage == 1) { msgpack_pack_nil(&pk); clean = false; } /* a byte past the map */
  if (damage == 2 && sb->size > 1) { sb->data[1 + check_random(sb->size - 1)] = (char)0xc1; clean = false; } /* never used */
  return clean;
}

static bool same_object(const msgpack_object *a, const msgpack_object *b)
{
  if (a->type != b->type) return false;
  if (a->type == MSGPACK_OBJECT_STR || a->type == MSGPACK_OBJECT_BIN)
    return a->via.str.size == b->via.str.size && (!a->via.str.size || a->via.str.ptr == b->via.str.ptr); /* into the map */
  if (a->type == MSGPACK_OBJECT_NIL) return true;
  if (a->type == MSGPACK_OBJECT_BOOLEAN) return a->via.boolean == b->via.boolean;
  return memcmp(&a->via.u64, &b->via.u64, sizeof a->via.u64) == 0; /* ints; floats by their bits */
}

/* The general path's slot values: decoded by msgpack-c (after the size
 * check rn_push makes), then rn_map_slots; false if either refuses. */
static bool general_slots(rn_pipeline *p, rn_rel *r, const msgpack_sbuffer *sb, msgpack_object **vals,
                          uint8_t **given)
{
  msgpack_object m;
  size_t off = 0;
  if (rn_msgpack_size(sb->data, sb->size) != sb->size) return false;
  if (rn_unpack(sb->data, sb->size, &off, &p->scratch, &m) != MSGPACK_UNPACK_SUCCESS) return false;
  return rn_map_slots(p, r, &m, vals, given) == 0;
}

static void test_fast_path_gives_the_general_paths_slots(void)
{
  rn_pipeline *p;
  rn_rel *r;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", cols, NCOLS, key, 1, &r) == 0);
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  int taken = 0, clean_seen = 0;
  for (int round = 0; round < 20000 && !check_failed_now; round++) {
    msgpack_sbuffer_clear(&sb);
    bool clean = random_change(&sb);
    msgpack_object *fv = NULL, *gv = NULL;
    uint8_t *fg = NULL, *gg = NULL;
    int fast = rn_flat_map_slots(p, r, sb.data, sb.size, &fv, &fg);
    bool general = general_slots(p, r, &sb, &gv, &gg);
    CHECK(fast == 0 || fast == 1);
    if (clean) CHECK(fast == 1 && general);
    if (fast == 1) {
      CHECK(general);
      for (int i = 0; general && i < NCOLS; i++) {
        CHECK(fg[i] == gg[i]);
        if (fg[i] && gg[i]) CHECK(same_object(&fv[i], &gv[i]));
      }
    }
    taken += fast == 1;
    clean_seen += clean;
    msgpack_zone_clear(&p->scratch);
  }
  CHECK(clean_seen > 3000 && taken >= clean_seen);
  CHECK(rn_flat_map_slots(p, r, NULL, 0, &(msgpack_object *){ NULL }, &(uint8_t *){ NULL }) == 0);
  msgpack_sbuffer_destroy(&sb);
  rn_pipeline_close(p);
}

/* Through rn_push: a clean change lands as the general path would put it
 * (a stored row read back by rn_get), and an unclean one still gets the
 * general path's message. */
static void test_push_stores_and_refuses_as_before(void)
{
  rn_pipeline *p;
  rn_rel *r;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", cols, NCOLS, key, 1, &r) == 0);
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 3);
  msgpack_pack_str_with_body(&pk, "name", 4);
  msgpack_pack_str_with_body(&pk, "ann", 3);
  msgpack_pack_str_with_body(&pk, "id", 2);
  msgpack_pack_int(&pk, 7);
  msgpack_pack_str_with_body(&pk, "score", 5);
  msgpack_pack_int(&pk, 3); /* an int for a float column: normalized as before */
  CHECK(rn_insert(p, r, sb.data, sb.size) == 0);
  msgpack_sbuffer_clear(&sb);
  msgpack_pack_map(&pk, 2);
  msgpack_pack_str_with_body(&pk, "id", 2);
  msgpack_pack_int(&pk, 8);
  msgpack_pack_str_with_body(&pk, "nmae", 4);
  msgpack_pack_int(&pk, 1);
  CHECK(rn_insert(p, r, sb.data, sb.size) == RN_EINVAL);
  CHECK(strstr(rn_errmsg(p), "t: unknown column \"nmae\"") != NULL);
  msgpack_sbuffer_clear(&sb);
  msgpack_pack_map(&pk, 1);
  msgpack_pack_str_with_body(&pk, "id", 2);
  msgpack_pack_int(&pk, 7);
  const void *row;
  size_t len;
  CHECK(rn_get(p, r, sb.data, sb.size, &row, &len, NULL) == 0);
  msgpack_sbuffer want;
  msgpack_sbuffer_init(&want);
  msgpack_packer_init(&pk, &want, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, NCOLS);
  msgpack_pack_str_with_body(&pk, "id", 2);
  msgpack_pack_int(&pk, 7);
  msgpack_pack_str_with_body(&pk, "name", 4);
  msgpack_pack_str_with_body(&pk, "ann", 3);
  msgpack_pack_str_with_body(&pk, "score", 5);
  msgpack_pack_double(&pk, 3.0);
  for (int i = 3; i < NCOLS; i++) {
    msgpack_pack_str_with_body(&pk, cols[i].name, strlen(cols[i].name));
    msgpack_pack_nil(&pk);
  }
  CHECK(row && len == want.size && memcmp(row, want.data, len) == 0);
  msgpack_sbuffer_destroy(&want);
  msgpack_sbuffer_destroy(&sb);
  rn_pipeline_close(p);
}

int main(void)
{
  RUN(test_fast_path_gives_the_general_paths_slots);
  RUN(test_push_stores_and_refuses_as_before);
  return CHECK_REPORT();
}
